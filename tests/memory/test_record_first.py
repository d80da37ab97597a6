"""A lone turn with sentences is committed while its whole-text vector is computed, and the
vector queued right after (``providers.record_first``); on every backend, once ``memorize``
returns the vector is found, a later write of the same key keeps its own vector, closing the
engine stores what was queued, and a record whose vector was never stored (the process died in
between) gets it, with its parts, from its pending-parts record when the store is next
opened."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import pytest

import engramdb
from engramdb.core.events import new_id
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.embedder import FloatArray, WrappingEmbedder, start_embedding
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.episodic import EPISODIC_SPEC
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC
from engramdb.providers.event_sourced import WriteRequest
from engramdb.storage.backend import EventQuery, QueuedVectorWrites
from engramdb.storage.records import Record, RecordQuery

SCOPE = {"tenant": "acme", "user": "alice"}
TURN = "We sailed to Hydra in June. The ferry was late. My brother lost his hat overboard."
EPISODES = RecordQuery(EPISODIC_SPEC.namespace, None)
#: A turn of one sentence: no parts of its own.
SHORT = "Thanks, that helps a lot!"
#: The same key's next text.
LATER = "We flew to Crete in May. The flight was early. My sister found a hat on the beach."


async def _stored(engine: Engine) -> tuple[dict[int, bytes], dict[int, bytes]]:
    model = engine.indexer.model
    ids, blobs = await engine.backend.search.vectors(EPISODES, model)
    return dict(zip(ids, blobs, strict=True)), await engine.backend.search.part_vectors(
        EPISODES, model
    )


async def _whole_vector(engine: Engine, record: Record) -> bytes:
    """The whole-text vector ``record``'s write computes."""
    expected = await engine.indexer.embed_records(EPISODIC_SPEC, [record], parts=False)
    assert expected is not None
    return expected[0][0]


