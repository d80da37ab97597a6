"""A search statement is prepared on its connection at once and planned once there, for any
parameters (a generic plan): no run of it pays for planning again, the first runs on each
pooled connection included."""

from __future__ import annotations

from engramdb.core.types import utc_now
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.connection import Read
from engramdb.storage.postgres.tenancy import context_for
from engramdb.storage.records import RecordQuery
from tests.postgres.conftest import ACME_ALICE, secret


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
