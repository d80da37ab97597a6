"""PostgreSQL recall in fewer round trips ranks exactly as the general way: the full-text
statement that prunes the query's common words itself, and the searches that bring their best
hits' vector sets (and the nearest hits' records) along, give the same hits and scores as
asking for document frequencies, vector sets and records one statement at a time."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable
from typing import Any

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from engramdb.storage.postgres.backend import PostgresBackend
from engramdb.storage.postgres.search import PostgresSearch
from engramdb.storage.postgres.word_pruning import prunable
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.search_backend import BestHits, WordPruning
from tests.postgres.database import empty_database

#: How often each word occurs among the stored texts: every text, one in 3, 10, 40, once.
EVERY = {"apple": 1, "pear": 3, "plum": 10, "fig": 40, "kiwi": 150}
QUESTIONS = (
    "apple pear plum",
    "apple and a pear",
    "the note says apple",
    "pear plum fig kiwi",
    "apple banana",
    "kiwi fig",
    "which pear_tree had apples",
    "Apple pear tree",
    "when did I eat a fig with apple and plum last week",
    # "①" is a word of no lexeme to the full-text index: the pruned statement keeps none.
    "pear ① plum",
)
_ONE_TRIP = ("text_pruned", "text_best", "nearest_best")


def _text(at: int) -> str:
    words = [word for word, every in EVERY.items() if at % every == 0]
    return f"Note {at} says {' '.join(words)}. It was about fruit number {at % 7}."


async def _ranked(engine: Engine) -> dict[str, list[tuple[str, float]]]:
    mem = engine.scope(tenant="t", user="u").episodic
    return {
        question: [(str(hit.key), hit.score or 0.0) for hit in await mem.remember(question)]
        for question in QUESTIONS
    }


@pytest.fixture(params=["default", "rarity only", "share only"])
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[Engine]:
    """An engine on a PostgreSQL store of 150 texts, pruning words by each rule."""
    search = {
        "default": SearchConfig(),
        "rarity only": SearchConfig(max_term_share=0, max_scored_docs=60),
        "share only": SearchConfig(max_term_share=0.2, max_scored_docs=0),
    }[request.param]
    config = EngineConfig(embedder=MiniLMEmbedder(threads=1), search=search)
    async with engramdb.open(empty_database(), config=config) as opened:
        await opened.scope(tenant="t", user="u").episodic.memorize_many(
            [MemoryItem(text=_text(at), role="user") for at in range(150)]
        )
        yield opened


class StepByStep:
    """The backend's searches without those that read in one round trip what ranking needs."""

    def __init__(self, search: PostgresSearch) -> None:
        self._search = search

    def __getattr__(self, name: str) -> Any:
        if name in _ONE_TRIP:
            raise AttributeError(name)
        return getattr(self._search, name)


async def test_recall_in_one_trip_ranks_as_recall_step_by_step(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_one_trip = await _ranked(engine)
    backend = engine.backend
    assert isinstance(backend, PostgresBackend)
    monkeypatch.setattr(backend, "_search", StepByStep(backend.search))
    assert await _ranked(engine) == in_one_trip
    assert any(len(hits) > 1 for hits in in_one_trip.values())


@pytest.mark.parametrize("held", [True, False], ids=["vectors held", "vectors searched there"])
async def test_remember_asks_nothing_beside_its_two_searches(engine: Engine, held: bool) -> None:
    # No frequencies, sizes or vector sets apart: the two searches bring what ranking needs.
    # (Vectors held here: the partition's size is asked once a minute, when it is loaded.)
    search = engine.backend.search
    assert isinstance(search, PostgresSearch)
    if not held:
        engine.indexer.held = None
    await engine.scope(tenant="t", user="u").episodic.remember("apple and a pear")
    asked: list[str] = []
    for name in ("document_frequencies", "document_count", "vector_sets", "text", "nearest"):
        original = getattr(search, name)

        async def counted(*args: object, _name: str = name, _call: object = original) -> object:
            asked.append(_name)
            return await _call(*args)  # type: ignore[operator]

        setattr(search, name, counted)
    await engine.scope(tenant="t", user="u").episodic.remember("pear plum fig kiwi")
    assert asked == []


async def test_a_pruned_search_that_finds_nothing_says_whether_it_could_tell_the_words(
    engine: Engine,
) -> None:
    search = engine.backend.search
    assert isinstance(search, PostgresSearch)
    query = RecordQuery("episodic", Scope(tenant="t", user="u"), alive_at=utc_now())
    rule = WordPruning(max_term_share=0.05, min_docs=50, max_scored_docs=4000)

    async def pruned(*terms: str) -> list[tuple[int, float]] | None:
        return await search.text_pruned(query, terms, rule, 10, BestHits(None, 5))

    # A word the index holds as no lexeme: the general way must decide.
    assert await pruned("pear", "①") is None
    # Words no record holds: nothing found, and nothing more to ask.
    assert await pruned("zebra", "yak") == []
    assert await pruned("pear", "plum")


async def test_ranking_makes_records_only_of_the_hits_it_returns(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The searches send their best hits' records; ranking by scores alone needs those of the
    # hits that make the cut only, and makes no others.
    made: list[int] = []
    take = BestHits.take

    def counted(self: BestHits, ids: Iterable[int]) -> dict[int, Record]:
        records = take(self, ids)
        made.extend(records)
        return records

    monkeypatch.setattr(BestHits, "take", counted)
    hits = await engine.scope(tenant="t", user="u").episodic.remember("pear plum fig", limit=3)
    assert len(hits) == 3
    assert 0 < len(made) <= 3


def test_only_one_piece_lower_case_words_are_pruned_in_the_statement() -> None:
    assert prunable(["apple", "pear2", "ünïcode"])
    assert not prunable(["apple", "pear_tree"])
    assert not prunable(["Apple"])
    assert not prunable(["don't"])


async def test_searches_planned_once_show_each_tenant_its_own_records() -> None:
    # Run often enough on every pooled connection to be prepared and planned generically, the
    # searches still read the tenant set at each transaction's start, not the first one's.
    config = EngineConfig(embedder=MiniLMEmbedder(threads=1))
    async with engramdb.open(empty_database(), config=config) as opened:
        for tenant in ("t", "other"):
            await opened.scope(tenant=tenant, user="u").episodic.memorize_many(
                [MemoryItem(text=f"{tenant} {_text(at)}", role="user") for at in range(30)]
            )
        mine = opened.scope(tenant="t", user="u").episodic
        theirs = opened.scope(tenant="other", user="u").episodic
        first = await mine.remember("apple pear plum")
        for _ in range(30):
            assert await mine.remember("apple pear plum") == first
        found = await theirs.remember("apple pear plum")
    assert found
    assert {hit.text.split()[0] for hit in first} == {"t"}
    assert {hit.text.split()[0] for hit in found} == {"other"}
