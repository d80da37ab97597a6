"""Opening PostgreSQL targets: URL spellings, an unreachable server, a newer schema."""

from __future__ import annotations

import psycopg
import pytest

from engramdb.core.errors import MigrationError, StorageError
from engramdb.storage.postgres import PostgresBackend, migrate
from engramdb.storage.registry import open_backend


@pytest.mark.parametrize("scheme", ["postgresql", "postgres", "postgresql+psycopg"])
async def test_every_url_spelling_opens_the_backend(url: str, scheme: str) -> None:
    backend = await open_backend(scheme + "://" + url.split("://", 1)[1], max_size=2)
    try:
        assert isinstance(backend, PostgresBackend)
        assert backend.url.startswith("postgresql://postgres@")
    finally:
        await backend.close()


async def test_an_unreachable_server_is_a_storage_error() -> None:
    with pytest.raises(StorageError, match="cannot connect"):
        await PostgresBackend.open("postgresql://postgres@127.0.0.1:1/engram", connect_timeout=1)


async def test_migrating_twice_applies_nothing_the_second_time(url: str) -> None:
    assert await migrate(url) == []


async def test_a_database_migrated_by_a_newer_version_is_refused(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("INSERT INTO engram_migrations (name) VALUES ('9999_from_the_future')")
        try:
            with pytest.raises(MigrationError, match="newer"):
                await PostgresBackend.open(url)
        finally:
            await conn.execute("DELETE FROM engram_migrations WHERE name = '9999_from_the_future'")
