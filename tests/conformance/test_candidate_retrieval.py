"""Hybrid recall's candidate retrieval, every path of it, on every backend: full text and
vectors alone and fused, exact and approximate vector search, sentence vectors, pruned query
words, records gone since a vector index loaded, reranking, neighbouring turns, and the
caches in front of the embedder. Thresholds are set so that small data takes each path; the
answers must not depend on the path taken."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

from engramdb.core.errors import EmbedderError, RerankError
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now
from engramdb.index.embedder import Embedder, FloatArray, l2_normalize
from engramdb.index.search_config import SearchConfig
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.indexing import STALE_AFTER_S, Indexer, SearchRequest, vector_bytes
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.backend import Backend
from engramdb.storage.postgres.queries import nearest_select
from engramdb.storage.postgres.search import PostgresSearch
from engramdb.storage.records import Put, RecordQuery
from engramdb.storage.search_backend import NativeVectorSearch
from tests.conformance.test_search_paths import ALICE, record
from tests.postgres.database import database_url

SPEC = ProjectionSpec("ns", vectors=True, embed_parts=lambda k, v, t: str(v).split(". "))
PLAIN = ProjectionSpec("plain")
TURNS = {
    "t1": "I adopted a golden retriever puppy called Max",
    "t2": "Max needs a vet visit next week. He has a cough",
    "t3": "We are planning a trip to Kyoto in the autumn",
    "t4": "Which temples in Kyoto should we not miss",
    "t5": "I started a new job as a nurse at the city hospital",
}


def provider(
    backend: Backend,
    embedder: Embedder | None,
    config: SearchConfig | None = None,
    scope: Scope = ALICE,
    **options: Any,
) -> EventSourcedProvider:
    indexer = Indexer(backend, embedder, config or SearchConfig(), **options)
    return EventSourcedProvider(backend, scope, provider_id="ns", spec=SPEC, indexer=indexer)


async def stored(
    backend: Backend, embedder: Embedder | None, config: SearchConfig | None = None, **opts: Any
) -> EventSourcedProvider:
    """The turns written in one session of Alice's, through a provider that searches with
    ``config``."""
    found = provider(backend, embedder, config, Scope(tenant="acme", user="alice", session="s"))
    await found.write_many([WriteRequest(key, text) for key, text in TURNS.items()])
    # Their part vectors now, not committed in the background while a test looks (each such
    # commit is a change another reader of the store notices).
    await found.indexer.deferred.drain()
    return provider(backend, embedder, config, **opts)


async def keys(found: EventSourcedProvider, query: str, limit: int = 3, **fields: Any) -> list[str]:
    hits = await found.search_hits(SearchRequest(query, limit=limit, **fields))
    return [hit.record.key for hit in hits]


async def test_each_signal_alone_and_fused_finds_the_answer(
    backend: Backend, embedder: Embedder
) -> None:
    for mode in ("hybrid", "bm25", "vector"):
        found = await stored(backend, embedder, SearchConfig(mode=mode))
        assert (await keys(found, "the vet visit for my dog"))[0] == "t2", mode
    # A question without a word to match is answered by vectors alone, or not at all.
    assert await keys(provider(backend, embedder), "???", limit=1)
    assert await keys(provider(backend, embedder, SearchConfig(min_similarity=0.99)), "???") == []
    plain = EventSourcedProvider(backend, ALICE, provider_id="plain", spec=PLAIN)
    await plain.write("k", "a note about Kyoto")
    assert [r.entry.key for r in await plain.search("kyoto")] == ["k"]


async def test_every_fusion_and_boost_ranks_the_same_best_hit(
    backend: Backend, embedder: Embedder
) -> None:
    configs = [
        SearchConfig(),
        SearchConfig(fusion="rrf"),
        SearchConfig(recency_weight=0.1, importance_weight=0.1, session_weight=0.1),
        SearchConfig(time_boost=0.2, strip_time=False),
    ]
    now = utc_now()
    for config in configs:
        found = await stored(backend, embedder, config)
        hits = await keys(found, "temples to visit in Kyoto", time_range=(now - timedelta(1), now))
        assert hits[0] == "t4", config


async def test_exact_and_approximate_vector_search_agree(
    backend: Backend, embedder: Embedder
) -> None:
    exact = await stored(backend, embedder, SearchConfig(mode="vector"))
    expected = await keys(exact, "a dog at the vet", limit=2)
    approximate = provider(backend, embedder, SearchConfig(mode="vector", ann_threshold=1))
    search = backend.search
    if isinstance(search, PostgresSearch):
        # The planner scans a table this small exactly; told to, it walks the HNSW graph.
        search.prefer_index = True
        assert await _uses_hnsw(approximate.indexer.model, embedder.dimensions)
    assert await keys(approximate, "a dog at the vet", limit=2) == expected
    if not isinstance(search, NativeVectorSearch):
        index = await approximate.indexer.vector_index("ns", ALICE)
        assert index.uses_ann


async def _uses_hnsw(model: str, dimensions: int) -> bool:
    sql, params = nearest_select(RecordQuery("ns", ALICE), model, dimensions, 2)
    async with await psycopg.AsyncConnection.connect(database_url()) as conn:
        for knob in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
            await conn.execute(f"SET {knob} = off")  # as ``prefer_index`` sets them
        probe = "[" + ",".join(["0.1"] * dimensions) + "]"
        cursor = await conn.execute(f"EXPLAIN {sql}", [probe, *params])
        plan = " ".join(str(row[0]) for row in await cursor.fetchall())
    return "hnsw" in plan


async def test_filters_narrow_vector_search_to_the_records_they_select(
    backend: Backend, embedder: Embedder
) -> None:
    found = await stored(backend, embedder, SearchConfig(mode="vector"))
    await found.write("note", "my dog Max is at the vet", content_type="note")
    assert await keys(found, "dog at the vet", content_types=("note",)) == ["note"]
    empty = provider(backend, embedder, SearchConfig(mode="vector"), Scope(tenant="nobody"))
    assert await keys(empty, "dog at the vet") == []


async def test_sentence_vectors_rescore_candidates_from_the_index_and_the_store(
    backend: Backend, embedder: Embedder
) -> None:
    found = await stored(backend, embedder, SearchConfig(part_candidates=0))
    assert (await keys(found, "does the dog have a cough"))[0] == "t2"
    # Stored behind this process's back (no vector index hears of them): one without any
    # vector, then one whose vectors are read from the store.
    await backend.commit([Put(record("bare", "the cough of the cat", ALICE, value="x"))], [])
    assert set(await keys(found, "cough", limit=5)) >= {"bare", "t2"}
    text = "The cat has a cough. Nothing else is new"
    vectors = await found.indexer.embed([text, *text.split(". ")])
    assert vectors is not None
    late = record("late", text.lower(), ALICE, value=text)
    await backend.commit([Put(late, vectors[0], found.indexer.model, b"".join(vectors[1:]))], [])
    hits = await found.search_hits(SearchRequest("does the cat have a cough", limit=5))
    assert hits[0].record.key == "late"
    assert hits[0].breakdown["vector"] > 0.5


async def test_common_words_are_left_out_of_the_full_text_query(
    backend: Backend, embedder: Embedder
) -> None:
    config = SearchConfig(mode="bm25", max_term_share=0.3, max_scored_docs=1)
    found = await stored(backend, None, config, min_docs_to_prune=1)
    # "kyoto" is in two of the five records, "max" in two, "cough" in one.
    assert await found.indexer.full_text_match("kyoto max cough", "ns", ALICE) == '"cough"'
    assert await keys(found, "kyoto max cough") == ["t2"]
    # Every word too common: the rarest stays.
    assert await found.indexer.full_text_match("kyoto max", "ns", ALICE) in ('"kyoto"', '"max"')
    # Only the partition's scoring budget: the most common word goes first.
    budget = provider(backend, None, SearchConfig(max_term_share=0, max_scored_docs=1))
    assert await budget.indexer.full_text_match("kyoto cough", "ns", ALICE) == '"cough"'
    unpruned = provider(backend, None, SearchConfig(max_term_share=0, max_scored_docs=0))
    assert await unpruned.indexer.full_text_match("kyoto max", "ns", ALICE) == '"kyoto" OR "max"'
    unstripped = provider(backend, None, SearchConfig(strip_time=False))
    assert await unstripped.indexer.full_text_match("kyoto last week", "ns", ALICE) == (
        '"kyoto" OR "last" OR "week"'
    )


async def test_records_gone_since_the_index_loaded_leave_the_ranking(
    backend: Backend, embedder: Embedder
) -> None:
    for config in (SearchConfig(), SearchConfig(fusion="rrf")):
        found = await stored(backend, embedder, config)
        await found.write("fleeting", "my dog Max goes to the vet", ttl_ms=1)
        await found.indexer.vector_index("ns", ALICE)
        await asyncio.sleep(0.01)
        assert "fleeting" not in await keys(found, "dog Max at the vet", limit=5), config
        await found.delete("fleeting")


class _Overlap:
    """A reranker that scores documents by the share of the query's words they hold."""

    model_id = "overlap"

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        words = set(query.lower().split())
        return [len(words & set(d.lower().split())) / len(words) for d in documents]


