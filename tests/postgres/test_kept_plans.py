"""A search statement is prepared on its connection at once and planned once there, for any
parameters (a generic plan): no run of it pays for planning again, the first runs on each
pooled connection included; and its plan looks words up one by one even before the database
has statistics to plan with."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from engramdb.core.types import utc_now
from engramdb.storage.postgres import PostgresBackend, migrate
from engramdb.storage.postgres.connection import Read
from engramdb.storage.postgres.queries import PARTITION_TERM_COUNTS
from engramdb.storage.postgres.tenancy import ADMIN, context_for, tenant_uuid
from engramdb.storage.records import Put, RecordQuery
from engramdb.storage.search_backend import BestHits, WordPruning
from tests.postgres.conftest import ACME_ALICE, secret
from tests.postgres.database import scratch_database


async def test_the_full_text_and_nearest_statements_are_planned_once(url: str) -> None:
    # One connection: every statement below runs on it.
    backend = await PostgresBackend.open(url, max_size=1)
    try:
        vector = b"\x00\x00\x80?" * 8
        await backend.commit([secret("semantic", ACME_ALICE, key=f"k{n}") for n in range(5)], [])
        query = RecordQuery("semantic", ACME_ALICE, alive_at=utc_now())
        for _ in range(3):
            assert await backend.search.text(query, '"secret"', 10)
            assert await backend.search.nearest(query, "test-model", vector, 10)
        rows = await backend._pool.read(
            context_for([ACME_ALICE]),
            Read("SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"),
        )
    finally:
        await backend.close()
    plans = {
        kind: (generic, custom)
        for statement, generic, custom in rows
        for kind in ("tsv", "<=>")
        if kind in statement
    }
    assert plans == {"tsv": (3, 0), "<=>": (3, 0)}


def _rows_read(plan: dict[str, Any], relation: str) -> float:
    """Rows the nodes of ``plan`` reading ``relation`` returned, over all their loops."""
    own = plan["Actual Rows"] * plan["Actual Loops"] if plan.get("Relation Name") == relation else 0
    return own + sum(_rows_read(child, relation) for child in plan.get("Plans", []))


async def test_a_database_not_yet_analyzed_looks_each_word_up() -> None:
    # With no statistics yet (a new database's first minute), the planner would rather read
    # every word of the partition than look the query's words up one by one.
    with scratch_database("unanalyzed") as url:
        await migrate(url)
        backend = await PostgresBackend.open(url)
        try:
            records = [
                Put(replace(secret("semantic", ACME_ALICE, key=f"k{n}").record, text=text))
                for n, text in enumerate(
                    f"note {n} word{n} other{n * 7} more{n * 3}" for n in range(300)
                )
            ]
            await backend.commit(records, [])
            query = RecordQuery("semantic", ACME_ALICE, alive_at=utc_now())
            hits = await backend.search.text_pruned(
                query, ["word5", "other35", "note"], WordPruning(0.5, 1, 0), 10, BestHits(None, 5)
            )
            assert hits
            partition = (tenant_uuid("acme"), "semantic", *ACME_ALICE.columns())
            terms = [["word5", "other35", "note"], *partition]
            async with backend._pool.transaction(ADMIN) as conn:
                cursor = await conn.execute(
                    f"EXPLAIN (ANALYZE, FORMAT JSON) {PARTITION_TERM_COUNTS}", terms
                )
                ((explained,),) = await cursor.fetchall()
        finally:
            await backend.close()
    assert _rows_read(json.loads(explained)[0]["Plan"], "text_terms") <= 3
