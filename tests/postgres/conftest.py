"""Fixtures of the PostgreSQL tests: a migrated, emptied database and two tenants' memories
in every memory table."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest

from engramdb.core.events import EventEnvelope, MemoryWritten
from engramdb.core.scope import Scope
from engramdb.storage.postgres import PostgresBackend, migrate
from engramdb.storage.postgres.schema import NAMESPACE_TABLES
from engramdb.storage.records import Put, Record
from tests.postgres.database import empty_database

ACME_ALICE = Scope(tenant="acme", user="alice", agent="helper")
ACME_BOB = Scope(tenant="acme", user="bob", agent="helper")
GLOBEX = Scope(tenant="globex", user="carol", agent="helper")
#: One namespace per memory table, plus one that lands in the generic table.
NAMESPACES = (*NAMESPACE_TABLES, "graph_entities")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
VECTOR = b"\x00\x00\x80?" * 8  # eight float32 ones


@pytest.fixture
async def url() -> str:
    """The session database, migrated and empty."""
    url = empty_database()
    await migrate(url)
    return url


@pytest.fixture
async def backend(url: str) -> AsyncIterator[PostgresBackend]:
    """A backend on the empty database."""
    opened = await PostgresBackend.open(url)
    try:
        yield opened
    finally:
        await opened.close()


def secret(namespace: str, scope: Scope, key: str = "secret") -> Put:
    """A record of ``scope`` in ``namespace`` (with a vector) whose text names its owner."""
    record = Record(
        namespace=namespace,
        scope=scope,
        key=key,
        value={"owner": scope.label()},
        content_type="fact",
        metadata={"owner": scope.label()},
        created_at=T0,
        text=f"secret of {scope.label()}",
        thread="s-1",
    )
    return Put(record, vector=VECTOR, model="test-model")


def written(scope: Scope, key: str = "secret") -> EventEnvelope:
    """The event of writing ``key`` in ``scope``."""
    return MemoryWritten(key=key, value=key, value_type="str", provider_id="ns").to_envelope(
        scope=scope
    )


@pytest.fixture
async def populated(backend: PostgresBackend) -> PostgresBackend:
    """Acme (users alice and bob) and Globex, each with a record in every memory table."""
    for scope in (ACME_ALICE, ACME_BOB, GLOBEX):
        await backend.commit(
            [secret(namespace, scope) for namespace in NAMESPACES], [written(scope)]
        )
    return backend
