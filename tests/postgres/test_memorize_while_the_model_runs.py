"""A lone PostgreSQL memorize of a turn with sentences, while the model holds its answer: the
turn is committed with the note of its owed part vectors, and its vector follows in a
transaction of its own once the model answers; a model that fails leaves the turn committed
without a vector, a memorize cancelled while the model runs still stores its vector and leaves
its connection clean, and writers of one partition all get through."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence

import pytest

import engramdb
from engramdb.core.errors import EmbedderUnavailableError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.embedder import FloatArray, WrappingEmbedder
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.episodic import EPISODIC_SPEC
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import RecordQuery
from tests.postgres.database import empty_database

SCOPE = {"tenant": "acme", "user": "alice"}
TURN = "We sailed to Hydra in June. The ferry was late. My brother lost his hat overboard."
EPISODES = RecordQuery(EPISODIC_SPEC.namespace, None)


class HeldModel(WrappingEmbedder[MiniLMEmbedder]):
    """The real model, its calls held while ``gate`` is clear; it fails as an endpoint that
    stayed unavailable does, ``failures`` times."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        super().__init__(inner)
        self.called = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures = 0

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        self.called.set()
        await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise EmbedderUnavailableError("the model stayed unavailable", model_id=self.model_id)
        return await self._embed_inner(list(texts))


@pytest.fixture
def model(embedder: MiniLMEmbedder) -> HeldModel:
    return HeldModel(embedder)


@pytest.fixture
async def engine(model: HeldModel) -> AsyncIterator[Engine]:
    async with engramdb.open(empty_database(), config=EngineConfig(embedder=model)) as opened:
        yield opened


async def _memorize_held(
    engine: Engine, model: HeldModel, text: str = TURN
) -> asyncio.Task[object]:
    """A memorize started while the model holds its answer, once the model has been asked."""
    model.gate.clear()
    model.called.clear()
    mem = engine.scope(**SCOPE)
    write: asyncio.Task[object] = asyncio.create_task(
        mem.episodic.memorize(MemoryItem(text=text, role="user"))
    )
    await model.called.wait()
    # Long enough for the record's statements to reach the server and come back.
    await asyncio.sleep(0.2)
    return write


async def _event_types(engine: Engine) -> list[str]:
    query = EventQuery(event_types=("memory.written", "memory.indexed"))
    return [e.event_type for e in await engine.events.read(query)]


async def test_the_turn_is_committed_while_the_model_runs_and_its_vector_follows(
    engine: Engine, model: HeldModel
) -> None:
    write = await _memorize_held(engine, model)
    (record,) = await engine.backend.scan(EPISODES)
    assert record.value["text"] == TURN
    assert await engine.backend.search.vectors(EPISODES, engine.indexer.model) == ([], [])
    # The turn and the note of its owed part vectors, in one transaction.
    assert await _event_types(engine) == ["memory.written", "memory.written"]
    assert len(await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None))) == 1
    model.gate.set()
    await write
    ids, blobs = await engine.backend.search.vectors(EPISODES, engine.indexer.model)
    expected = await engine.indexer.embed_records(EPISODIC_SPEC, [record], parts=False)
    assert expected is not None
    assert dict(zip(ids, blobs, strict=True)) == {record.id: expected[0][0]}
    assert await _event_types(engine) == ["memory.written", "memory.written", "memory.indexed"]


async def test_a_failing_model_leaves_the_turn_committed_without_a_vector(
    engine: Engine, model: HeldModel
) -> None:
    model.failures = 1
    write = await _memorize_held(engine, model)
    model.gate.set()
    await write
    (record,) = await engine.backend.scan(EPISODES)
    assert record.value["text"] == TURN
    # Committed without its vector, which comes later, once the model is back
    # (``PendingVectors``), in a transaction of its own.
    assert (await _event_types(engine))[0] == "memory.written"


async def test_a_memorize_cancelled_while_the_model_runs_still_stores_its_vector(
    engine: Engine, model: HeldModel
) -> None:
    write = await _memorize_held(engine, model)
    write.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await write
    model.gate.set()
    # Committed before the caller gave up: its vector is stored once the model answers.
    (record,) = await engine.backend.scan(EPISODES)
    for _ in range(1000):
        ids, _ = await engine.backend.search.vectors(EPISODES, engine.indexer.model)
        if ids:
            break
        await asyncio.sleep(0.01)
    assert ids == [record.id]
    # The connection went back to the pool clean: the next turn is stored whole.
    await engine.scope(**SCOPE).episodic.memorize(MemoryItem(text=TURN, role="user"))
    assert len(await engine.backend.scan(EPISODES)) == 2
    ids, _ = await engine.backend.search.vectors(EPISODES, engine.indexer.model)
    assert len(ids) == 2


async def test_writers_of_one_partition_all_get_through(engine: Engine, model: HeldModel) -> None:
    model.gate.clear()
    mem = engine.scope(**SCOPE)
    turns = [f"Turn {n} of the trip. We saw dolphins near the harbour." for n in range(6)]
    writes = asyncio.gather(
        *(mem.episodic.memorize(MemoryItem(text=text, role="user")) for text in turns)
    )
    await model.called.wait()
    await asyncio.sleep(0.2)
    model.gate.set()
    await asyncio.wait_for(writes, timeout=30)
    stored = await engine.backend.scan(EPISODES)
    assert sorted(r.value["text"] for r in stored) == sorted(turns)
    ids, _ = await engine.backend.search.vectors(EPISODES, engine.indexer.model)
    assert sorted(ids) == sorted(r.id for r in stored if r.id is not None)
    assert len(ids) == len(stored)
