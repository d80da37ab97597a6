"""No write is lost to a busy embeddings server, on every backend.

The engine embeds through ``OpenAIEmbedder`` against the local fake server, which answers 429
with ``Retry-After`` for a while (an ``outage``) and then recovers. Every memorize is
acknowledged and stored with its event; what could not be embedded is found by full text
meanwhile and gets its vector once the server is back: by the background catch-up, on the
next successful write, by the next engine to open the store (a conversation turn's pending
record), or by ``reindex(stale_only=True)`` after a restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.retry import RetryPolicy
from engramdb.engine import Engine, EngineConfig
from engramdb.index.openai_embedder import OpenAIEmbedder
from engramdb.providers.graph import GraphEntity
from engramdb.providers.indexing import QUERY_PATIENCE_S
from engramdb.storage.backend import EventQuery
from tests.helpers.openai_server import FakeChatServer, fake, server

__all__ = ["fake", "server"]  # fixtures used here

#: A write gives up on the busy server quickly (the server asks for a 1 s wait: too long).
IMPATIENT = RetryPolicy(attempts=3, base_delay_s=0.05, max_delay_s=0.1, max_elapsed_s=0.3)
TEXTS = [
    "I moved to Lisbon in May",
    "My sister Ana plays the cello",
    "We adopted a beagle named Rex",
    "I work at Acme as a welder",
]


def config(fake: FakeChatServer, retry: RetryPolicy = IMPATIENT) -> EngineConfig:
    embedder = OpenAIEmbedder(
        "fake-embed", dimensions=fake.dimensions, base_url=fake.base_url, retry=retry
    )
    return EngineConfig(embedder=embedder)


@pytest.fixture
async def engine(target: str, fake: FakeChatServer) -> AsyncIterator[Engine]:
    async with engramdb.open(target, config=config(fake)) as opened:
        opened.indexer.pending.retry_interval_s = 0.1
        yield opened


async def stale(engine: Engine) -> int:
    return await engine.reindex_total(stale_only=True)


async def until_embedded(engine: Engine, seconds: float = 15.0) -> None:
    deadline = time.monotonic() + seconds
    while await stale(engine):
        assert time.monotonic() < deadline, f"{await stale(engine)} memories never embedded"
        await asyncio.sleep(0.05)


async def count(engine: Engine, event_type: str) -> int:
    return len(await engine.events.read(EventQuery(event_types=(event_type,))))


async def test_writes_during_an_outage_are_stored_found_and_embedded_later(
    engine: Engine, fake: FakeChatServer
) -> None:
    memory = engine.scope(tenant="acme", user="alice")
    fake.outage("embeddings", 1.5, retry_after="1")
    for text in TEXTS:
        result = await memory.episodic.memorize(MemoryItem(text=text, role="user"))
        assert result.status == "created"  # acknowledged, not raised
    await memory.graph.add_entity(GraphEntity(name="Rex", entity_type="pet"))
    written = len(TEXTS) + 1
    assert fake.asked("embeddings")[-1:]  # the server was asked, and refused
    # Everything is stored with its event, none of it embedded yet...
    assert len(await memory.episodic.records()) == len(TEXTS)
    assert await count(engine, "memory.written") >= written
    assert await count(engine, "memory.indexed") == 0
    assert await stale(engine) == written
    # ...and full-text search finds it while the model is away.
    hits = await memory.episodic.remember("beagle named Rex")
    assert hits[0].text == "We adopted a beagle named Rex"
    # Once the server is back, the background catch-up embeds every one of them.
    await until_embedded(engine)
    assert await count(engine, "memory.indexed") == written
    assert sum((await engine.vector_counts()).values()) == written
    assert len(engine.indexer.pending) == 0
    assert TEXTS[0] in [hit.text for hit in await memory.episodic.remember("Lisbon")]


async def test_the_next_successful_write_embeds_what_waited(
    engine: Engine, fake: FakeChatServer
) -> None:
    engine.indexer.pending.retry_interval_s = 60.0  # only a recovered write can wake it
    memory = engine.scope(tenant="acme", user="bob")
    # The outage lasts until it is ended here: both writes fall in it however slowly they run.
    fake.outage("embeddings", 600.0, retry_after="1")
    for text in TEXTS[:2]:
        await memory.episodic.memorize(MemoryItem(text=text, role="user"))
    assert await stale(engine) == 2
    fake.outages.clear()
    await memory.episodic.memorize(MemoryItem(text=TEXTS[2], role="user"))
    await until_embedded(engine, seconds=5.0)
    assert sum((await engine.vector_counts()).values()) == 3


async def test_a_short_outage_is_waited_out_honouring_retry_after(
    target: str, fake: FakeChatServer
) -> None:
    patient = RetryPolicy(attempts=4, base_delay_s=0.05, max_elapsed_s=5.0)
    async with engramdb.open(target, config=config(fake, patient)) as engine:
        memory = engine.scope(tenant="acme", user="carol")
        fake.outage("embeddings", 0.4, retry_after="1")
        started = time.monotonic()
        await memory.episodic.memorize(MemoryItem(text=TEXTS[0], role="user"))
        waited = time.monotonic() - started
        assert 1.0 <= waited < 4.0  # the server's one-second wait, once
        assert await stale(engine) == 0
        assert len(fake.asked("embeddings")) == 2


async def _stopped_during_an_outage(target: str, fake: FakeChatServer, kind: str) -> None:
    """``TEXTS`` memorized as ``kind`` while the embeddings server is out, the process stopped
    before it is back."""
    fake.outage("embeddings", 60.0, retry_after="30")
    async with engramdb.open(target, config=config(fake)) as engine:
        memory = engine.scope(tenant="acme", user="dave")
        for text in TEXTS:
            if kind == "episodic":
                await memory.episodic.memorize(MemoryItem(text=text, role="user"))
            else:
                await memory.semantic.memorize(MemoryItem(text=text))
        assert len(engine.indexer.pending) == len(TEXTS)
    fake.outages.clear()


async def test_what_waited_when_the_process_stopped_is_embedded_by_reindex_stale(
    target: str, fake: FakeChatServer
) -> None:
    await _stopped_during_an_outage(target, fake, "semantic")
    async with engramdb.open(target, config=config(fake)) as engine:
        assert await stale(engine) == len(TEXTS)
        assert await engine.reindex(stale_only=True) == len(TEXTS)
        assert await stale(engine) == 0
        memory = engine.scope(tenant="acme", user="dave")
        hits = await memory.semantic.remember("Ana plays the cello")
        # The fake server's vectors mean nothing, so only the full-text hit is certain.
        assert "My sister Ana plays the cello" in [hit.text for hit in hits]
        assert any("vector" in hit.score_breakdown for hit in hits)


async def test_turns_that_waited_when_the_process_stopped_are_embedded_by_the_next_open(
    target: str, fake: FakeChatServer
) -> None:
    await _stopped_during_an_outage(target, fake, "episodic")
    # Each turn's transaction held a pending record owing its vector: the next engine to
    # open the store embeds them, no reindex asked.
    async with engramdb.open(target, config=config(fake)) as engine:
        await engine.indexer.deferred.drain()
        assert await stale(engine) == 0
        hits = await engine.scope(tenant="acme", user="dave").episodic.remember("cello")
        assert hits[0].text == "My sister Ana plays the cello"


async def test_a_deduplicating_write_during_an_outage_is_stored_and_matches_its_twin(
    engine: Engine, fake: FakeChatServer
) -> None:
    semantic = engine.scope(tenant="acme", user="erin").semantic
    fake.outage("embeddings", 60.0, retry_after="30")
    first = await semantic.memorize(MemoryItem(text="Erin lives in Porto"), dedupe_threshold=0.9)
    again = await semantic.memorize(MemoryItem(text="Erin lives in Porto"), dedupe_threshold=0.9)
    other = await semantic.memorize(MemoryItem(text="Erin owns a cat"), dedupe_threshold=0.9)
    assert (first.status, again.status, other.status) == ("created", "updated", "created")
    assert again.id == first.id
    assert len(await semantic.records()) == 2
    assert len(engine.indexer.pending) >= 2


async def test_a_search_waits_briefly_for_a_busy_model_then_ranks_by_full_text(
    target: str, fake: FakeChatServer
) -> None:
    patient = RetryPolicy(attempts=50, base_delay_s=0.5, max_elapsed_s=60.0)
    async with engramdb.open(target, config=config(fake, patient)) as engine:
        memory = engine.scope(tenant="acme", user="fay").episodic
        for text in TEXTS:
            await memory.memorize(MemoryItem(text=text, role="user"))
        fake.outage("embeddings", 60.0, retry_after="0.5")
        started = time.monotonic()
        hits = await memory.remember("sister cello")
        # Writes may wait out the policy's minute; a search gives up after QUERY_PATIENCE_S.
        assert time.monotonic() - started < QUERY_PATIENCE_S + 1.0
        assert hits[0].text == "My sister Ana plays the cello"
        assert len(fake.asked("embeddings")) > len(TEXTS) + 1  # it did retry meanwhile
