"""The documented deployment's service login, on the real server: a member of the service role
and nothing else, it serves every tenant through the engine and the REST service, yet no SQL
it runs reaches a row outside the tenant a transaction names — ``RESET ROLE`` leaves it with no
table at all, and it may switch to no other role nor switch row-level security off. The login
is made both ways the documentation gives: ``engram admin service-login`` and plain SQL."""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

import engramdb
from engramdb.cli.app import app
from engramdb.client import MemoryClient
from engramdb.engine import EngineConfig
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.schema import ADMIN_ROLE, SERVICE_ROLE, TENANT_TABLES
from engramdb.storage.postgres.tenancy import tenant_uuid

#: Roles belong to the whole server, which parallel test sessions share.
LOGIN = f"engram_test_service_{os.getpid()}"
#: The SQL docs/postgres.md gives for the login (without its password).
DOCUMENTED_SQL = (
    f"CREATE ROLE {LOGIN} LOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT NOCREATEDB NOCREATEROLE "
    "NOREPLICATION",
    f"GRANT {SERVICE_ROLE} TO {LOGIN}",
)
Denied = psycopg.errors.InsufficientPrivilege


def engram(*args: str) -> tuple[int, str, str]:
    """Run the ``engram`` command line in process."""
    result = CliRunner(env={"COLUMNS": "200"}).invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def drop(url: str) -> None:
    login = sql.Identifier(LOGIN)
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (LOGIN,)).fetchone():
            conn.execute(sql.SQL("DROP OWNED BY {}").format(login))
            conn.execute(sql.SQL("DROP ROLE {}").format(login))


@pytest.fixture
def no_login(populated: PostgresBackend, url: str) -> Iterator[str]:
    """The populated database's URL, with no role of the login's name before or after."""
    drop(url)
    try:
        yield url
    finally:
        drop(url)


@pytest.fixture(params=["command", "sql"])
async def login_url(request: pytest.FixtureRequest, no_login: str) -> str:
    """The populated database's URL as the service login, made one documented way."""
    if request.param == "command":
        code, _, err = await asyncio.to_thread(
            engram, "--db", no_login, "admin", "service-login", LOGIN
        )
        assert code == 0, err
    else:
        with psycopg.connect(no_login, autocommit=True) as conn:
            for statement in DOCUMENTED_SQL:
                conn.execute(statement.encode())
    return no_login.replace("postgres@", f"{LOGIN}@")


