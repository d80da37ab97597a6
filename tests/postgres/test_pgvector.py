"""pgvector on the test server: the extension, the per-model HNSW indexes, cosine search."""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import psycopg
import pytest
from psycopg import sql as psql

from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.queries import nearest_select
from engramdb.storage.postgres.search import EDGE_VECTOR_MODELS
from engramdb.storage.postgres.vectors import StoredVector, hnsw_index_name, register_vector
from engramdb.storage.records import Put, RecordQuery
from tests.postgres.conftest import ACME_ALICE, secret


def as_bytes(*values: float) -> bytes:
    return np.asarray(values, dtype="<f4").tobytes()


def sql_literals(values: list[str]) -> psql.Composed:
    """``values`` as a comma-separated list of SQL literals."""
    return psql.SQL(", ").join(psql.Literal(v) for v in values)


async def test_create_extension_vector_works_and_is_at_least_0_8_0(url: str) -> None:
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        cursor = await conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        row = await cursor.fetchone()
    assert row is not None
    assert tuple(int(part) for part in row[0].split(".")) >= (0, 8, 0)


async def test_first_vector_of_a_model_creates_its_hnsw_index(
    backend: PostgresBackend, url: str
) -> None:
    put = secret("semantic", ACME_ALICE)
    await backend.commit([Put(put.record, vector=as_bytes(1, 0, 0), model="tiny-3d")], [])
    async with await psycopg.AsyncConnection.connect(url) as conn:
        cursor = await conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s",
            (hnsw_index_name("semantic_memory", "tiny-3d"),),
        )
        row = await cursor.fetchone()
    assert row is not None
    assert "hnsw" in row[0]
    assert "vector(3)" in row[0]
    assert "vector_cosine_ops" in row[0]


async def test_vectors_round_trip_bit_for_bit(backend: PostgresBackend) -> None:
    vector = np.random.default_rng(7).standard_normal(384).astype("<f4").tobytes()
    put = secret("episodic", ACME_ALICE)
    (stored,) = (await backend.commit([Put(put.record, vector=vector, model="m")], [])).stored
    ids, blobs = await backend.search.vectors(RecordQuery("episodic", ACME_ALICE), "m")
    assert (ids, blobs) == ([stored.id], [vector])
    assert await backend.search.vectors(RecordQuery("episodic", ACME_ALICE), "other") == ([], [])


async def test_nearest_ranks_by_cosine_similarity(backend: PostgresBackend) -> None:
    base = secret("semantic", ACME_ALICE).record
    rows = {"east": as_bytes(1, 0, 0), "north": as_bytes(0, 1, 0), "north-east": as_bytes(1, 1, 0)}
    result = await backend.commit(
        [Put(replace(base, key=key), vector=vector, model="3d") for key, vector in rows.items()],
        [],
    )
    ids = {r.key: r.id for r in result.stored}
    found = await backend.search.nearest(
        RecordQuery("semantic", ACME_ALICE), "3d", as_bytes(1, 0.1, 0), 2
    )
    assert [i for i, _ in found] == [ids["east"], ids["north-east"]]
    assert 1.0 >= found[0][1] > found[1][1] > 0.5


async def test_a_put_without_a_vector_drops_the_old_one(backend: PostgresBackend) -> None:
    put = secret("semantic", ACME_ALICE)
    await backend.commit([put], [])
    await backend.commit([Put(put.record)], [])
    assert await backend.search.vectors(RecordQuery("semantic", ACME_ALICE), put.model) == ([], [])
    unvectored = await backend.search.unvectored(RecordQuery("semantic", ACME_ALICE), put.model)
    assert [r.key for r in unvectored] == ["secret"]


async def _nearest_plan(
    backend: PostgresBackend, url: str, exact_up_to: int = 0, *, generic: bool = False
) -> tuple[str, list[tuple[int, float]]]:
    """3,000 vectors in one partition, then the executed plan and the rows of a nearest
    search of it, with its one-partition exact search up to ``exact_up_to`` records."""
    base = secret("semantic", ACME_ALICE).record
    rng = np.random.default_rng(3)
    await backend.commit(
        [
            Put(
                replace(base, key=f"k{n}"),
                vector=rng.standard_normal(3).astype("<f4").tobytes(),
                model="3d",
            )
            for n in range(3000)
        ],
        [],
    )
    sql, params = nearest_select(RecordQuery("semantic", ACME_ALICE), "3d", 3, 5, exact_up_to)
    probe = [StoredVector(as_bytes(1, 0, 0)), *params]
    async with await psycopg.AsyncConnection.connect(url) as conn, conn.transaction():
        await register_vector(conn)
        # Statistics of this table's own rows, so the plan does not depend on what ran before
        # (autovacuum may or may not have analyzed it): with them, 3,000 rows make the HNSW
        # index the cheaper plan, where 50 made an exact scan of the partition win.
        await conn.execute("ANALYZE semantic_memory")
        if generic:
            # The plan a connection keeps for the prepared statement, made without its values.
            numbered = iter(range(1, len(probe) + 1))
            prepared = re.sub("%s", lambda _: f"${next(numbered)}", sql)
            await conn.execute(f"PREPARE nearest AS {prepared}")
            await conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            values = sql_literals(["[1,0,0]", *params]).as_string(conn)
            cursor = await conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) EXECUTE nearest({values})")
        else:
            await conn.execute("SET LOCAL enable_seqscan = off")
            cursor = await conn.execute(f"EXPLAIN (ANALYZE, COSTS OFF) {sql}", probe)
        plan = "\n".join(row[0] for row in await cursor.fetchall())
        rows = await (await conn.execute(sql, probe)).fetchall()
    return plan, [(int(i), float(s)) for i, s in rows]


