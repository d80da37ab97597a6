"""Tenant isolation enforced by PostgreSQL itself: raw SQL as the service role, never through
the backend's own query building."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from engramdb.core.errors import StorageError
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.connection import PostgresPool, Read, Reads
from engramdb.storage.postgres.schema import RECORD_TABLES, SERVICE_ROLE, TENANT_TABLES
from engramdb.storage.postgres.tenancy import ADMIN, Context, tenant_uuid, user_uuid
from engramdb.storage.records import RecordQuery
from tests.postgres.conftest import ACME_ALICE, GLOBEX, NAMESPACES

ACME = tenant_uuid("acme")
GLOBEX_ID = tenant_uuid("globex")


@asynccontextmanager
async def service(
    url: str, tenant: str, user: str = ""
) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A raw transaction as the service role with ``tenant`` (and ``user``) set, the way the
    spec's middleware does it, but transaction-local."""
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {SERVICE_ROLE}")
        await conn.execute(
            "SELECT set_config('app.current_tenant', %s, true), "
            "set_config('app.current_user', %s, true)",
            (str(tenant_uuid(tenant)), str(user_uuid(tenant, user) or "")),
        )
        yield conn


def tenant_column(table: str) -> str:
    return "id" if table == "tenants" else "tenant_uuid"


@pytest.mark.usefixtures("populated")
@pytest.mark.parametrize("table", TENANT_TABLES)
async def test_select_star_sees_only_the_current_tenant(url: str, table: str) -> None:
    async with service(url, "acme") as conn:
        cursor = await conn.execute(f"SELECT {tenant_column(table)} FROM {table}")
        owners = {row[0] for row in await cursor.fetchall()}
    assert owners == {ACME}


@pytest.mark.usefixtures("populated")
@pytest.mark.parametrize("table", TENANT_TABLES)
async def test_without_a_tenant_the_service_role_sees_nothing(url: str, table: str) -> None:
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {SERVICE_ROLE}")
        cursor = await conn.execute(f"SELECT count(*) FROM {table}")
        assert await cursor.fetchone() == (0,)


@pytest.mark.usefixtures("populated")
@pytest.mark.parametrize("table", ["episodic_memory", "procedural_memory"])
async def test_private_memory_is_private_to_the_user(url: str, table: str) -> None:
    async with service(url, "acme", "alice") as conn:
        cursor = await conn.execute(f"SELECT DISTINCT user_id FROM {table}")
        assert await cursor.fetchall() == [("alice",)]
    async with service(url, "acme", "alice") as conn:
        cursor = await conn.execute("SELECT count(DISTINCT user_id) FROM semantic_memory")
        assert await cursor.fetchone() == (2,), "semantic memory is shared across the tenant"


