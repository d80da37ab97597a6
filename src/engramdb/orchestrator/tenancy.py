"""``Tenancy``: the tenants, users and API keys a served database knows, stored like every
other record (one namespace each, each change with its event) so that several service
instances share them through the database.

Tenants and users are local replicas of an identity service (the service spec): a JWT names
them, and they are created on first sight (``ensure_tenant``). API keys are issued here:
``ek_<key id>_<tenant>_<secret>`` (the tenant in lowercase base32), of which only the
SHA-256 of the whole key is stored. The key names its tenant so that verifying it reads
that tenant's records only (on PostgreSQL, row-level security admits nothing else), and its
id finds the record without a scan. Deleting a tenant removes everything stored under it;
deleting a user (the right to be forgotten) everything stored under that user, with the
user's registration and keys. Both blank the log of those scopes: what stays is tombstones
that name the scope, provider and key of each event, and nothing that was said.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import ClassVar, Literal

from pydantic import Field

from engramdb.core.errors import (
    AuthenticationError,
    ConflictError,
    InvalidScopeError,
    NotFoundError,
)
from engramdb.core.events import MemoryDeleted, ProducerRef, TraceContext
from engramdb.core.scope import Level, Scope, ScopeFilter
from engramdb.core.types import utc_now
from engramdb.orchestrator.resource_models import Resource
from engramdb.orchestrator.resources import (
    Page,
    ResourceStore,
    check_page,
    resource_spec,
)
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.backend import Backend, EventQuery
from engramdb.storage.records import Delete, Op, Record, RecordQuery, Redact, RedactScope

TENANT_SPEC = resource_spec("tenants")
USER_SPEC = resource_spec("users")
KEY_SPEC = resource_spec("api_keys")
TENANCY_SPECS = (TENANT_SPEC, USER_SPEC, KEY_SPEC)

Role = Literal["reader", "writer"]
KEY_PREFIX = "ek_"
#: The longest tenant code: base32 of a tenant id of 128 characters of up to 4 UTF-8 bytes.
_MAX_CODE = -(-128 * 4 * 8 // 5)
_KEY = re.compile(rf"^ek_([0-9a-f]{{12}})_([a-z2-7]{{1,{_MAX_CODE}}})_[A-Za-z0-9_-]{{20,100}}$")

#: Builds the provider of a namespace bound to a scope (the engine's ``provider``).
ProviderFactory = Callable[[ProjectionSpec, Scope], EventSourcedProvider]
#: A stored namespace and the scope levels its partitions use.
StoredNamespace = tuple[str, tuple[Level, ...]]


class Tenant(Resource):
    """A tenant: every record carries one, and none is ever visible to another."""

    tenant_id: str = Field(min_length=1, max_length=128)
    name: str = Field(default="", max_length=255)


class User(Resource):
    """A user (a person or an agent identity) of one tenant."""

    user_id: str = Field(min_length=1, max_length=128)
    name: str = Field(default="", max_length=255)


class ApiKey(Resource):
    """An issued API key: its id, whose it is, what it may do; the secret only as a hash."""

    key_id: str
    tenant_id: str
    user_id: str | None = None
    role: Role = "writer"
    name: str = Field(default="", max_length=255)
    sha256: str
    revoked_at: datetime | None = None


class _Tenants(ResourceStore[Tenant]):
    resource: ClassVar[str] = "tenant"
    id_field: ClassVar[str] = "tenant_id"

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, Tenant)


class _Users(ResourceStore[User]):
    resource: ClassVar[str] = "user"
    id_field: ClassVar[str] = "user_id"

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, User)


class _Keys(ResourceStore[ApiKey]):
    resource: ClassVar[str] = "API key"
    id_field: ClassVar[str] = "key_id"
    indexed: ClassVar[tuple[str, ...]] = ("user_id",)

    def __init__(self, provider: EventSourcedProvider) -> None:
        super().__init__(provider, ApiKey)


def _tenant_code(tenant_id: str) -> str:
    return base64.b32encode(tenant_id.encode()).decode().rstrip("=").lower()


def _tenant_of(code: str) -> str | None:
    try:
        return base64.b32decode(code.upper() + "=" * (-len(code) % 8)).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def key_digest(token: str) -> str:
    """The stored form of an API key: the hex SHA-256 of the whole key."""
    return hashlib.sha256(token.encode()).hexdigest()


class Tenancy:
    """Tenants, users and API keys of one database (see the module docstring)."""

    def __init__(
        self,
        backend: Backend,
        provider: ProviderFactory,
        namespaces: Sequence[StoredNamespace],
        producer: ProducerRef | None = None,
        on_wipe: Callable[[ScopeFilter], None] | None = None,
    ) -> None:
        """``namespaces`` are every namespace records are stored in (a deletion scans each);
        ``on_wipe`` is told which scopes a deletion emptied, to drop what it caches of them."""
        self.backend = backend
        self._provider = provider
        self._namespaces = tuple(namespaces)
        self._producer = producer or ProducerRef()
        self._on_wipe = on_wipe

    def _tenants(self, tenant_id: str) -> _Tenants:
        return _Tenants(self._provider(TENANT_SPEC, Scope(tenant=tenant_id)))

    def _users(self, tenant_id: str) -> _Users:
        return _Users(self._provider(USER_SPEC, Scope(tenant=tenant_id)))

    def _keys(self, tenant_id: str) -> _Keys:
        return _Keys(self._provider(KEY_SPEC, Scope(tenant=tenant_id)))

    # -- tenants -----------------------------------------------------------------------------

    async def create_tenant(self, tenant_id: str, name: str = "") -> Tenant:
        """Register a tenant. Raises ``ConflictError`` if it exists."""
        return await self._tenants(tenant_id).create(Tenant(tenant_id=tenant_id, name=name))

    async def get_tenant(self, tenant_id: str) -> Tenant | None:
        """The tenant ``tenant_id``, if registered."""
        return await self._tenants(tenant_id).find(tenant_id)

    async def ensure_tenant(self, tenant_id: str, name: str = "") -> Tenant:
        """The tenant ``tenant_id``, registered now if it was not (lazy population)."""
        found = await self.get_tenant(tenant_id)
        if found is not None:
            return found
        try:
            return await self.create_tenant(tenant_id, name)
        except ConflictError:  # pragma: no cover - another instance registered it meanwhile
            return await self._tenants(tenant_id).get(tenant_id)

    async def list_tenants(self, *, limit: int = 100, offset: int = 0) -> Page[Tenant]:
        """Every registered tenant, by id."""
        check_page(limit, offset)
        records = await self.backend.scan(
            RecordQuery(TENANT_SPEC.namespace, None, limit=limit + 1, offset=offset)
        )
        store = self._tenants("default")
        more = len(records) > limit
        return Page(
            [store.from_record(r) for r in records[:limit]], offset + limit if more else None
        )

    async def delete_tenant(self, tenant_id: str) -> int:
        """Delete a tenant and everything stored under it — memories, graphs, resources,
        users, keys — in one transaction, blanking every event of the tenant in the log to
        a tombstone; returns how many records went.

        Raises:
            NotFoundError: the tenant is not registered.
        """
        if await self.get_tenant(tenant_id) is None:
            raise NotFoundError(f"no tenant {tenant_id!r}", resource="tenant", id=tenant_id)
        everything = ScopeFilter(Scope(tenant=tenant_id), ("tenant",))
        doomed: list[tuple[Record, tuple[Level, ...]]] = []
        for namespace, levels in self._namespaces:
            records = await self.backend.scan(RecordQuery(namespace, everything, hidden=None))
            doomed += [(r, levels) for r in records]
        return await self._erase(doomed, everything)

    async def delete_user(self, tenant_id: str, user_id: str) -> int:
        """Erase a user (the right to be forgotten): every record stored under them (their
        agents', sessions' and plans' included), the tenant-wide records that name them as
        their user (plans, sessions, API keys, stored idempotent answers) and their
        registration, in one transaction, blanking their events in the log to tombstones;
        returns how many records went. What they gave the tenant (a public fact, a task
        context naming no user) stays with its history; the tenant and its other users keep
        everything.

        Raises:
            InvalidScopeError: ``tenant_id`` or ``user_id`` is not a valid scope id.
            NotFoundError: the user is neither registered nor has anything stored.
        """
        theirs = ScopeFilter(Scope(tenant=tenant_id, user=user_id), ("tenant", "user"))
        tenant = Scope(tenant=tenant_id)
        doomed: list[tuple[Record, tuple[Level, ...]]] = []
        for namespace, levels in self._namespaces:
            # Tenant-wide records are theirs when they name them as their user (plans,
            # sessions and API keys index ``user_id``); the rest are stored under them.
            query = (
                RecordQuery(namespace, theirs, hidden=None)
                if "user" in levels
                else RecordQuery(namespace, tenant, metadata={"user_id": user_id}, hidden=None)
            )
            doomed += [(r, levels) for r in await self.backend.scan(query)]
        registered = await self.backend.scan(
            RecordQuery(USER_SPEC.namespace, tenant, keys=(user_id,), hidden=None)
        )
        doomed += [(r, USER_SPEC.levels) for r in registered]
        if not doomed:
            raise NotFoundError(
                f"no user {user_id!r} in tenant {tenant_id!r}", resource="user", id=user_id
            )
        # The tenant's records outlive the user: their events keep their content unless the
        # record goes too (then it is blanked by key below) or is gone already.
        shared = tuple(ns for ns, levels in self._namespaces if "user" not in levels)
        gone = await self._their_events_of_gone_records(theirs, shared)
        return await self._erase(doomed, theirs, keep=shared, also=gone)

    async def _their_events_of_gone_records(
        self, theirs: ScopeFilter, namespaces: Sequence[str]
    ) -> list[Op]:
        """Blanking of the user's events about tenant-wide records that no longer exist (a
        task context they created and deleted: its history still holds what they wrote)."""
        tenant = Scope(tenant=theirs.scope.tenant)
        ops: list[Op] = []
        for namespace in namespaces:
            events = await self.backend.events.read(EventQuery(scope=theirs, provider_id=namespace))
            keys = {str(e.payload["key"]) for e in events if e.payload.get("key") is not None}
            if not keys:
                continue
            live = await self.backend.scan(
                RecordQuery(namespace, tenant, keys=tuple(sorted(keys)), hidden=None)
            )
            for key in sorted(keys - {r.key for r in live}):
                ops.append(Redact(namespace, theirs.scope, theirs.levels, key))
        return ops

    async def _erase(
        self,
        doomed: Sequence[tuple[Record, tuple[Level, ...]]],
        scopes: ScopeFilter,
        *,
        keep: tuple[str, ...] = (),
        also: Sequence[Op] = (),
    ) -> int:
        """Delete ``doomed`` records (each with its namespace's levels) and blank every
        logged event of ``scopes`` (but those of the ``keep`` namespaces), and those about
        the records outside them, with the ``also`` ops and one ``memory.deleted`` per
        record, in one transaction; then drop what is cached."""
        trace = TraceContext()
        ops: list[Op] = [RedactScope(scopes.scope, scopes.levels, keep), *also]
        for r, levels in doomed:
            ops.append(Delete(r.namespace, r.scope, r.key))
            if not scopes.matches(r.scope):
                ops.append(Redact(r.namespace, r.scope, levels, r.key))
        # The tombstones are appended after the ops ran, so they stay readable.
        events = [
            MemoryDeleted(key=r.key, provider_id=r.namespace, mode="hard", purged=True).to_envelope(
                scope=r.scope, producer=self._producer, trace=trace
            )
            for r, _ in doomed
        ]
        await self.backend.commit(ops, events)
        if self._on_wipe is not None:
            self._on_wipe(scopes)
        return len(doomed)

    # -- users -------------------------------------------------------------------------------

    async def _require_tenant(self, tenant_id: str) -> None:
        if await self.get_tenant(tenant_id) is None:
            raise NotFoundError(f"no tenant {tenant_id!r}", resource="tenant", id=tenant_id)

    async def create_user(self, tenant_id: str, user_id: str, name: str = "") -> User:
        """Register a user of an existing tenant. Raises ``NotFoundError`` (no such tenant)
        or ``ConflictError`` (the user exists)."""
        await self._require_tenant(tenant_id)
        Scope(tenant=tenant_id, user=user_id)  # the user id must be a valid scope level
        return await self._users(tenant_id).create(User(user_id=user_id, name=name))

    async def ensure_user(self, tenant_id: str, user_id: str) -> User:
        """The user, registered now if it was not (lazy population)."""
        users = self._users(tenant_id)
        found = await users.find(user_id)
        if found is not None:
            return found
        try:
            return await users.create(User(user_id=user_id))
        except ConflictError:  # pragma: no cover - another instance registered it meanwhile
            return await users.get(user_id)

    async def list_users(self, tenant_id: str, *, limit: int = 100, offset: int = 0) -> Page[User]:
        """The users of a tenant, by id."""
        return await self._users(tenant_id).list(limit=limit, offset=offset)

    # -- API keys ----------------------------------------------------------------------------

    async def create_key(
        self, tenant_id: str, *, user_id: str | None = None, role: Role = "writer", name: str = ""
    ) -> tuple[ApiKey, str]:
        """Issue an API key; returns its record and the key itself, which is shown once and
        never stored. A key without ``user_id`` may act for any user of its tenant."""
        await self._require_tenant(tenant_id)
        if user_id is not None:
            Scope(tenant=tenant_id, user=user_id)
        key_id = secrets.token_hex(6)
        token = f"{KEY_PREFIX}{key_id}_{_tenant_code(tenant_id)}_{secrets.token_urlsafe(32)}"
        record = ApiKey(
            key_id=key_id,
            tenant_id=tenant_id,
            user_id=user_id,
            role=role,
            name=name,
            sha256=key_digest(token),
        )
        return await self._keys(tenant_id).create(record), token

    async def _find_key(self, key_id: str) -> ApiKey | None:
        records = await self.backend.scan(RecordQuery(KEY_SPEC.namespace, None, keys=(key_id,)))
        return self._keys(records[0].scope.tenant).from_record(records[0]) if records else None

    async def revoke_key(self, key_id: str) -> ApiKey:
        """Revoke an API key: it stops verifying at once. Raises ``NotFoundError``."""
        found = await self._find_key(key_id)
        if found is None:
            raise NotFoundError(f"no API key {key_id!r}", resource="API key", id=key_id)
        if found.revoked_at is not None:
            return found
        return await self._keys(found.tenant_id).update(key_id, {"revoked_at": utc_now()})

    async def list_keys(self, tenant_id: str, *, limit: int = 100, offset: int = 0) -> Page[ApiKey]:
        """The keys of a tenant (hashes only), by id."""
        return await self._keys(tenant_id).list(limit=limit, offset=offset)

    async def verify_key(self, token: str) -> ApiKey:
        """The live key record ``token`` is the secret of.

        Raises:
            AuthenticationError: malformed, unknown or revoked (one message for all three,
                so a caller learns nothing about which keys exist).
        """
        match = _KEY.fullmatch(token)
        tenant = _tenant_of(match.group(2)) if match else None
        found = None
        if match and tenant:
            try:
                found = await self._keys(tenant).find(match.group(1))
            except InvalidScopeError:
                found = None
        if (
            found is None
            or found.revoked_at is not None
            or not hmac.compare_digest(found.sha256, key_digest(token))
        ):
            raise AuthenticationError("invalid API key")
        return found
