"""``engram admin migrate`` and ``migrate_target``: a schema brought up to date without opening
the database for work, on a new SQLite file and a new PostgreSQL database."""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

import engramdb
from engramdb.cli.app import app
from engramdb.core.errors import MigrationError, UnsupportedTargetError
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.storage.postgres.schema import MIGRATIONS as POSTGRES_MIGRATIONS
from engramdb.storage.registry import migrate_target
from engramdb.storage.sqlite.schema import MIGRATIONS as SQLITE_MIGRATIONS
from tests.postgres.database import SERVER_URL


@pytest.fixture
def fresh_postgres() -> Iterator[str]:
    """A database of its own, never migrated, dropped afterwards."""
    name = f"engram_test_migrate_{os.getpid()}"
    with psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield SERVER_URL.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with psycopg.connect(SERVER_URL, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture(params=["sqlite", "postgresql"])
def new_target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, list[str]]:
    """A database nothing has touched, and the names of its backend's migrations."""
    if request.param == "sqlite":
        return str(tmp_path / "new.db"), [m.name for m in SQLITE_MIGRATIONS]
    url: str = request.getfixturevalue("fresh_postgres")
    return url, [m.name for m in POSTGRES_MIGRATIONS]


def migrate(target: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner(env={"COLUMNS": "200"}).invoke(
        app, ["--db", target, *args, "admin", "migrate"]
    )
    return result.exit_code, result.stdout, result.stderr


def test_migrate_applies_every_migration_once(new_target: tuple[str, list[str]]) -> None:
    target, names = new_target
    code, out, err = migrate(target, "--json")
    assert code == 0, err
    assert json.loads(out) == {"applied": names}
    code, out, _ = migrate(target)
    assert (code, out.strip()) == (0, "the schema is up to date")

    async def usable() -> list[str]:
        async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
            episodic = engine.scope(tenant="acme", user="alice").episodic
            await episodic.memorize(MemoryItem(text="I moved to Lisbon."))
            return [hit.text for hit in await episodic.remember("Lisbon")]

    assert asyncio.run(usable()) == ["I moved to Lisbon."]


def test_the_first_run_names_what_it_applied(tmp_path: Path) -> None:
    code, out, _ = migrate(str(tmp_path / "people.db"))
    assert code == 0
    assert out.splitlines() == [f"applied {m.name}" for m in SQLITE_MIGRATIONS]


def test_a_database_of_a_newer_engram_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "newer.db"
    assert asyncio.run(migrate_target(db)) == [m.name for m in SQLITE_MIGRATIONS]
    with sqlite3.connect(db) as conn:
        conn.execute("INSERT INTO engram_migrations VALUES ('9999_from_the_future', 'now')")
    code, _, err = migrate(str(db))
    assert code == 1
    assert "newer version" in err
    with pytest.raises(MigrationError):
        asyncio.run(migrate_target(db))
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT count(*) FROM engram_migrations").fetchone()
    assert rows == (len(SQLITE_MIGRATIONS) + 1,)


def test_targets_without_a_backend_are_refused() -> None:
    with pytest.raises(UnsupportedTargetError, match="no storage backend"):
        asyncio.run(migrate_target("mysql://localhost/engram"))
    with pytest.raises(UnsupportedTargetError, match="file path"):
        asyncio.run(migrate_target("sqlite://"))
    code, _, err = migrate("mysql://localhost/engram")
    assert code == 2
    assert "no storage backend" in err
