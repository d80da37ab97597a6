"""Every way a backend finds full-text candidates gives the same hits, whatever other tenants
store: run against every backend, with thresholds set so that small data takes each path. A
one-partition search scores what every hit would give while no word is held by more records
than its bound, and only a word's newest records beyond it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.engine import Engine, EngineConfig
from engramdb.storage.backend import Backend
from engramdb.storage.records import Hide, Put, Record, RecordQuery
from engramdb.storage.search_backend import SCORED_PER_WORD
from tests.conformance.test_backend_contract import T0
from tests.conformance.test_backend_contract import record as contract_record
from tests.postgres.database import empty_database

ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="globex", user="bob")
FRUIT = ("apple", "pear", "plum", "fig", "kiwi", "lime")


def record(key: str, text: str, scope: Scope = ALICE, **fields: object) -> Record:
    """A record of namespace ``ns`` whose full-text key is ``text``."""
    return contract_record(key, scope, text=text, **fields)


def fruit(at: int) -> Put:
    """A record of Alice whose text holds some of ``FRUIT``, different for each ``at``."""
    text = " ".join(FRUIT[i % len(FRUIT)] for i in range(at, at + 1 + at % 3))
    return Put(record(f"k{at:02}", f"{text} of alice"))


def _query(scope: Scope | ScopeFilter, **conditions: Any) -> RecordQuery:
    return RecordQuery("ns", scope, alive_at=T0 + timedelta(days=30), **conditions)


@pytest.fixture(params=["sqlite", "postgresql"])
def bm25_target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store on each backend, for engines without vectors."""
    return str(tmp_path / "engram.db") if request.param == "sqlite" else empty_database()


@pytest.fixture
async def bm25_engine(bm25_target: str) -> AsyncIterator[Engine]:
    """An engine without vectors on each backend."""
    async with engramdb.open(bm25_target, config=EngineConfig(embedder=None)) as opened:
        yield opened


async def test_another_tenants_writes_leave_a_tenants_recall_as_it_was(bm25_target: str) -> None:
    question = "did I travel to zanzibar or buy a kayak"
    async with engramdb.open(bm25_target, config=EngineConfig(embedder=None)) as engine:
        mine = engine.scope(tenant="a", user="u")
        for text in ("I bought a red kayak yesterday", "I flew to Zanzibar with my sister"):
            await mine.episodic.memorize(MemoryItem(text=text, role="user"))
        await mine.episodic.memorize(MemoryItem(text="We cooked pasta", role="user"))
        before = [(hit.text, hit.score) for hit in await mine.episodic.remember(question)]
        assert {text for text, _ in before} == {
            "I bought a red kayak yesterday",
            "I flew to Zanzibar with my sister",
        }
        # Enough of another tenant's records, all holding one of the question's words, to
        # make it common in the store as a whole: neither pruning nor scores may follow.
        theirs = engine.scope(tenant="b", user="u")
        for start in range(0, 6000, 1000):
            await theirs.episodic.memorize_many(
                [
                    MemoryItem(text=f"zanzibar zanzibar note {n}", role="user")
                    for n in range(start, start + 1000)
                ]
            )
    # A fresh engine: nothing remembered from before the other tenant's writes.
    async with engramdb.open(bm25_target, config=EngineConfig(embedder=None)) as engine:
        mine = engine.scope(tenant="a", user="u")
        after = [(hit.text, hit.score) for hit in await mine.episodic.remember(question)]
    assert after == before


async def test_text_and_text_ids_agree_when_the_best_matches_are_another_partitions(
    backend: Backend,
) -> None:
    # Bob's partition is most of the index, so Alice's is searched without its token first;
    # Bob's records then take every one of the index's best matches.
    crowd = [Put(record(f"b{n}", "zanzibar zanzibar note", BOB)) for n in range(60)]
    mine = [
        Put(record("a1", "flew to zanzibar with my sister")),
        Put(record("a2", "bought a red kayak")),
        Put(record("a3", "cooked pasta")),
    ]
    await backend.commit(mine, [])
    # Alice's partition is all of the index when its share is first measured.
    assert await backend.search.text_ids(RecordQuery("ns", ALICE), '"zanzibar"', 2)
    await backend.commit(crowd, [])
    match = '"zanzibar" OR "kayak"'
    hits = await backend.search.text(RecordQuery("ns", ALICE), match, 2)
    assert {r.key for r, _ in hits} == {"a1", "a2"}
    ids = await backend.search.text_ids(RecordQuery("ns", ALICE), match, 2)
    assert ids == [(r.id, score) for r, score in hits]


