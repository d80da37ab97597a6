"""Each partition's full-text statistics follow its writes, and only its own."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import ScopeFilter
from engramdb.storage.backend import Backend, EventQuery
from engramdb.storage.records import Delete, Hide, Put, Record
from tests.conformance.test_backend_contract import ALICE, BOB, GLOBEX, event, record


async def counts(backend: Backend) -> list[int]:
    return [await backend.search.document_count("ns", s) for s in (ALICE, BOB, GLOBEX)]


async def test_a_partitions_count_follows_its_puts_replaces_hides_and_deletes(
    backend: Backend,
) -> None:
    await backend.commit([Put(record(k, ALICE, text=f"{k} apple")) for k in "abc"], [])
    await backend.commit([Put(record(k, BOB, text="apple")) for k in "de"], [])
    assert await counts(backend) == [3, 2, 0]
    # A replace is still one record; a hidden one is still stored and indexed.
    await backend.commit([Put(record("a", ALICE, text="pear tart"))], [])
    await backend.commit([Hide("ns", ALICE, "b", datetime(2026, 2, 1, tzinfo=UTC))], [])
    assert await counts(backend) == [3, 2, 0]
    await backend.commit([Delete("ns", ALICE, "c"), Delete("ns", ALICE, "absent")], [])
    assert await counts(backend) == [2, 2, 0]
    assert await backend.search.document_frequencies("ns", ALICE, ["apple", "pear"]) == {
        "apple": 1,
        "pear": 1,
    }
    await backend.commit([Put(record("g", GLOBEX))], [])
    assert await counts(backend) == [2, 2, 1]


async def test_a_rebuild_leaves_the_counts_of_what_it_stored(backend: Backend) -> None:
    await backend.commit(
        [Put(record(k, ALICE)) for k in "abc"] + [Put(record("b1", BOB))],
        [event("a"), event("b1", BOB)],
    )

    def fold(events: Iterator[EventEnvelope]) -> list[Record]:
        return [record("new", ALICE)]

    await backend.rebuild("ns", ScopeFilter(ALICE), EventQuery(scope=ScopeFilter(ALICE)), fold)
    assert await counts(backend) == [1, 1, 0]
