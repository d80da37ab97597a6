"""A turn's part vectors, owed when its write is acknowledged, survive a SIGKILL: the next
engine to open the store computes them, and the store then holds what it would have held had
they been computed inside the write."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

import engramdb
from engramdb.engine import Engine, EngineConfig
from engramdb.index import MiniLMEmbedder
from engramdb.orchestrator.episodic import EPISODIC_SPEC
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC
from engramdb.storage.records import RecordQuery
from tests.helpers.children import acknowledged, start_child, until_acknowledged
from tests.reliability.parts_child import SCOPE

EPISODES = RecordQuery(EPISODIC_SPEC.namespace, None)


async def _killed_after_acknowledging(target: str, acks: Path, log: Path, count: int) -> None:
    child = await start_child("tests.reliability.parts_child", (target, str(acks), "0"), log)
    await until_acknowledged(
        {acks: count},
        [child],
        log,
        seconds=120,
        failure="the child acknowledged too little",
    )
    child.send_signal(signal.SIGKILL)
    await child.wait()


async def _stored_vectors(engine: Engine) -> dict[int, tuple[bytes, bytes | None]]:
    """Each acknowledged turn's (whole-text + part vectors, part vectors) as stored."""
    model = engine.indexer.model
    sets = await engine.backend.search.vector_sets(EPISODES, model)
    parts = await engine.backend.search.part_vectors(EPISODES, model)
    return {
        r.metadata["n"]: (sets[r.id], parts.get(r.id))
        for r in await engine.backend.scan(EPISODES)
        if r.id is not None
    }


@pytest.mark.reliability
async def test_a_kill_after_the_acknowledgement_loses_no_part_vector(
    target: str, tmp_path: Path
) -> None:
    acks, log = tmp_path / "acks", tmp_path / "child.log"
    await _killed_after_acknowledging(target, acks, log, count=5)
    acked = acknowledged(acks)
    # Opened without a model: nothing is computed, what the kill left is seen as it is.
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        stored = {r.metadata["n"] for r in await engine.backend.scan(EPISODES)}
        owed = await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None))
        whole_only = await engine.backend.search.part_vectors(EPISODES, MiniLMEmbedder().model_id)
    assert set(acked) <= stored
    assert len(owed) >= len(acked)
    assert not whole_only
    async with engramdb.open(target) as engine:
        hits = await engine.scope(**SCOPE).episodic.remember("ticket number 14", limit=3)
        assert hits
        assert hits[0].metadata["n"] == 2
        assert await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None)) == []
        stored_vectors = await _stored_vectors(engine)
        records = await engine.backend.scan(EPISODES)
        expected = await engine.indexer.embed_records(EPISODIC_SPEC, records)
    assert expected is not None
    for record, whole, parts in zip(records, *expected, strict=True):
        # Exactly what a write that computed every vector itself would have stored.
        assert stored_vectors[record.metadata["n"]] == (whole + (parts or b""), parts)
        assert parts is not None