class _Broken:
    model_id = "broken"

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        raise RerankError("the reranker is down")


async def test_a_reranker_reorders_the_best_hits_and_its_failure_keeps_the_order(
    backend: Backend, embedder: Embedder, caplog: pytest.LogCaptureFixture
) -> None:
    config = SearchConfig(rerank_weight=1.0)
    found = await stored(backend, embedder, config, reranker=_Overlap())
    await found.write("fleeting", "which temples in kyoto", ttl_ms=1)
    await asyncio.sleep(0.01)
    assert (await keys(found, "which temples in kyoto should we not miss"))[0] == "t4"
    broken = provider(backend, embedder, config, reranker=_Broken())
    with caplog.at_level(logging.WARNING):
        assert (await keys(broken, "which temples in kyoto"))[0] == "t4"
    assert "reranking skipped" in caplog.text


async def test_neighbouring_turns_join_their_hit(backend: Backend, embedder: Embedder) -> None:
    config = SearchConfig(mode="bm25", neighbours=1)
    found = await stored(backend, embedder, config)
    hits = await found.search_hits(SearchRequest("temples", limit=3))
    assert hits[0].record.key == "t4"
    assert {h.record.key for h in hits[1:]} == {"t3", "t5"}
    assert all(h.breakdown["neighbour_of"] == hits[0].record.id for h in hits[1:])
    # Two hits that are each other's neighbours appear once each.
    assert sorted(await keys(found, "kyoto", limit=4)) == ["t2", "t3", "t4", "t5"]
    # A record written outside any session has no neighbours.
    lone = provider(backend, embedder, config)
    await lone.write("lone", "a lone note on sushi")
    assert await keys(lone, "sushi") == ["lone"]