async def test_a_search_across_partitions_finds_every_partitions_matches(
    backend: Backend,
) -> None:
    await backend.commit([Put(record("a1", "apple pie")), Put(record("b1", "apple tart", BOB))], [])
    tenant_wide = RecordQuery("ns", ScopeFilter(ALICE, ("tenant",)))
    assert [r.key for r, _ in await backend.search.text(tenant_wide, '"apple"', 5)] == ["a1"]
    everyone = RecordQuery("ns", None)
    assert {r.key for r, _ in await backend.search.text(everyone, '"apple"', 5)} == {"a1", "b1"}
    assert len(await backend.search.text_ids(everyone, '"apple"', 5)) == 2


async def test_a_match_without_words_or_room_finds_nothing(backend: Backend) -> None:
    await backend.commit([Put(record("a1", "apple pie"))], [])
    assert await backend.search.text(RecordQuery("ns", ALICE), '"apple"', 0) == []
    assert await backend.search.text(RecordQuery("ns", ALICE), '"_"', 5) == []
    counts = await backend.search.document_frequencies("ns", ALICE, ["apple", "_"])
    assert counts == {"apple": 1, "_": 0}


async def test_record_ids_are_those_the_query_selects(backend: Backend) -> None:
    stored = (
        await backend.commit(
            [Put(record("a1", "apple")), Put(record("a2", "pear")), Put(record("b", "x", BOB))],
            [],
        )
    ).stored
    ids = await backend.search.record_ids(RecordQuery("ns", ALICE))
    assert sorted(ids) == sorted(r.id or 0 for r in stored[:2])


async def test_below_the_bound_scores_are_those_of_every_hit(backend: Backend) -> None:
    # One partition, so a filter query of its scope (no bound) reads the same records.
    await backend.commit([fruit(at) for at in range(40)], [])
    await backend.commit([Hide("ns", ALICE, "k03", T0)], [])
    assert backend.search.scored_per_word == SCORED_PER_WORD
    for match in ('"apple"', '"pear" OR "kiwi"', '"fig" OR "lime" OR "plum" OR "apple"'):
        for conditions in ({}, {"hidden": False}, {"keys": ("k00", "k05", "k06", "k10")}):
            bounded = await backend.search.text(_query(ALICE, **conditions), match, 100)
            every = await backend.search.text(_query(ScopeFilter(ALICE), **conditions), match, 100)
            assert bounded == every
            assert bounded


async def test_beyond_the_bound_a_word_is_scored_in_its_newest_records(backend: Backend) -> None:
    # Two old records hold a word too rare for the bound: all its records are scored.
    await backend.commit([Put(record("n0", "nut of alice")), Put(record("n1", "apple nut"))], [])
    await backend.commit([fruit(at) for at in range(60)], [])
    every = await backend.search.text(_query(ScopeFilter(ALICE)), '"apple" OR "pear"', 100)
    backend.search.scored_per_word = 4
    match = '"apple" OR "nut" OR "pear"'
    bounded = await backend.search.text(_query(ALICE), match, 100)
    keys = [r.key for r, _ in bounded]
    holding = {
        word: sorted((r.key for r, _ in every if word in r.text and r.key[0] == "k"), reverse=True)
        for word in ("apple", "pear")
    }
    # Each common word's four newest records (keys are numbered in the order they were written).
    assert sorted(keys) == sorted({*holding["apple"][:4], *holding["pear"][:4], "n0", "n1"})
    assert len(holding["apple"]) > 4
    # Only the words' document frequencies moved: a record's score is still higher for
    # holding both words, and the order is a score order.
    scores = [s for _, s in bounded]
    assert scores == sorted(scores, reverse=True)
    # The ids alone are the same hits.
    ids = await backend.search.text_ids(_query(ALICE), match, 100)
    assert [i for i, _ in ids] == [r.id for r, _ in bounded]
