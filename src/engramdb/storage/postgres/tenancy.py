"""Who a PostgreSQL transaction acts for: ``Context`` (role, tenant, user), derived from the
scopes a call touches, and the UUIDs of the tenant and user replicas (pure, no database).

Tenant and user ids are derived from their names, so every process derives the same id without
a lookup and the replica rows can be upserted lazily in the transaction that first needs them.
A tenant's id is the UUIDv5 of its name; a user's is derived from its tenant's id and its own
name, never from the two names joined (tenant ``acme`` user ``x:bob`` and tenant ``acme:x``
user ``bob`` are two users of two tenants). The database derives user ids the same way
(``engram_user_uuid``) and refuses a row whose id is not its own.
"""

from __future__ import annotations

import functools
import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.postgres.schema import ADMIN_ROLE, SERVICE_ROLE

#: The UUIDv5 namespace of tenant and user ids.
ENGRAM_UUID_NAMESPACE = uuid.UUID("5c1d8a52-7f8e-4c8e-9a57-3d3f0e6a2b10")


# A write names its tenant and user several times (each row, each event, the replicas): the
# few names a process serves are hashed once. Ids are public functions of names.
@functools.lru_cache(maxsize=4096)
def tenant_uuid(tenant: str) -> uuid.UUID:
    """The id of the tenant replica named ``tenant``."""
    return uuid.uuid5(ENGRAM_UUID_NAMESPACE, f"tenant:{tenant}")


def scoped_uuid(namespace: uuid.UUID, name: str) -> uuid.UUID:
    """The name-based UUIDv8 of ``name`` within ``namespace`` (RFC 9562, appendix B.2): the
    first 128 bits of SHA-256 over the namespace's 16 bytes and the name's UTF-8, with the
    version and variant bits set. The namespace has a fixed length, so distinct pairs hash
    distinct inputs; PostgreSQL computes the same with its built-in ``sha256``."""
    digest = hashlib.sha256(namespace.bytes + name.encode("utf-8")).digest()
    value = int.from_bytes(digest[:16], "big")
    value = (value & ~(0xF << 76)) | (0x8 << 76)  # version 8
    value = (value & ~(0x3 << 62)) | (0x2 << 62)  # the RFC variant
    return uuid.UUID(int=value)


@functools.lru_cache(maxsize=4096)
def user_uuid(tenant: str, user: str) -> uuid.UUID | None:
    """The id of the user replica ``user`` of ``tenant`` (``None`` for no user): scoped by
    the tenant's own id."""
    return scoped_uuid(tenant_uuid(tenant), user) if user else None


@dataclass(frozen=True)
class Context:
    """The role a transaction runs as, and the tenant and user row-level security admits.

    A ``tenant`` of ``None`` with the service role admits no rows at all; the admin role
    admits every row and is only used for work that spans tenants by design.
    """

    role: str
    tenant: str | None = None
    user: str | None = None

    def settings(self) -> tuple[str, str]:
        """Values of ``app.current_tenant`` and ``app.current_user`` (empty: unset)."""
        if self.tenant is None:
            return "", ""
        user = user_uuid(self.tenant, self.user or "")
        return str(tenant_uuid(self.tenant)), "" if user is None else str(user)


ADMIN = Context(ADMIN_ROLE)
NOBODY = Context(SERVICE_ROLE)


def context_for(scopes: Iterable[Scope | ScopeFilter | None]) -> Context:
    """The narrowest context covering ``scopes``: one tenant (and its user, when every scope
    names the same one) as the service role; several tenants, or an unscoped (``None``) call,
    as the admin role."""
    tenants: set[str] = set()
    users: set[str] = set()
    seen = False
    for item in scopes:
        seen = True
        if item is None:
            return ADMIN
        if isinstance(item, ScopeFilter):
            tenants.add(item.scope.tenant)
            users.add((item.scope.user or "") if "user" in item.levels else "")
        else:
            tenants.add(item.tenant)
            users.add(item.user or "")
    if not seen:
        return NOBODY
    if len(tenants) != 1:
        return ADMIN
    (tenant,) = tenants
    user = next(iter(users)) if len(users) == 1 else ""
    return Context(SERVICE_ROLE, tenant, user or None)
