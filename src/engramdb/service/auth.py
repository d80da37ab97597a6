"""Who is calling, and what they may do.

In **local** mode every request is the local tenant's, with no credentials (development).
In **production** mode a request carries an API key (``Authorization: Bearer ek_…`` or
``X-API-Key``) or an HS256 JWT (``Authorization: Bearer <jwt>``) whose claims name the
``tenant``, the user (``sub``, optional) and the ``role`` (``reader`` or ``writer``,
default ``writer``); ``exp`` is required. A JWT's tenant and user are registered on first
sight (lazy population); an API key's tenant must exist, as the key was issued for it.

No or invalid credentials are 401; valid credentials asking for another tenant
(``X-Tenant-ID``) or another user than their own (``X-User-ID``, a body's ``user_id``), or
a reader asking to write, are 403. A credential without a user acts for the whole tenant and
may name any user.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Annotated, Literal

import jwt
from fastapi import Depends, Header, Request
from fastapi.security import APIKeyHeader, HTTPAuthorizationCredentials, HTTPBearer

from engramdb.core.errors import (
    AuthenticationError,
    InvalidScopeError,
    PermissionDeniedError,
    UsageError,
)
from engramdb.core.scope import Scope
from engramdb.engine import Engine, ScopedMemory
from engramdb.orchestrator.tenancy import KEY_PREFIX, Role
from engramdb.service.settings import LOCAL_TENANT_NAME, ServiceSettings

_ROLES: frozenset[str] = frozenset({"reader", "writer"})
bearer = HTTPBearer(auto_error=False, description="An API key (ek_…) or an HS256 JWT")
api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False)


@dataclass(frozen=True)
class Principal:
    """Verified credentials: the tenant, the user they are bound to (if any), the role, and
    for an API key its id."""

    tenant: str
    user: str | None
    role: Role
    via: Literal["local", "api_key", "jwt"]
    key_id: str | None = None

    @property
    def identity(self) -> tuple[str, ...]:
        """Who holds these credentials, for what is bound to its holder (stored answers to
        idempotent writes): an API key by its id, a JWT by its role and subject (so that a
        refreshed token is the same holder)."""
        return (self.tenant, self.via, self.key_id or "", self.role, self.user or "")


@dataclass(frozen=True)
class Caller:
    """The principal and the scope one request works in."""

    principal: Principal
    user: str | None
    agent: str | None
    session: str | None

    @property
    def tenant(self) -> str:
        """The request's tenant (always the principal's)."""
        return self.principal.tenant

    def acting_as(self, user_id: str | None) -> str | None:
        """The user a request body names (``None``: the caller's own), if it may."""
        if user_id is None:
            return self.user
        if self.principal.user is not None and user_id != self.principal.user:
            raise PermissionDeniedError(
                "these credentials may not act for another user", user=user_id
            )
        return user_id

    def check_owner(self, owner: str | None, resource: str, resource_id: str) -> None:
        """Refuse a resource of another user to credentials bound to a user."""
        bound = self.principal.user
        if bound is not None and owner not in (None, bound):
            raise PermissionDeniedError(
                f"this {resource} belongs to another user", resource=resource, id=resource_id
            )

    def memory(self, engine: Engine, *, user: str | None = None) -> ScopedMemory:
        """The scoped memory of this request (of ``user`` instead of the caller's, if set)."""
        return engine.scope(
            tenant=self.tenant, user=user or self.user, agent=self.agent, session=self.session
        )


def issue_token(
    secret: str,
    tenant: str,
    *,
    user: str | None = None,
    role: Role = "writer",
    ttl_s: int = 3600,
    audience: str | None = None,
) -> str:
    """An HS256 JWT this service accepts (for development and tests; production tokens come
    from the identity service, signed with the same secret)."""
    Scope(tenant=tenant, user=user)
    if len(secret) < 32:
        raise UsageError("the JWT secret must be at least 32 characters")
    if ttl_s <= 0:
        raise UsageError("a token's lifetime must be positive")
    claims: dict[str, object] = {"tenant": tenant, "role": role, "exp": int(time.time()) + ttl_s}
    if user is not None:
        claims["sub"] = user
    if audience is not None:
        claims["aud"] = audience
    return jwt.encode(claims, secret, algorithm="HS256")


def _decode_jwt(token: str, settings: ServiceSettings) -> Principal:
    if settings.jwt_secret is None:
        raise AuthenticationError("invalid credentials")
    try:
        claims = jwt.decode(
            token,
            settings.jwt_secret,
            algorithms=["HS256"],
            audience=settings.jwt_audience,
            options={"require": ["exp"]},
        )
    except jwt.ExpiredSignatureError as exc:
        raise AuthenticationError("the token has expired") from exc
    except jwt.InvalidTokenError as exc:
        raise AuthenticationError(f"invalid token: {exc}") from exc
    tenant, user, role = claims.get("tenant"), claims.get("sub"), claims.get("role", "writer")
    if not isinstance(tenant, str) or not tenant:
        raise AuthenticationError("the token names no tenant")
    if user is not None and not isinstance(user, str):
        raise AuthenticationError("the token's subject must be a string")
    if role not in _ROLES:
        raise AuthenticationError(f"the token's role must be one of {sorted(_ROLES)}")
    try:
        Scope(tenant=tenant, user=user)  # claims become scope fields: they must be valid ones
    except InvalidScopeError as exc:
        raise AuthenticationError(f"the token's claims are not valid: {exc.message}") from exc
    return Principal(tenant, user, "reader" if role == "reader" else "writer", "jwt")


async def _lazy_register(
    engine: Engine, known: set[tuple[str, str | None]], p: Principal, name: str = ""
) -> None:
    # One lookup per tenant and user per process; idempotent, so instances may race.
    if (p.tenant, p.user) in known:
        return
    await engine.tenancy.ensure_tenant(p.tenant, name)
    if p.user is not None:
        await engine.tenancy.ensure_user(p.tenant, p.user)
    known.add((p.tenant, p.user))


async def authenticate(request: Request) -> Principal:
    """The verified principal of ``request`` (computed once per request).

    Raises:
        AuthenticationError: production mode and no or invalid credentials.
    """
    cached = getattr(request.state, "principal", None)
    if isinstance(cached, Principal):
        return cached
    settings: ServiceSettings = request.app.state.settings
    engine: Engine = request.app.state.engine
    if settings.auth == "local":
        principal = Principal(settings.local_tenant, None, "writer", "local")
        await _lazy_register(engine, request.app.state.known, principal, LOCAL_TENANT_NAME)
    else:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip() if scheme.lower() == "bearer" else ""
        token = token or request.headers.get("x-api-key", "").strip()
        if not token:
            raise AuthenticationError("credentials required: an API key or a bearer token")
        if token.startswith(KEY_PREFIX):
            key = await engine.tenancy.verify_key(token)
            principal = Principal(key.tenant_id, key.user_id, key.role, "api_key", key.key_id)
        else:
            principal = _decode_jwt(token, settings)
            await _lazy_register(engine, request.app.state.known, principal)
    request.state.principal = principal
    return principal


async def read_access(
    request: Request,
    x_tenant_id: Annotated[str | None, Header(description="Must match the credentials")] = None,
    x_user_id: Annotated[str | None, Header(description="The user acted for")] = None,
    x_agent_id: Annotated[str | None, Header(description="The agent acting")] = None,
    x_session_id: Annotated[str | None, Header(description="The current session")] = None,
    _bearer: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)] = None,
    _api_key: Annotated[str | None, Depends(api_key_header)] = None,
) -> Caller:
    """The caller of a request that reads."""
    return caller_of(await authenticate(request), x_tenant_id, x_user_id, x_agent_id, x_session_id)


