"""One throwaway PostgreSQL database per test session, emptied before every test.

The server comes from ``ENGRAM_TEST_POSTGRES_URL`` (default: the local server as ``postgres``).
It must be reachable: a missing server fails the PostgreSQL tests, it never skips them. The
database is migrated once; each test then starts from empty tables (``TRUNCATE`` is far
cheaper than migrating a fresh schema), and the database is dropped when the session ends.
"""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from psycopg import sql

SERVER_URL = os.environ.get(
    "ENGRAM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
DATABASE = f"engram_test_{os.getpid()}"
_created = False


def _url_of(database: str) -> str:
    parts = urlsplit(SERVER_URL)
    return urlunsplit((parts.scheme, parts.netloc, f"/{database}", parts.query, ""))


def database_url() -> str:
    """The session database's URL, creating the database on first use."""
    global _created
    if not _created:
        with psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(DATABASE)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
        _created = True
        atexit.register(_drop)
    return _url_of(DATABASE)


def empty_database() -> str:
    """The session database's URL, with every Engram table emptied (if migrated yet)."""
    url = database_url()
    with psycopg.connect(url, autocommit=True) as conn:
        migrated = conn.execute("SELECT to_regclass('engram_migrations') IS NOT NULL").fetchone()
        if migrated and migrated[0]:
            # Every row hangs off a tenant: one cascading DELETE empties the database, far
            # faster than TRUNCATE on tables this small.
            conn.execute("DELETE FROM tenants")
            conn.execute("ALTER TABLE events ALTER COLUMN position RESTART")
            conn.execute("ALTER SEQUENCE engram_record_ids RESTART")
    return url


@contextmanager
def scratch_database(name: str) -> Iterator[str]:
    """The URL of a new, empty database of one test's own (``name`` tells it apart from the
    session's), dropped when the test is done."""
    database = sql.Identifier(f"{DATABASE}_{name}")
    with psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(database))
    try:
        yield _url_of(f"{DATABASE}_{name}")
    finally:
        with psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(database))


def _drop() -> None:
    with psycopg.connect(SERVER_URL, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(DATABASE))
        )
