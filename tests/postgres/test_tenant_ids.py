"""Tenant and user ids on PostgreSQL: a user's id is scoped by its tenant's own id, so no two
tenants ever share a user row, whatever separators their names hold; the database refuses a
row whose id is not its own; and ``0008_tenant_scoped_ids`` re-keys a database written with
the old ids (``uuid5("user:{tenant}:{user}")``), splitting the rows two tenants shared."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb.core.scope import Scope
from engramdb.storage.postgres import PostgresBackend, migrate
from engramdb.storage.postgres.schema import ADMIN_ROLE, MIGRATIONS, RECORD_TABLES
from engramdb.storage.postgres.tenancy import (
    ENGRAM_UUID_NAMESPACE,
    tenant_uuid,
    user_uuid,
)
from engramdb.storage.records import RecordQuery
from tests.postgres.conftest import secret, written
from tests.postgres.database import scratch_database

#: Tenant ``acme`` user ``x:bob`` and tenant ``acme:x`` user ``bob``: one name joined by ``:``.
ACME_XBOB = Scope(tenant="acme", user="x:bob")
ACMEX_BOB = Scope(tenant="acme:x", user="bob")
#: The same collision, written the other way round (the longer tenant first).
AB_C = Scope(tenant="a:b", user="c")
A_BC = Scope(tenant="a", user="b:c")
GLOBEX = Scope(tenant="globex", user="carol")
UNICODE = Scope(tenant="日本/東京", user="ユーザー|1")
#: In the order the old code wrote them: the first of each colliding pair made the row.
OLD_WRITES = (ACME_XBOB, ACMEX_BOB, AB_C, A_BC, GLOBEX, UNICODE)
NAMES = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), max_size=40
)


def test_a_user_id_is_scoped_by_its_tenant_not_by_joined_names() -> None:
    assert user_uuid("acme", "x:bob") != user_uuid("acme:x", "bob")
    assert user_uuid("a:b", "c") != user_uuid("a", "b:c")
    assert user_uuid("acme", "") is None


@given(
    first=st.tuples(NAMES, NAMES),
    second=st.tuples(NAMES, NAMES),
    split=st.tuples(NAMES, NAMES, NAMES, st.sampled_from(":/|.@ ")),
)
def test_distinct_tenant_and_user_pairs_have_distinct_user_ids(
    first: tuple[str, str], second: tuple[str, str], split: tuple[str, str, str, str]
) -> None:
    a, b, c, sep = split
    # One string cut in two places: tenant a user b:c is not tenant a:b user c.
    assert user_uuid(a, f"{b}{sep}{c}") != user_uuid(f"{a}{sep}{b}", c)
    if first != second and first[1] and second[1]:
        assert user_uuid(*first) != user_uuid(*second)
        assert user_uuid(*first) not in {tenant_uuid(first[0]), tenant_uuid(second[0])}


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pairs=st.lists(st.tuples(NAMES, NAMES.filter(bool)), min_size=1, max_size=20))
def test_the_database_derives_the_same_user_ids(url: str, pairs: list[tuple[str, str]]) -> None:
    with psycopg.connect(url) as conn:
        cursor = conn.execute(
            "SELECT engram_user_uuid(t, u) FROM unnest(%s::uuid[], %s::text[]) AS p (t, u)",
            ([tenant_uuid(t) for t, _ in pairs], [u for _, u in pairs]),
        )
        assert [row[0] for row in cursor.fetchall()] == [user_uuid(t, u) for t, u in pairs]


async def _records_and_events(backend: PostgresBackend, scope: Scope) -> tuple[Any, ...]:
    """What ``scope`` holds: its records in two tables (one user-private) and its events."""
    semantic = await backend.scan(RecordQuery("semantic", scope))
    episodic = await backend.scan(RecordQuery("episodic", scope))
    events = [e.event_id for e in await backend.events.read() if e.scope == scope]
    return [r.value for r in semantic], [r.value for r in episodic], events


async def test_deleting_a_tenant_leaves_the_tenant_whose_name_extends_it(
    backend: PostgresBackend,
) -> None:
    for scope in (ACME_XBOB, ACMEX_BOB, A_BC, AB_C):
        puts = [secret("semantic", scope), secret("episodic", scope)]
        await backend.commit(puts, [written(scope)])
    kept = {s: await _records_and_events(backend, s) for s in (ACMEX_BOB, A_BC)}
    assert await backend.delete_tenant("acme") is True
    assert await backend.delete_tenant("a:b") is True
    for scope, held in kept.items():
        assert await _records_and_events(backend, scope) == held
        assert held[0] == [{"owner": scope.label()}]
    for scope in (ACME_XBOB, AB_C):
        assert await _records_and_events(backend, scope) == ([], [], [])


async def test_the_database_refuses_a_row_keyed_by_another_tenants_user(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            "INSERT INTO tenants (id, name) VALUES (%s, 'acme'), (%s, 'acme:x')",
            (tenant_uuid("acme"), tenant_uuid("acme:x")),
        )
        await conn.execute(
            "INSERT INTO users (id, tenant_uuid, username) VALUES (%s, %s, 'x:bob')",
            (user_uuid("acme", "x:bob"), tenant_uuid("acme")),
        )
        await conn.commit()
        # A user row whose id is not derived from its own tenant and name.
        with pytest.raises(psycopg.errors.CheckViolation):
            await conn.execute(
                "INSERT INTO users (id, tenant_uuid, username) VALUES (%s, %s, 'bob')",
                (user_uuid("acme", "x:bob"), tenant_uuid("acme:x")),
            )
        await conn.rollback()
        # A record of acme:x pointing at acme's user row.
        for table in RECORD_TABLES:
            with pytest.raises(psycopg.errors.IntegrityError):
                await _insert_record(conn, table, ACMEX_BOB, user_uuid("acme", "x:bob"), "semantic")
            await conn.rollback()


async def _insert_record(
    conn: psycopg.AsyncConnection[Any],
    table: str,
    scope: Scope,
    user_id: uuid.UUID | None,
    namespace: str,
) -> None:
    """A record as the 0007 schema stores it, with the user id the caller gives."""
    value = json.dumps({"owner": scope.label()})
    await conn.execute(
        f"INSERT INTO {table} (tenant_uuid, user_uuid, namespace, tenant, user_id, agent, "
        "session, plan, key, value, content_type, metadata, text, created_at) "
        "VALUES (%s, %s, %s, %s, %s, '', '', '', 'secret', %s, 'fact', %s, %s, now())",
        (
            tenant_uuid(scope.tenant),
            user_id,
            namespace,
            scope.tenant,
            scope.user or "",
            value,
            value,
            f"secret of {scope.label()}",
        ),
    )


def _old_user_uuid(scope: Scope) -> uuid.UUID:
    """The user id the code before ``0008_tenant_scoped_ids`` derived."""
    return uuid.uuid5(ENGRAM_UUID_NAMESPACE, f"user:{scope.tenant}:{scope.user}")


async def _old_schema(url: str) -> None:
    """Migrations 0001-0007, as the runner applies them."""
    old = MIGRATIONS[:7]
    assert old[-1].name == "0007_vectored_ids"
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute(
            "CREATE TABLE engram_migrations ("
            "name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        for migration in old:
            for statement in migration.statements:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO engram_migrations (name) VALUES (%s)", (migration.name,)
            )
        await conn.commit()


async def _old_rows(url: str) -> None:
    """For every scope of ``OLD_WRITES``, what the code before 0008 wrote: the tenant and user
    replicas (a user row upserted by id, so colliding names share one), a record in a shared
    and in a user-private table, a tenant-wide plan, and their events."""
    async with await psycopg.AsyncConnection.connect(url) as conn:
        for scope in OLD_WRITES:
            tenant = scope.tenant
            await conn.execute(
                "INSERT INTO tenants (id, name) VALUES (%s, %s) ON CONFLICT (id) DO NOTHING",
                (tenant_uuid(tenant), tenant),
            )
            await conn.execute(
                "INSERT INTO users (id, tenant_uuid, username) VALUES (%s, %s, %s) "
                "ON CONFLICT (id) DO NOTHING",
                (_old_user_uuid(scope), tenant_uuid(tenant), scope.user),
            )
            await _insert_record(conn, "semantic_memory", scope, _old_user_uuid(scope), "semantic")
            await _insert_record(conn, "episodic_memory", scope, _old_user_uuid(scope), "episodic")
            await _insert_record(conn, "plans", Scope(tenant=tenant), None, "plans")
            event = written(scope)
            await conn.execute(
                "INSERT INTO events (tenant_uuid, event_id, event_type, schema_version, "
                "occurred_at, producer, trace, tenant, user_id, agent, session, plan, "
                "provider_id, payload) VALUES (%s, %s, %s, %s, now(), '{}', '{}', %s, %s, '', "
                "'', '', %s, %s)",
                (
                    tenant_uuid(tenant),
                    event.event_id,
                    event.event_type,
                    event.schema_version,
                    tenant,
                    scope.user,
                    event.provider_id,
                    json.dumps(event.payload),
                ),
            )
        cursor = await conn.execute("SELECT count(*) FROM users")
        assert await cursor.fetchone() == (len(OLD_WRITES) - 2,)  # two pairs share a row
        await conn.commit()


@contextmanager
def _migrating_login(url: str, who: str) -> Iterator[str]:
    """The URL ``url`` as the login that migrates: the superuser itself, or an owner of the
    database and its tables who is no superuser and no member of the two roles (so forced
    row-level security, with no policy of its own, hides every row from it)."""
    if who == "superuser":
        yield url
        return
    owner = f"engram_test_owner_{os.getpid()}"
    database = urlsplit(url).path.lstrip("/")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP ROLE IF EXISTS {owner}")
        conn.execute(f"CREATE ROLE {owner} LOGIN")
        conn.execute(f'ALTER DATABASE "{database}" OWNER TO {owner}')
        conn.execute(f"ALTER SCHEMA public OWNER TO {owner}")
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        for (table,) in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"):
            conn.execute(f"ALTER TABLE {table} OWNER TO {owner}")
        for (function,) in conn.execute(
            "SELECT oid::regprocedure FROM pg_proc WHERE proname LIKE 'engram%%'"
        ):
            conn.execute(f"ALTER FUNCTION {function} OWNER TO {owner}")
        conn.execute(f"ALTER SEQUENCE engram_record_ids OWNER TO {owner}")
    try:
        yield url.replace("postgres@", f"{owner}@")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'ALTER DATABASE "{database}" OWNER TO postgres')
            conn.execute(f"REASSIGN OWNED BY {owner} TO postgres")
            conn.execute(f"DROP OWNED BY {owner}")
            conn.execute(f"DROP ROLE {owner}")


@pytest.mark.parametrize("who", ["superuser", "owner"])
async def test_migrating_re_keys_users_and_splits_the_rows_two_tenants_shared(who: str) -> None:
    with scratch_database("old_ids") as url:
        await _old_schema(url)
        await _old_rows(url)
        with _migrating_login(url, who) as login:
            assert "0008_tenant_scoped_ids" in await migrate(login)
        async with await psycopg.AsyncConnection.connect(url) as conn:
            await conn.execute(f"SET ROLE {ADMIN_ROLE}")
            cursor = await conn.execute("SELECT id, tenant_uuid, username FROM users")
            assert sorted(await cursor.fetchall()) == sorted(
                (user_uuid(s.tenant, s.user or ""), tenant_uuid(s.tenant), s.user)
                for s in OLD_WRITES
            )
            for table in ("semantic_memory", "episodic_memory", "plans"):
                cursor = await conn.execute(
                    f"SELECT tenant, user_id, user_uuid FROM {table} ORDER BY tenant, user_id"
                )
                rows = await cursor.fetchall()
                assert len(rows) == len(OLD_WRITES)
                for tenant, user, user_id in rows:
                    assert user_id == user_uuid(tenant, user), (table, tenant, user)
        backend = await PostgresBackend.open(url)
        try:
            events = {e.scope: e.event_id for e in await backend.events.read()}
            assert set(events) == set(OLD_WRITES)
            for scope in OLD_WRITES:
                semantic, episodic, scope_events = await _records_and_events(backend, scope)
                assert semantic == episodic == [{"owner": scope.label()}]
                assert scope_events == [events[scope]]
            survivors = [s for s in OLD_WRITES if s.tenant not in ("acme", "a")]
            held = {s: await _records_and_events(backend, s) for s in survivors}
            assert await backend.delete_tenant("acme") is True
            assert await backend.delete_tenant("a") is True
            assert {s: await _records_and_events(backend, s) for s in survivors} == held
            assert {e.scope for e in await backend.events.read()} == set(survivors)
            for tenant in ("acme:x", "a:b"):
                plans = await backend.scan(RecordQuery("plans", Scope(tenant=tenant)))
                assert [p.value for p in plans] == [{"owner": tenant}]
        finally:
            await backend.close()