@pytest.fixture
async def as_login(login_url: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """A raw autocommit connection as the service login."""
    conn = await psycopg.AsyncConnection.connect(login_url, autocommit=True)
    try:
        yield conn
    finally:
        await conn.close()


async def refused(conn: psycopg.AsyncConnection[Any], statement: str, *args: Any) -> bool:
    """Whether the server refuses ``statement`` for lack of a right."""
    try:
        await conn.execute(statement, args or None)
    except Denied:
        return True
    return False


async def visible(conn: psycopg.AsyncConnection[Any], table: str) -> set[Any]:
    column = "id" if table == "tenants" else "tenant_uuid"
    cursor = await conn.execute(f"SELECT DISTINCT {column} FROM {table}")
    return {row[0] for row in await cursor.fetchall()}


@pytest.mark.parametrize("table", TENANT_TABLES)
async def test_reset_role_leaves_no_table_at_all(
    as_login: psycopg.AsyncConnection[Any], table: str
) -> None:
    async with as_login.transaction():
        await as_login.execute(f"SET LOCAL ROLE {SERVICE_ROLE}")
        await as_login.execute(
            "SELECT set_config('app.current_tenant', %s, true)", (str(tenant_uuid("acme")),)
        )
        assert await visible(as_login, table) == {tenant_uuid("acme")}
    # Out of the service role: the login itself may read nothing, whatever tenant it names.
    for tenant in ("acme", "globex"):
        await as_login.execute("RESET ROLE")
        await as_login.execute(
            "SELECT set_config('app.current_tenant', %s, false)", (str(tenant_uuid(tenant)),)
        )
        assert await refused(as_login, f"SELECT count(*) FROM {table}")
    async with as_login.transaction():
        await as_login.execute(f"SET LOCAL ROLE {SERVICE_ROLE}")
        await as_login.execute("RESET ROLE")
        assert await refused(as_login, f"SELECT count(*) FROM {table}")


async def test_no_other_role_and_no_way_to_switch_security_off(
    as_login: psycopg.AsyncConnection[Any],
) -> None:
    for role in (ADMIN_ROLE, "postgres"):
        assert await refused(as_login, f"SET ROLE {role}"), role
        assert await refused(as_login, "SELECT set_config('role', %s, false)", role), role
        assert await refused(as_login, f"SET SESSION AUTHORIZATION {role}"), role
    await as_login.execute(f"SET ROLE {SERVICE_ROLE}")
    for statement in (
        "ALTER TABLE semantic_memory DISABLE ROW LEVEL SECURITY",
        "ALTER TABLE semantic_memory NO FORCE ROW LEVEL SECURITY",
        "DROP POLICY tenant_isolation ON semantic_memory",
        "CREATE POLICY open_door ON semantic_memory USING (true)",
        f"GRANT {ADMIN_ROLE} TO {LOGIN}",
        "SET row_security = off; SELECT count(*) FROM semantic_memory",
        "CREATE TABLE planted (x int)",
        "CREATE FUNCTION planted() RETURNS uuid LANGUAGE sql AS $$ SELECT NULL::uuid $$",
    ):
        assert await refused(as_login, statement), statement
    # Without a tenant named, or with one that is not a tenant's id, the role sees nothing.
    for setting in ("", "globex", "00000000-0000-0000-0000-000000000000"):
        async with as_login.transaction():
            await as_login.execute("SELECT set_config('app.current_tenant', %s, true)", (setting,))
            try:
                async with as_login.transaction():
                    rows = await visible(as_login, "semantic_memory")
            except psycopg.errors.InvalidTextRepresentation:
                rows = set()
        assert rows == set(), setting


async def test_the_engine_and_the_service_run_as_the_login(no_login: str, login_url: str) -> None:
    async with engramdb.open(no_login, config=EngineConfig(embedder=None)) as owner:
        await owner.tenancy.create_tenant("acme")
        _, key = await owner.tenancy.create_key("acme")
    async with engramdb.open(login_url, config=EngineConfig(embedder=None)) as engine:
        app = create_app(ServiceSettings(auth="production"), engine=engine)
        transport = httpx.ASGITransport(app=app)
        async with MemoryClient("http://service", api_key=key, transport=transport) as client:
            assert (await client.health()).status == "ok"
            await client.store("note", "acme's own note")
            assert [r.entry.key for r in await client.recall("note")] == ["note"]
            assert {e.scope.tenant for e in (await client.events()).events} == {"acme"}
            await client.log_interaction("user", "I moved to Lisbon")
            assert [i.text for i in await client.get_recent_history()] == ["I moved to Lisbon"]


def test_the_command_checks_a_login_and_refuses_one_with_more_rights(no_login: str) -> None:
    code, out, err = engram("--db", no_login, "admin", "service-login", LOGIN, "--json")
    assert (code, json.loads(out)) == (0, {"login": LOGIN, "created": True}), err
    code, out, _ = engram("--db", no_login, "admin", "service-login", LOGIN)
    assert (code, out.split(":")[0]) == (0, f"checked the login {LOGIN}")
    with psycopg.connect(no_login, autocommit=True) as conn:
        attributes = conn.execute(
            "SELECT rolsuper, rolbypassrls, rolinherit, rolcreaterole, rolcreatedb, "
            "rolreplication, rolcanlogin FROM pg_roles WHERE rolname = %s",
            (LOGIN,),
        ).fetchone()
        assert attributes == (False, False, False, False, False, False, True)
        conn.execute(f"GRANT {ADMIN_ROLE} TO {LOGIN}".encode())
        conn.execute(f"GRANT SELECT ON events TO {LOGIN}".encode())
    code, _, err = engram("--db", no_login, "admin", "service-login", LOGIN)
    assert code == 2
    assert f"is a member of {ADMIN_ROLE}" in err
    assert "holds privileges on events" in err


@pytest.mark.parametrize(
    ("login", "problem"),
    [('evil"; DROP TABLE events; --', "lowercase identifier"), ("x" * 64, "lowercase identifier")],
)
def test_the_command_refuses_names_that_are_not_plain(
    no_login: str, login: str, problem: str
) -> None:
    code, _, err = engram("--db", no_login, "admin", "service-login", login)
    assert (code, problem in err) == (2, True)


def test_the_command_needs_the_password_it_is_told_of(
    no_login: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = engram(
        "--db", no_login, "admin", "service-login", LOGIN, "--password-env", "ENGRAM_NO_SUCH"
    )
    assert (code, "ENGRAM_NO_SUCH" in err) == (2, True)
    monkeypatch.setenv("ENGRAM_TEST_LOGIN_PASSWORD", "a long and secret password")
    code, _, err = engram(
        "--db",
        no_login,
        *("admin", "service-login", LOGIN, "--password-env", "ENGRAM_TEST_LOGIN_PASSWORD"),
    )
    assert code == 0, err
    with psycopg.connect(no_login, autocommit=True) as conn:
        stored = conn.execute("SELECT rolpassword FROM pg_authid WHERE rolname = %s", (LOGIN,))
        assert (stored.fetchone() or ("",))[0].startswith("SCRAM-SHA-256$")


def test_sqlite_has_no_logins(tmp_path: Path) -> None:
    code, _, err = engram("--db", str(tmp_path / "engram.db"), "admin", "service-login", LOGIN)
    assert (code, "no logins" in err) == (2, True)