async def test_the_vector_index_follows_this_process_and_other_connections(
    backend: Backend, embedder: Embedder
) -> None:
    found = await stored(backend, embedder, SearchConfig(mode="vector"))
    indexer = found.indexer
    indexer.removed("ns", ALICE, [1])  # nothing loaded yet: nothing to do
    index = await indexer.vector_index("ns", ALICE)
    size = len(index)
    await found.write("extra", "my dog Max loves the beach")
    assert len(await indexer.vector_index("ns", ALICE)) == size + 1
    # The write's part vectors, then a look after the staleness bound: from here on nothing
    # else commits, so however slowly the steps below run, no reload undoes them.
    await indexer.deferred.drain()
    await asyncio.sleep(STALE_AFTER_S * 1.5)
    assert len(await indexer.vector_index("ns", ALICE)) == size + 1
    # A write without vectors takes the record out of the vector index.
    extra = await backend.get("ns", ALICE, "extra")
    assert extra is not None
    indexer.committed("ns", ALICE, [extra], None)
    assert len(await indexer.vector_index("ns", ALICE)) == size
    indexer.removed("ns", ALICE, [extra.id or 0])
    indexer.invalidate("ns", ALICE)
    assert len(await indexer.vector_index("ns", ALICE)) == size + 1
    # Looked at again after the staleness bound, with nothing committed elsewhere.
    await asyncio.sleep(0.15)
    assert len(await indexer.vector_index("ns", ALICE)) == size + 1


async def test_reindex_embeds_what_has_no_vector(backend: Backend, embedder: Embedder) -> None:
    assert await Indexer(backend).reindex(SPEC) == 0
    await backend.commit(
        [Put(record(f"r{n}", f"note {n}", ALICE, value=f"note {n}")) for n in range(3)], []
    )
    done: list[int] = []
    assert await Indexer(backend, embedder).reindex(SPEC, done.append, batch=2) == 3
    assert sum(done) == 3
    assert await Indexer(backend, embedder).reindex(SPEC) == 0
    await backend.commit([Put(record("r3", "note 3", ALICE, value="note 3"))], [])
    assert await Indexer(backend, embedder).reindex(SPEC) == 1


class _Flaky:
    """An embedder whose first call fails, then hands out vectors by the text's hash."""

    model_id = "flaky"
    dimensions = 8

    def __init__(self) -> None:
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        rows = [np.random.default_rng(abs(hash(t)) % 2**32).standard_normal(8) for t in texts]
        return l2_normalize(np.asarray(rows, dtype=np.float32).reshape(len(texts), 8))

    async def embed_one(self, text: str) -> FloatArray:
        self.calls += 1
        if self.calls == 1:
            raise EmbedderError("the model is not ready")
        vector: FloatArray = (await self.embed([text]))[0]
        return vector


async def test_query_vectors_are_shared_remembered_and_a_failure_is_not(
    backend: Backend,
) -> None:
    flaky = _Flaky()
    indexer = Indexer(backend, flaky)
    with pytest.raises(EmbedderError):
        await indexer.warm()
    await indexer.embed_query("warm-up")  # the failure was not remembered
    await indexer.warm()  # warm already
    assert flaky.calls == 2
    first = await indexer.embed_query("a question")
    assert vector_bytes(await indexer.embed_query("a question")) == vector_bytes(first)
    for n in range(300):
        await indexer.embed_query(f"question {n}")
    assert flaky.calls == 303
    assert await Indexer(backend).embed(["x"]) is None
    assert await Indexer(backend).embed_records(SPEC, []) is None
