"""The engine, unchanged, on ``postgresql://``: every memory type, hybrid recall, forgetting,
rebuilds from the log, and tenants that never meet."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.storage.backend import EventQuery
from engramdb.storage.postgres import PostgresBackend

NOW = datetime(2023, 5, 30, 10, 0, tzinfo=UTC)
TURNS = [
    "I adopted a golden retriever puppy called Max last spring.",
    "I started a new job as a nurse at the city hospital.",
    "We are planning a trip to Kyoto in the autumn.",
]


@pytest.fixture
async def engine(url: str, embedder: MiniLMEmbedder) -> AsyncIterator[Engine]:
    async with engramdb.open(url, config=EngineConfig(embedder=embedder)) as opened:
        yield opened


async def remember_turns(engine: Engine, tenant: str = "acme") -> None:
    mem = engine.scope(tenant=tenant, user="alice", session="s1")
    await mem.episodic.memorize_many(
        [
            MemoryItem(text=text, role="user", id=f"t{n}", occurred_at=NOW + timedelta(hours=n))
            for n, text in enumerate(TURNS)
        ]
    )


async def test_open_postgresql_serves_the_engine(engine: Engine) -> None:
    assert isinstance(engine.backend, PostgresBackend)
    await remember_turns(engine)
    mem = engine.scope(tenant="acme", user="alice")
    hits = await mem.episodic.remember("What kind of pet does the user have?", limit=2)
    assert hits[0].id == "t0"
    assert {"fused", "vector"} <= set(hits[0].score_breakdown)
    assert (await mem.episodic.remember("where does she work", limit=1))[0].id == "t1"


async def test_other_tenants_and_users_recall_nothing(engine: Engine) -> None:
    await remember_turns(engine)
    assert await engine.scope(tenant="acme", user="bob").episodic.remember("dog") == []
    assert await engine.scope(tenant="globex", user="alice").episodic.remember("dog") == []


async def test_semantic_facts_and_rebuild_agree(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice")
    await mem.semantic.memorize(MemoryItem(text="Python was created by Guido van Rossum."))
    await remember_turns(engine)
    before = [h.id for h in await mem.episodic.remember("puppy", limit=3)]
    facts = [h.text for h in await mem.semantic.remember("who created python", limit=1)]
    await engine.rebuild()
    assert [h.id for h in await mem.episodic.remember("puppy", limit=3)] == before
    assert [h.text for h in await mem.semantic.remember("who created python", limit=1)] == facts
    assert facts == ["Python was created by Guido van Rossum."]


async def test_hard_forget_leaves_no_content_in_log_or_tables(engine: Engine) -> None:
    provider = engine.scope(tenant="acme", user="alice").persistent
    await provider.write("k", "zebracorn-7781 passport number")
    assert await provider.forget("k", "hard") is True
    assert await provider.read("k") is None
    assert await provider.search("zebracorn") == []
    logged = [e.payload for e in await engine.events.read(EventQuery(key="k"))]
    assert all("zebracorn" not in str(payload) for payload in logged)
    await engine.rebuild()
    assert await provider.read("k") is None


async def test_stats_and_tenant_deletion(engine: Engine) -> None:
    await remember_turns(engine, "acme")
    await remember_turns(engine, "globex")
    stats = await engine.stats()
    assert stats.records_by_namespace["episodic"] == 6
    backend = engine.backend
    assert isinstance(backend, PostgresBackend)
    assert await backend.delete_tenant("acme")
    assert (await engine.stats()).records_by_namespace["episodic"] == 3
    mem = engine.scope(tenant="globex", user="alice")
    assert (await mem.episodic.remember("puppy", limit=1))[0].id == "t0"


async def test_a_model_change_is_reindexed_at_open_for_every_tenant(
    url: str, embedder: MiniLMEmbedder
) -> None:
    async with (
        MiniLMEmbedder(threads=1, precision="float32") as old,
        engramdb.open(url, config=EngineConfig(embedder=old)) as engine,
    ):
        await remember_turns(engine, "acme")
        await remember_turns(engine, "globex")
        old_model = old.model_id
    with pytest.warns(engramdb.StaleVectorsWarning):
        engine = await engramdb.open(url, config=EngineConfig(embedder=embedder))
    async with engine:
        assert await engine.vector_counts() == {old_model: 2 * len(TURNS)}
    config = EngineConfig(embedder=embedder, on_model_change="reindex")
    async with engramdb.open(url, config=config) as engine:
        assert await engine.vector_counts() == {embedder.model_id: 2 * len(TURNS)}
        for tenant in ("acme", "globex"):
            mem = engine.scope(tenant=tenant, user="alice")
            hits = await mem.episodic.remember("What kind of pet does the user have?", limit=2)
            assert hits[0].id == "t0"
            assert "vector" in hits[0].score_breakdown
