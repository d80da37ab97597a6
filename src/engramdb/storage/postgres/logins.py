"""Service logins: the PostgreSQL login a serving process connects as, which cannot leave
row-level security whatever SQL it runs.

Such a login is ``NOSUPERUSER NOBYPASSRLS NOINHERIT``, may create nothing (no roles, no
databases, no replication), owns no object, holds no privilege of its own, and is a member
of ``engram_service`` only. Every transaction of the backend switches to that role and names
its tenant, so the login reads and writes one tenant's rows at a time; ``RESET ROLE`` takes it
back to itself, which may read no table at all (``NOINHERIT``: membership gives it nothing
until it switches), and it may switch to no other role. ``create_service_login`` makes one (as
a user allowed to create roles), or checks that an existing one is such a login.
"""

from __future__ import annotations

import re

import psycopg
from psycopg import sql

from engramdb.core.errors import StorageError, UsageError
from engramdb.storage.postgres.connection import Connection, connect, redacted_url
from engramdb.storage.postgres.schema import SERVICE_ROLE

#: Login names this command makes: plain lowercase identifiers, never needing quotes.
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ATTRIBUTES = "LOGIN NOSUPERUSER NOBYPASSRLS NOINHERIT NOCREATEDB NOCREATEROLE NOREPLICATION"

# One row per way a role could reach past its one tenant; empty for a service login.
_PROBLEMS = """
WITH login AS (SELECT * FROM pg_roles WHERE rolname = %(login)s)
SELECT problem FROM (
    SELECT 'is a superuser' AS problem FROM login WHERE rolsuper
    UNION ALL SELECT 'bypasses row-level security' FROM login WHERE rolbypassrls
    UNION ALL SELECT 'inherits the privileges of its roles (INHERIT)' FROM login WHERE rolinherit
    UNION ALL SELECT 'may create roles' FROM login WHERE rolcreaterole
    UNION ALL SELECT 'may create databases' FROM login WHERE rolcreatedb
    UNION ALL SELECT 'may replicate' FROM login WHERE rolreplication
    UNION ALL SELECT 'may not log in' FROM login WHERE NOT rolcanlogin
    UNION ALL SELECT 'is not a member of ' || %(service)s FROM login
        WHERE NOT pg_has_role(login.oid, %(service)s, 'MEMBER')
    UNION ALL SELECT 'is a member of ' || r.rolname
        FROM login JOIN pg_auth_members m ON m.member = login.oid
        JOIN pg_roles r ON r.oid = m.roleid WHERE r.rolname <> %(service)s
    UNION ALL SELECT 'owns the database' FROM login, pg_database d
        WHERE d.datname = current_database() AND d.datdba = login.oid
    UNION ALL SELECT 'owns schema ' || n.nspname
        FROM login JOIN pg_namespace n ON n.nspowner = login.oid
    UNION ALL SELECT 'owns ' || c.relname FROM login JOIN pg_class c ON c.relowner = login.oid
    UNION ALL SELECT 'owns function ' || p.proname
        FROM login JOIN pg_proc p ON p.proowner = login.oid
    UNION ALL SELECT 'may create objects in schema ' || n.nspname
        FROM login, pg_namespace n
        WHERE n.nspname = current_schema() AND has_schema_privilege(login.oid, n.oid, 'CREATE')
    UNION ALL SELECT 'holds privileges on ' || c.relname
        FROM login, pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
        WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p', 'v', 'm')
        AND has_table_privilege(login.oid, c.oid, 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
) AS found ORDER BY 1
"""


async def login_problems(conn: Connection, login: str) -> list[str]:
    """How the existing role ``login`` could reach past one tenant at a time (none for a
    service login)."""
    cursor = await conn.execute(_PROBLEMS, {"login": login, "service": SERVICE_ROLE})
    return [str(row[0]) for row in await cursor.fetchall()]


async def create_service_login(
    url: str, login: str, *, password: str | None = None, connect_timeout: float = 10.0
) -> bool:
    """Create the service login ``login`` in the database at ``url`` (migrated), connecting
    as a user allowed to create roles; returns whether it was created (``False``: it existed,
    and is a service login). ``password``, if given, becomes (or replaces) its password.

    Raises:
        UsageError: ``login`` is not a plain lowercase name, or the role could reach past one
            tenant (``details["problems"]`` says how: an existing role given other rights, or
            a schema that lets everyone create objects); nothing was changed.
        StorageError: the server cannot be reached, the database is not migrated, or the
            connecting user may not create roles.
    """
    if not _NAME.fullmatch(login):
        raise UsageError(
            f"a login name is a lowercase identifier (a-z, 0-9, _), got {login!r}", login=login
        )
    name = sql.Identifier(login)
    secret = sql.SQL("") if password is None else sql.SQL(" PASSWORD {}").format(password)
    conn = await connect(url, connect_timeout)
    try:
        async with conn, conn.transaction():
            cursor = await conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (login,))
            created = await cursor.fetchone() is None
            if created:
                await conn.execute(
                    sql.SQL("CREATE ROLE {} " + _ATTRIBUTES + "{}").format(name, secret)
                )
                await conn.execute(
                    sql.SQL("GRANT {} TO {}").format(sql.Identifier(SERVICE_ROLE), name)
                )
            elif password is not None:
                await conn.execute(sql.SQL("ALTER ROLE {}{}").format(name, secret))
            problems = await login_problems(conn, login)
            if problems:  # raised inside the transaction: nothing of this call stays
                raise UsageError(
                    f"the role {login!r} could reach past one tenant: it " + "; ".join(problems),
                    login=login,
                    problems=problems,
                )
    except psycopg.Error as exc:
        where = redacted_url(url)
        raise StorageError(
            f"cannot create the login {login!r} in {where}: {exc.diag.message_primary or exc}",
            url=where,
            sqlstate=exc.sqlstate,
        ) from exc
    return created