@pytest.mark.usefixtures("populated")
@pytest.mark.parametrize("table", RECORD_TABLES)
async def test_a_cross_tenant_insert_is_rejected(url: str, table: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        async with service(url, "acme") as conn:
            await conn.execute(
                f"INSERT INTO {table} (tenant_uuid, namespace, tenant, user_id, agent, session, "
                "plan, key, value, content_type, metadata, text, created_at) VALUES "
                "(%s, 'ns', 'globex', '', '', '', '', 'planted', '1', 'fact', '{}', '', now())",
                (GLOBEX_ID,),
            )


@pytest.mark.usefixtures("populated")
async def test_rows_cannot_be_moved_to_another_tenant(url: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        async with service(url, "acme") as conn:
            await conn.execute("UPDATE semantic_memory SET tenant_uuid = %s", (GLOBEX_ID,))
    async with service(url, "acme") as conn:
        cursor = await conn.execute("UPDATE semantic_memory SET text = 'x' WHERE tenant = 'globex'")
        assert cursor.rowcount == 0


@pytest.mark.usefixtures("populated")
async def test_a_reused_pooled_connection_carries_nothing_into_the_next_request(url: str) -> None:
    pool = PostgresPool(url, min_size=1, max_size=1)
    await pool.open()
    probe = (
        "SELECT pg_backend_pid(), current_user, current_setting('app.current_tenant', true), "
        "(SELECT count(*) FROM semantic_memory), (SELECT count(*) FROM semantic_memory "
        "WHERE tenant = 'acme')"
    )
    try:
        async with pool.transaction(Context(SERVICE_ROLE, "acme")) as conn:
            pid, role, tenant, visible, acme = await (await conn.execute(probe)).fetchone() or ()
            assert (role, tenant, visible, acme) == (SERVICE_ROLE, str(ACME), 4, 4)
        with pytest.raises(RuntimeError):
            async with pool.transaction(Context(SERVICE_ROLE, "acme")) as conn:
                raise RuntimeError("a request that fails half way")
        async with pool.transaction(Context(SERVICE_ROLE, "globex")) as conn:
            row = await (await conn.execute(probe)).fetchone()
            assert row == (pid, SERVICE_ROLE, str(GLOBEX_ID), 2, 0)
        async with pool.owner() as conn:
            cursor = await conn.execute(
                "SELECT pg_backend_pid(), current_user = %s, "
                "coalesce(current_setting('app.current_tenant', true), '')",
                (SERVICE_ROLE,),
            )
            assert await cursor.fetchone() == (pid, False, "")
    finally:
        await pool.close()


_PROBE = (
    "SELECT pg_backend_pid(), current_user, current_setting('app.current_tenant', true), "
    "(SELECT count(*) FROM semantic_memory), (SELECT count(*) FROM semantic_memory "
    "WHERE tenant = 'acme')"
)
_OWNER_PROBE = (
    "SELECT pg_backend_pid(), current_user = %s, "
    "coalesce(current_setting('app.current_tenant', true), ''), "
    "pg_current_xact_id_if_assigned() IS NULL"
)


@pytest.fixture
async def one_connection(url: str) -> AsyncIterator[PostgresPool]:
    """A pool of a single connection, so every transaction reuses the one before it."""
    pool = PostgresPool(url, min_size=1, max_size=1)
    await pool.open()
    try:
        yield pool
    finally:
        await pool.close()


async def owner_view(pool: PostgresPool) -> tuple[Any, ...]:
    """What the next borrower of the connection is: its backend, whether it is still the
    service role, the tenant set, whether a transaction is still open."""
    async with pool.owner() as conn:
        cursor = await conn.execute(_OWNER_PROBE, (SERVICE_ROLE,))
        return await cursor.fetchone() or ()


@pytest.mark.usefixtures("populated")
async def test_a_pipelined_read_runs_every_batch_as_its_tenant_and_leaves_nothing_behind(
    one_connection: PostgresPool,
) -> None:
    pool = one_connection
    async with pool.reads(Context(SERVICE_ROLE, "acme")) as reads:
        ((first,),) = await reads.run([Read(_PROBE)])
        pid = first[0]
        assert first[1:] == (SERVICE_ROLE, str(ACME), 4, 4)
        # A later batch is the same transaction, still as acme.
        (second, (counted,)) = await reads.run(
            [Read(_PROBE), Read("SELECT count(*) FROM semantic_memory")], last=True
        )
        assert second == [first]
        assert counted == (4,)
        with pytest.raises(RuntimeError, match="ended"):
            await reads.run([Read(_PROBE)])
    assert await pool.read_all(Context(SERVICE_ROLE, "globex"), [Read(_PROBE)]) == [
        [(pid, SERVICE_ROLE, str(GLOBEX_ID), 2, 0)]
    ]
    assert await owner_view(pool) == (pid, False, "", True)


@pytest.mark.usefixtures("populated")
async def test_a_pipelined_read_that_fails_or_stops_early_is_rolled_back(
    one_connection: PostgresPool,
) -> None:
    pool = one_connection
    with pytest.raises(StorageError, match="division by zero"):
        async with pool.reads(Context(SERVICE_ROLE, "acme")) as reads:
            await reads.run([Read(_PROBE), Read("SELECT 1 / 0"), Read(_PROBE)], last=True)
    async with pool.reads(Context(SERVICE_ROLE, "acme")) as reads:
        await reads.run([Read(_PROBE)])  # no last batch: nothing commits it
    ((row,),) = await pool.read_all(Context(SERVICE_ROLE, "globex"), [Read(_PROBE)])
    assert row[1:] == (SERVICE_ROLE, str(GLOBEX_ID), 2, 0)
    assert (await owner_view(pool))[1:] == (False, "", True)


@pytest.mark.usefixtures("populated")
async def test_a_read_of_one_batch_is_one_transaction_and_lends_the_connection_back_as_it_was(
    one_connection: PostgresPool,
) -> None:
    pool = one_connection
    stamp = "SELECT now(), current_setting('app.current_tenant', true)"
    first, second = await pool.read_all(Context(SERVICE_ROLE, "acme"), [Read(stamp), Read(stamp)])
    # Its statements share one transaction (one start time) and the tenant set for it.
    assert first == second
    assert first[0][1] == str(ACME)
    with pytest.raises(StorageError, match="division by zero"):
        await pool.read_all(Context(SERVICE_ROLE, "acme"), [Read("SELECT 1 / 0")])
    async with pool.owner() as conn:
        # Out of autocommit mode again, for the writes' transactions.
        assert not conn.autocommit
    assert (await owner_view(pool))[1:] == (False, "", True)


async def test_a_snapshot_read_is_one_repeatable_read_transaction(
    one_connection: PostgresPool,
) -> None:
    isolation = Read(
        "SELECT current_setting('transaction_isolation'), current_setting('transaction_read_only'),"
        " now()"
    )
    async with one_connection.reads(Context(SERVICE_ROLE, "acme"), snapshot=True) as reads:
        (first,) = await reads.run([isolation])
        (second,) = await reads.run([isolation], last=True)
    assert first == second
    assert first[0][:2] == ("repeatable read", "on")


async def test_a_pipelined_read_needs_a_connection_in_autocommit_mode(
    one_connection: PostgresPool,
) -> None:
    async with one_connection.owner() as conn:
        with pytest.raises(ValueError, match="autocommit"):
            Reads(conn, [])


@pytest.mark.usefixtures("populated")
async def test_a_pipelined_read_without_a_tenant_sees_nothing(one_connection: PostgresPool) -> None:
    rows = await one_connection.read(
        Context(SERVICE_ROLE), Read("SELECT count(*) FROM semantic_memory")
    )
    assert rows == [(0,)]


async def test_deleting_a_tenant_cascades_to_every_memory_and_event(
    populated: PostgresBackend, url: str
) -> None:
    assert await populated.delete_tenant("acme") is True
    assert await populated.delete_tenant("acme") is False
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        await conn.execute(f"SET LOCAL ROLE {ADMIN.role}")
        for table in TENANT_TABLES:
            cursor = await conn.execute(f"SELECT DISTINCT {tenant_column(table)} FROM {table}")
            assert await cursor.fetchall() == [(GLOBEX_ID,)], table
    for namespace in NAMESPACES:
        assert await populated.count(RecordQuery(namespace, ACME_ALICE)) == 0
        assert await populated.count(RecordQuery(namespace, GLOBEX)) == 1
    assert {e.scope.tenant for e in await populated.events.read()} == {"globex"}


async def test_a_service_only_login_cannot_reach_across_tenants(
    populated: PostgresBackend, url: str
) -> None:
    login = "engram_test_service_login"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"DROP ROLE IF EXISTS {login}")
        await conn.execute(f"CREATE ROLE {login} LOGIN IN ROLE {SERVICE_ROLE}")
    try:
        limited = await PostgresBackend.open(url.replace("postgres@", f"{login}@"))
        try:
            assert [r.key for r in await limited.scan(RecordQuery("semantic", GLOBEX))] == [
                "secret"
            ]
            hits = await limited.search.text(RecordQuery("semantic", GLOBEX), '"secret"', 5)
            assert [r.scope for r, _ in hits] == [GLOBEX]
            # Full-text statistics are the partition's own, readable with its tenant's rights.
            counts = await limited.search.document_frequencies("semantic", GLOBEX, ["secret"])
            assert counts == {"secret": 1}
            assert await limited.search.document_count("semantic", GLOBEX) == 1
            with pytest.raises(StorageError, match="permission denied"):
                await limited.scan(RecordQuery("semantic", None))
            with pytest.raises(StorageError):
                await limited.stats()
        finally:
            await limited.close()
    finally:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            await conn.execute(f"DROP ROLE {login}")


async def test_every_policy_reads_the_tenant_once_per_statement(url: str) -> None:
    # A scalar subquery is evaluated once (an InitPlan); the bare call, once per row.
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT tablename, qual, with_check FROM pg_policies "
            "WHERE policyname = 'tenant_isolation'"
        )
        policies = await cursor.fetchall()
    assert {table for table, _, _ in policies} >= set(TENANT_TABLES)
    for _, qual, check in policies:
        for rule in (qual, check):
            assert "( SELECT engram_tenant() AS engram_tenant)" in rule
            assert "= engram_tenant()" not in rule
            assert "engram_user() IS NULL" not in rule