async def test_the_vector_is_stored_and_found_when_memorize_returns(
    target: str, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
        mem = engine.scope(**SCOPE)
        await mem.episodic.memorize(MemoryItem(text=TURN, role="user"))
        (record,) = await engine.backend.scan(EPISODES)
        whole, _ = await _stored(engine)
        expected = await _whole_vector(engine, record)
        assert whole == {record.id: expected}
        events = await engine.events.read(EventQuery(event_types=("memory.indexed",)))
        # The sentences' vectors may have followed already, computed aside.
        said = [(e.payload["key"], e.payload["index_type"]) for e in events]
        assert said in ([(record.key, "vector")], [(record.key, "vector"), (record.key, "parts")])
        hits = await mem.episodic.remember("who lost a hat on the ferry?", limit=1)
        assert [hit.text for hit in hits] == [TURN]
        assert hits[0].score_breakdown.get("vector", 0.0) > 0.0


async def _left_without_its_vector(target: str, text: str) -> None:
    """What a process that died between a turn's commit and its vector's leaves behind: the
    record and its pending-parts record, and no vector."""
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        provider = engine.scope(**SCOPE).episodic.provider
        await provider.write_many([WriteRequest("turn-1", {"text": text, "role": "user"})])
        markers = provider._markers_provider()
        ops, events = markers.prepared(
            [WriteRequest(new_id(), {"namespace": "episodic", "key": "turn-1"}, "parts")]
        )
        await engine.backend.commit(ops, events)


async def _noting_commits(engine: Engine, log: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """After a first write (the model loaded), each commit is noted in ``log``, emptied."""
    await engine.scope(**SCOPE).episodic.memorize(MemoryItem(text="Warm up.", role="user"))
    commit = engine.backend.commit

    async def noted(*args: Any) -> Any:
        log.append("commit")
        return await commit(*args)

    monkeypatch.setattr(engine.backend, "commit", noted)
    log.clear()


class Logged(WrappingEmbedder[MiniLMEmbedder]):
    """The real model, noting in ``log`` when it is handed a write's texts."""

    def __init__(self, inner: MiniLMEmbedder, log: list[str]) -> None:
        super().__init__(inner)
        self.log = log

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        return await self.start(texts)

    def start(self, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
        self.log.append("model")
        return start_embedding(self.inner, texts)


async def test_the_model_is_asked_before_the_write_goes_to_the_store(
    target: str, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    async with engramdb.open(target, config=EngineConfig(embedder=Logged(embedder, log))) as engine:
        mem = engine.scope(**SCOPE)
        await _noting_commits(engine, log, monkeypatch)
        await mem.episodic.memorize(MemoryItem(text=TURN, role="user"))
        # The turn's transaction is committed while the model runs.
        assert log[:2] == ["model", "commit"]
        whole, _ = await _stored(engine)
        assert len(whole) == 2


@pytest.mark.parametrize(("text", "asked"), [(TURN, "who lost a hat?"), (SHORT, "did that help?")])
async def test_a_record_left_without_its_vector_gets_it_with_any_parts_at_the_next_open(
    target: str, embedder: MiniLMEmbedder, text: str, asked: str
) -> None:
    await _left_without_its_vector(target, text)
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
        hits = await engine.scope(**SCOPE).episodic.remember(asked, limit=1)
        assert [hit.text for hit in hits] == [text]
        assert await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None)) == []
        (record,) = await engine.backend.scan(EPISODES)
        whole, parts = await _stored(engine)
        expected = await engine.indexer.embed_records(EPISODIC_SPEC, [record])
        assert expected is not None
        owed = {} if expected[1][0] is None else {record.id: expected[1][0]}
        # Exactly what a write that computed every vector itself would have stored.
        assert (whole, parts) == ({record.id: expected[0][0]}, owed)
        indexed = await engine.events.read(EventQuery(event_types=("memory.indexed",)))
        kinds = ["parts", "vector"] if owed else ["vector"]
        assert sorted(e.payload["index_type"] for e in indexed) == kinds


async def test_a_memorize_cancelled_after_its_commit_still_stores_its_vector(
    engine: Engine,
) -> None:
    mem = engine.scope(**SCOPE)
    write = asyncio.ensure_future(mem.episodic.memorize(MemoryItem(text=TURN, role="user")))
    for _ in range(10_000):
        if await engine.backend.scan(EPISODES):
            break
        await asyncio.sleep(0.0005)
    # Committed, its vector most likely still being computed: the caller gives up.
    write.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await write
    (record,) = await engine.backend.scan(EPISODES)
    expected = await _whole_vector(engine, record)
    for _ in range(1000):
        whole, _ = await _stored(engine)
        if whole:
            break
        await asyncio.sleep(0.01)
    assert whole == {record.id: expected}


async def test_a_key_written_again_at_once_keeps_the_vector_of_its_new_text(
    target: str, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
        mem = engine.scope(**SCOPE)
        await mem.episodic.memorize(MemoryItem(id="trip", text=TURN, role="user"))
        await mem.episodic.memorize(MemoryItem(id="trip", text=LATER, role="user"))
        (record,) = await engine.backend.scan(EPISODES)
        assert record.version == 2
        whole, _ = await _stored(engine)
        expected = await _whole_vector(engine, record)
        assert whole == {record.id: expected}


async def test_a_vector_queued_for_a_version_written_over_meanwhile_is_not_stored(
    target: str, embedder: MiniLMEmbedder
) -> None:
    # Another process wrote the key again between this write's commit and its vector's: the
    # queued vector, computed from the older text, must not land on the newer one.
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
        mem = engine.scope(**SCOPE)
        provider = mem.episodic.provider
        await mem.episodic.memorize(MemoryItem(id="trip", text=TURN, role="user"))
        (first,) = await engine.backend.scan(EPISODES)
        old = await _whole_vector(engine, first)
        await provider.write_many([WriteRequest("trip", {"text": LATER, "role": "user"})])
        (second,) = await engine.backend.scan(EPISODES)
        expected = await _whole_vector(engine, second)
        queue = engine.backend
        assert isinstance(queue, QueuedVectorWrites)
        await queue.queue_vectors(engine.indexer.model, [(first.id or 0, old)], [], [first.version])
        whole, _ = await _stored(engine)
        assert whole == {second.id: expected}


async def test_closing_the_engine_stores_the_vectors_it_queued(
    target: str, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
        await engine.scope(**SCOPE).episodic.memorize(MemoryItem(text=TURN, role="user"))
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        (record,) = await engine.backend.scan(EPISODES)
        ids, _ = await engine.backend.search.vectors(EPISODES, MiniLMEmbedder().model_id)
        assert ids == [record.id]


async def test_a_one_sentence_turn_is_committed_while_the_model_runs_and_settled_with_its_vector(
    target: str, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    log: list[str] = []
    async with engramdb.open(target, config=EngineConfig(embedder=Logged(embedder, log))) as engine:
        mem = engine.scope(**SCOPE)
        await _noting_commits(engine, log, monkeypatch)
        before = (await engine.events.read(EventQuery()))[-1].position or 0
        await mem.episodic.memorize(MemoryItem(text=SHORT, role="user"))
        assert log[:2] == ["model", "commit"]
        # Nothing is left owed: no parts, and its pending record went with its vector.
        assert len(engine.indexer.deferred) == 0
        assert await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None)) == []
        (record,) = [r for r in await engine.backend.scan(EPISODES) if r.value["text"] == SHORT]
        whole, parts = await _stored(engine)
        assert whole[record.id or 0] == await _whole_vector(engine, record)
        assert record.id not in parts
        after = await engine.events.read(EventQuery(after=before))
        said = [(e.event_type, e.provider_id, e.payload.get("index_type")) for e in after]
        # The turn and its pending record in one transaction; its vector and the pending
        # record's deletion in the next.
        assert said == [
            ("memory.written", "episodic", None),
            ("memory.written", PARTS_PENDING_SPEC.namespace, None),
            ("memory.indexed", "episodic", "vector"),
            ("memory.deleted", PARTS_PENDING_SPEC.namespace, None),
        ]
        hits = await mem.episodic.remember("did that help?", limit=2)
        assert SHORT in [hit.text for hit in hits]