async def test_nearest_uses_the_hnsw_index(backend: PostgresBackend, url: str) -> None:
    plan, _ = await _nearest_plan(backend, url)
    assert hnsw_index_name("semantic_memory", "3d") in plan
    assert "never executed" not in plan


async def test_a_partition_within_the_exact_bound_is_searched_exactly(
    backend: PostgresBackend, url: str
) -> None:
    index = hnsw_index_name("semantic_memory", "3d")
    plan, found = await _nearest_plan(backend, url, exact_up_to=3000)
    # The statement holds the index search too, but runs only the exact one.
    (index_line,) = [line for line in plan.splitlines() if index in line]
    assert "never executed" in index_line
    stored = await backend.search.vectors(RecordQuery("semantic", ACME_ALICE), "3d")
    matrix = np.frombuffer(b"".join(stored[1]), dtype="<f4").reshape(-1, 3)
    similarity = matrix[:, 0] / np.linalg.norm(matrix, axis=1)
    best = sorted(zip(stored[0], similarity, strict=True), key=lambda p: (-p[1], p[0]))[:5]
    assert [i for i, _ in found] == [i for i, _ in best]
    assert [s for _, s in found] == [pytest.approx(float(s), abs=1e-6) for _, s in best]


async def test_a_partition_over_the_exact_bound_is_searched_through_the_index(
    backend: PostgresBackend, url: str
) -> None:
    plan, _ = await _nearest_plan(backend, url, exact_up_to=2999)
    (index_line,) = [
        line for line in plan.splitlines() if hnsw_index_name("semantic_memory", "3d") in line
    ]
    assert "never executed" not in index_line


async def test_the_kept_plan_of_a_large_partition_walks_the_index(
    backend: PostgresBackend, url: str
) -> None:
    # The server stops planning a statement it has run often and keeps one plan for any
    # values: that plan must still search a partition over the exact bound through the index.
    plan, found = await _nearest_plan(backend, url, exact_up_to=2999, generic=True)
    (index_line,) = [
        line for line in plan.splitlines() if hnsw_index_name("semantic_memory", "3d") in line
    ]
    assert "never executed" not in index_line
    assert len(found) == 5


async def test_put_vectors_stores_by_id_with_its_events(backend: PostgresBackend) -> None:
    put = secret("procedural", ACME_ALICE)
    (stored,) = (await backend.commit([Put(put.record)], [])).stored
    assert stored.id is not None
    vector = as_bytes(0.5, 0.25)
    await backend.search.put_vectors("2d", [(stored.id, vector), (10_000, vector)], [])
    query = RecordQuery("procedural", ACME_ALICE)
    assert await backend.search.vectors(query, "2d") == ([stored.id], [vector])
    await backend.search.drop_vectors("procedural")
    assert await backend.search.vectors(query, "2d") == ([], [])


async def test_the_open_check_reads_two_index_entries_per_table(
    backend: PostgresBackend, url: str
) -> None:
    base = secret("semantic", ACME_ALICE).record
    unvectored = [Put(replace(base, key=f"plain{n}")) for n in range(200)]
    vectored = [Put(replace(base, key="v"), vector=as_bytes(1, 0, 0), model="3d")]
    await backend.commit([*unvectored, *vectored], [])
    assert await backend.search.edge_vector_models() == {"3d"}
    async with await psycopg.AsyncConnection.connect(url) as conn:
        await conn.execute("ANALYZE semantic_memory")
        cursor = await conn.execute(f"EXPLAIN {EDGE_VECTOR_MODELS}")
        plan = "\n".join(row[0] for row in await cursor.fetchall())
    assert "semantic_memory_vectored" in plan
    assert "Seq Scan on semantic_memory" not in plan
