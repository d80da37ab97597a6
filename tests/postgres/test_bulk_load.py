"""``bulk_load`` on PostgreSQL: a model's HNSW index is noted while the load runs and built
once, from the full table, when it ends — searches meanwhile are exact and rank the same."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.vectors import hnsw_index_name
from engramdb.storage.records import Put, RecordQuery
from tests.postgres.conftest import ACME_ALICE, GLOBEX, secret

MODEL = "tiny-8d"
INDEX = hnsw_index_name("episodic_memory", MODEL)


def vector(seed: int) -> bytes:
    values = np.random.default_rng(seed).standard_normal(8).astype("<f4")
    unit: bytes = (values / np.linalg.norm(values)).astype("<f4").tobytes()
    return unit


@pytest.fixture(autouse=True)
async def no_index(url: str) -> None:
    """The session database keeps indexes between tests: start each without this one."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute(f"DROP INDEX IF EXISTS {INDEX}")


async def index_definition(url: str) -> str | None:
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (INDEX,)
        )
        row = await cursor.fetchone()
    return None if row is None else str(row[0])


async def write(backend: PostgresBackend, seeds: range) -> None:
    for seed in seeds:
        scope = ACME_ALICE if seed % 2 else GLOBEX
        record = secret("episodic", scope, key=f"e{seed}").record
        await backend.commit([Put(record, vector=vector(seed), model=MODEL)], [])


async def nearest(backend: PostgresBackend) -> list[tuple[int, float]]:
    return await backend.search.nearest(
        RecordQuery("episodic", ACME_ALICE), MODEL, vector(1000), limit=5
    )


async def test_the_index_is_built_when_the_load_ends_and_ranks_as_the_exact_scan(
    backend: PostgresBackend, url: str
) -> None:
    async with backend.bulk_load(64):
        await write(backend, range(40))
        assert await index_definition(url) is None
        during = await nearest(backend)
    definition = await index_definition(url)
    assert definition is not None
    assert "hnsw" in definition
    assert "vector(8)" in definition
    backend.search.prefer_index = True  # through the new graph, not an exact scan
    assert await nearest(backend) == during
    assert len(during) == 5


async def test_nested_loads_build_once_the_outermost_ends(
    backend: PostgresBackend, url: str
) -> None:
    async with backend.bulk_load(64):
        async with backend.bulk_load(64):
            await write(backend, range(4))
        assert await index_definition(url) is None
    assert await index_definition(url) is not None


async def test_a_load_that_fails_still_builds_the_index_of_what_it_wrote(
    backend: PostgresBackend, url: str
) -> None:

    async def stopped_load() -> None:
        async with backend.bulk_load(64):
            await write(backend, range(4))
            raise RuntimeError("stopped")

    with pytest.raises(RuntimeError, match="stopped"):
        await stopped_load()
    assert await index_definition(url) is not None


async def test_after_the_load_writes_go_into_the_built_index(
    backend: PostgresBackend, url: str
) -> None:
    async with backend.bulk_load(64):
        await write(backend, range(10))
    await write(backend, range(10, 20))
    backend.search.prefer_index = True
    hits = await nearest(backend)
    backend.search.prefer_index = False
    assert hits == await nearest(backend)
