"""Part vectors computed in the background give the model to a write that comes meanwhile
(``DeferredParts``): they go to the model a slice at a time, and a write begun during one
slice is embedded before the next. A search that needs those parts does not wait for the
writes: it has them computed at once. On every backend."""

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
from engramdb.providers.write_pauses import WritePauses

SCOPE = {"tenant": "acme", "user": "alice"}
#: Turns of several sentences each: their parts are more than one slice.
TURNS = [
    f"On day {n} we walked to the harbour. The boats were painted blue. A gull stole my bread. "
    f"We ate grilled fish at noon."
    for n in range(1, 5)
]
NEW = "My dentist moved the appointment to Tuesday."


class Noted(WrappingEmbedder[MiniLMEmbedder]):
    """The real model, noting the texts of each call; ``first_call`` is set by the first."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        super().__init__(inner)
        self.calls: list[list[str]] = []
        self.first_call = asyncio.Event()

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        self.calls.append(list(texts))
        self.first_call.set()
        return await self._embed_inner(list(texts))


async def _owing(engine: Engine, count: int) -> None:
    """``count`` turns memorized (``TURNS`` over again), their parts held back until
    ``_let_go``, whatever the writes do."""
    engine.indexer.deferred.pauses = WritePauses(1e6, 1e6)
    for n in range(count):
        await engine.scope(**SCOPE).episodic.memorize(
            MemoryItem(text=TURNS[n % len(TURNS)], role="user")
        )


async def _let_go(engine: Engine, noted: Noted, quiet_s: float = 0.0) -> None:
    """The held-back parts start now, as after a pause in the writes."""
    deferred = engine.indexer.deferred
    if deferred._task is not None:
        deferred._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await deferred._task
    deferred.pauses = WritePauses(quiet_s, 1e6)
    noted.calls.clear()
    noted.first_call.clear()
    deferred._start()
    await noted.first_call.wait()


async def test_a_write_during_the_background_parts_is_embedded_before_the_rest_of_them(
    target: str, embedder: MiniLMEmbedder
) -> None:
    noted = Noted(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=BatchingEmbedder(noted))) as e:
        mem = e.scope(**SCOPE).episodic
        await _owing(e, len(TURNS))
        owed = len(e.indexer.deferred)
        await _let_go(e, noted)
        await mem.memorize(MemoryItem(text=NEW, role="user"))
        await e.indexer.deferred.drain()
        mine = [n for n, call in enumerate(noted.calls) if any(NEW in text for text in call)]
        parts = [n for n, call in enumerate(noted.calls) if not any(NEW in t for t in call)]
        assert owed == len(TURNS)
        # The parts went in slices, and the write's call came before the last of them.
        assert len(parts) > 1
        assert all(len(call) <= e.indexer.deferred.slice_texts for call in noted.calls)
        assert mine
        assert mine[0] < parts[-1]
        hits = await mem.remember("who stole my bread?", limit=1)
        assert "gull" in hits[0].text


async def test_a_search_does_not_wait_for_the_writes_the_background_parts_yield_to(
    target: str, embedder: MiniLMEmbedder
) -> None:
    noted = Noted(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=BatchingEmbedder(noted))) as e:
        mem, deferred = e.scope(**SCOPE).episodic, e.indexer.deferred
        # More turns than the background takes at once: the search computes the rest itself,
        # once the background's batch, which held the lock, is done.
        await _owing(e, deferred.batch + 2)
        # A write that stays under way: the background parts yield to it after one slice.
        await _let_go(e, noted)
        deferred.pauses.began()
        # The search needs every one of those parts: it has them computed now, writes or not
        # (the bound only stops a hang from holding the suite).
        hits = await asyncio.wait_for(mem.remember("who stole my bread?", limit=1), 120)
        assert "gull" in hits[0].text
        assert len(deferred) == 0
        deferred.pauses.ended()
