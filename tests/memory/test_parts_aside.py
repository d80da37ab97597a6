"""With a model that has a lane for work no caller waits for (``AsideEmbedder``, as the default
model has), the part vectors of acknowledged writes are computed there (on an embedded store as
they come, without waiting for the writes to pause), and a write's own embedding never queues
behind them. On every backend."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.batching import BatchingEmbedder
from engramdb.index.embedder import FloatArray, WrappingEmbedder
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.episodic import EPISODIC_SPEC, EpisodicMemory
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC, DeferredParts
from engramdb.providers.write_pauses import WritePauses
from engramdb.storage.records import RecordQuery
from tests.memory.test_parts_yield_to_writes import NEW, SCOPE, TURNS
from tests.memory.test_record_first import EPISODES, LATER, TURN


class Lanes(WrappingEmbedder[MiniLMEmbedder]):
    """The real model, noting the texts a caller waited for and those embedded aside."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        super().__init__(inner)
        self.waited: list[str] = []
        self.aside: list[str] = []
        self.aside_began = asyncio.Event()
        #: Open unless a test holds the lane's work.
        self.gate = asyncio.Event()
        self.gate.set()

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        self.waited += texts
        return await self._embed_inner(list(texts))

    async def embed_aside(self, texts: Sequence[str]) -> FloatArray:
        self.aside += texts
        self.aside_began.set()
        await self.gate.wait()
        return self._checked(list(texts), await self._inner.embed_aside(texts))


async def _computed(deferred: DeferredParts) -> None:
    """Wait until the background has computed every part owed (no search, no drain)."""
    assert deferred._task is not None
    await deferred._task
    assert len(deferred) == 0


async def _stuck_after(mem: EpisodicMemory, lanes: Lanes, item: MemoryItem) -> None:
    """``item`` memorized, its parts' computing begun on the lane aside and stuck there."""
    lanes.gate.clear()
    await mem.memorize(item)
    await asyncio.wait_for(lanes.aside_began.wait(), 60)


async def _stop(deferred: DeferredParts) -> None:
    """Stop the background task waiting for a pause that never comes."""
    if deferred._task is not None:
        deferred._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await deferred._task


async def _pending(engine: Engine) -> int:
    return len(await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None)))


async def test_parts_are_computed_aside_at_once_on_an_embedded_store_at_a_pause_on_a_server(
    target: str, embedder: MiniLMEmbedder
) -> None:
    lanes = Lanes(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=BatchingEmbedder(lanes))) as e:
        deferred = e.indexer.deferred
        # The writes never count as paused.
        deferred.pauses = WritePauses(1e6, 1e6)
        mem = e.scope(**SCOPE).episodic
        for text in TURNS:
            await mem.memorize(MemoryItem(text=text, role="user"))
        if target.startswith("postgresql"):
            # The server's cores and the tenant's later writes wait for the background's
            # transactions too: it waits for a pause.
            await asyncio.sleep(0.2)
            assert len(deferred) == len(TURNS)
            assert not lanes.aside
            await _stop(deferred)
            deferred.pauses = WritePauses(0.0, 1e6)
            deferred._start()
        await asyncio.wait_for(_computed(deferred), 120)
        assert await _pending(e) == 0
        # The sentences went to the lane aside; the calls waited for held no sentence.
        assert "user: A gull stole my bread." in lanes.aside
        assert not [text for text in lanes.waited if "A gull" in text and "day" not in text]
        hits = await mem.remember("who stole my bread?", limit=1)
        assert "gull" in hits[0].text


async def test_a_write_is_answered_while_the_parts_aside_are_stuck(
    target: str, embedder: MiniLMEmbedder
) -> None:
    lanes = Lanes(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=BatchingEmbedder(lanes))) as e:
        deferred, mem = e.indexer.deferred, e.scope(**SCOPE).episodic
        await _stuck_after(mem, lanes, MemoryItem(text=TURNS[0], role="user"))
        # The parts' lane is stuck: a write needs nothing of it (the bound stops a hang).
        await asyncio.wait_for(mem.memorize(MemoryItem(text=NEW, role="user")), 60)
        assert f"user: {NEW}" in lanes.waited
        lanes.gate.set()
        await _computed(deferred)
        assert await _pending(e) == 0
        hits = await mem.remember("who stole my bread?", limit=1)
        assert "gull" in hits[0].text


async def test_a_turn_written_again_while_its_parts_are_computed_keeps_the_new_vectors(
    target: str, embedder: MiniLMEmbedder
) -> None:
    lanes = Lanes(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=BatchingEmbedder(lanes))) as e:
        mem = e.scope(**SCOPE).episodic
        await _stuck_after(mem, lanes, MemoryItem(id="trip", text=TURN, role="user"))
        # Written again while the first text's parts are computed; then they are done.
        await mem.memorize(MemoryItem(id="trip", text=LATER, role="user"))
        lanes.gate.set()
        await e.indexer.deferred.drain()
        (record,) = await e.backend.scan(EPISODES)
        assert record.version == 2
        expected = await e.indexer.embed_records(EPISODIC_SPEC, [record])
        assert expected is not None
        ids, blobs = await e.backend.search.vectors(EPISODES, e.indexer.model)
        assert dict(zip(ids, blobs, strict=True)) == {record.id: expected[0][0]}
        parts = await e.backend.search.part_vectors(EPISODES, e.indexer.model)
        assert parts == {record.id: expected[1][0]}


async def test_a_search_waits_for_the_parts_the_background_is_computing(
    target: str, embedder: MiniLMEmbedder
) -> None:
    lanes = Lanes(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=BatchingEmbedder(lanes))) as e:
        mem = e.scope(**SCOPE).episodic
        await _stuck_after(mem, lanes, MemoryItem(text=TURNS[0], role="user"))
        # Nothing of the partition is left waiting: it is all being computed, stuck.
        assert len(e.indexer.deferred) == 0
        search = asyncio.ensure_future(mem.remember("who stole my bread?", limit=1))
        await asyncio.sleep(0.2)
        assert not search.done()
        lanes.gate.set()
        hits = await asyncio.wait_for(search, 60)
        assert "gull" in hits[0].text
        assert await e.backend.search.part_vectors(EPISODES, e.indexer.model)