async def write_access(caller: Annotated[Caller, Depends(read_access)]) -> Caller:
    """The caller of a request that writes: a reader may not."""
    check_writer(caller.principal)
    return caller


def caller_of(
    principal: Principal,
    tenant: str | None,
    user: str | None,
    agent: str | None,
    session: str | None,
) -> Caller:
    """The caller acting as the scope headers ask, if ``principal`` may.

    Raises:
        PermissionDeniedError: another tenant, or another user than the credentials'.
        InvalidScopeError: a header is not a valid scope field.
    """
    if tenant is not None and tenant != principal.tenant:
        raise PermissionDeniedError("these credentials are not for this tenant", tenant=tenant)
    caller = Caller(principal, principal.user, agent or None, session or None)
    acting = caller.acting_as(user or None)
    Scope(tenant=principal.tenant, user=acting, agent=caller.agent, session=caller.session)
    return Caller(principal, acting, caller.agent, caller.session)


def check_writer(principal: Principal) -> None:
    """Refuse a principal that may only read."""
    if principal.role != "writer":
        raise PermissionDeniedError("these credentials may only read")


async def request_access(request: Request, *, write: bool) -> Caller:
    """The caller of ``request`` as ``read_access`` (and, if ``write``, ``write_access``)
    would find it, for code that runs before the route's own dependencies."""
    headers = request.headers
    caller = caller_of(
        await authenticate(request),
        headers.get("x-tenant-id"),
        headers.get("x-user-id"),
        headers.get("x-agent-id"),
        headers.get("x-session-id"),
    )
    if write:
        check_writer(caller.principal)
    return caller


ReadCaller = Annotated[Caller, Depends(read_access)]
WriteCaller = Annotated[Caller, Depends(write_access)]
