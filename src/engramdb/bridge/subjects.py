"""NATS subjects of Engram's events: ``<prefix>.<tenant>.<event_type>``.

A subject is dot-separated tokens in which ``*`` and ``>`` are wildcards and whitespace is not
allowed; tenant names may hold any of them, and a dot would split one tenant into two tokens.
So the tenant becomes one token: every character outside ``[A-Za-z0-9_-]`` is written as
``%XX`` of its UTF-8 bytes (and ``%`` itself too), which is reversible and keeps plain names
readable. Event types are dotted names of the project's own (``memory.written``) and stay as
they are, so ``engram.acme.memory.>`` subscribes to one tenant's memory events.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote

DEFAULT_PREFIX = "engram"
#: The tenant of events that belong to no tenant (the database's own bookkeeping).
NO_TENANT = "_"

_PLAIN = re.compile(r"[A-Za-z0-9_-]+")


def tenant_token(tenant: str | None) -> str:
    """``tenant`` as one subject token."""
    if not tenant:
        return NO_TENANT
    if _PLAIN.fullmatch(tenant) and tenant != NO_TENANT:
        return tenant
    # quote() leaves . _ - ~ as they are: escape the dot (a token separator), the tilde (kept
    # out of tokens for symmetry with the plain set) and a lone "_" (the no-tenant token).
    token = quote(tenant, safe="").replace(".", "%2E").replace("~", "%7E")
    return "%5F" if token == NO_TENANT else token


def tenant_of_token(token: str) -> str | None:
    """The tenant a subject token names (``None`` for ``_``)."""
    return None if token == NO_TENANT else unquote(token)


def subject(prefix: str, tenant: str | None, event_type: str) -> str:
    """The subject an event of ``tenant`` and ``event_type`` is published on."""
    return f"{prefix}.{tenant_token(tenant)}.{event_type}"


def tenant_subjects(prefix: str, tenant: str | None) -> str:
    """The wildcard subject of every event of ``tenant``."""
    return f"{prefix}.{tenant_token(tenant)}.>"


__all__ = [
    "DEFAULT_PREFIX",
    "NO_TENANT",
    "subject",
    "tenant_of_token",
    "tenant_subjects",
    "tenant_token",
]
