"""An export restored into an empty database holds what the exported one did, on SQLite and
PostgreSQL; a restore refuses a database in use and a malformed export, appending nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb.core.errors import UsageError, ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.plans import Plan
from tests.postgres.database import empty_database


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines))
    return path


def target(kind: str, tmp_path: Path, name: str) -> str:
    return str(tmp_path / f"{name}.db") if kind == "sqlite" else empty_database()


async def fill(engine: Engine) -> None:
    alice = engine.scope(tenant="acme", user="alice")
    for text in ("I moved to Lisbon last spring", "I adopted a cat named Miso", "Temp note"):
        await alice.episodic.memorize(MemoryItem(text=text))
    await alice.semantic.memorize(MemoryItem(text="Alice prefers window seats"))
    await alice.semantic.memorize(MemoryItem(text="The office wifi is fast"), public=True)
    await alice.graph.ingest("Alice lives in Lisbon.", occurred_at=datetime(2020, 1, 1, tzinfo=UTC))
    await alice.plans.create(Plan(plan_id="p1", user_id="alice", goal_event="trip.planned"))
    await alice.persistent.write("profile.city", "Lisbon", metadata={"source": "chat"})
    await alice.persistent.write("secret", "forget me")
    await alice.persistent.forget("secret", "hard")
    await alice.persistent.write("hidden", "soft")
    await alice.persistent.forget("hidden", "soft")
    await alice.assemble("Where does Alice live?")


async def rows(engine: Engine) -> tuple[list[str], list[dict[str, Any]]]:
    records, events = [], []
    async for row in engine.export():
        if row["kind"] == "record":
            records.append(json.dumps({k: v for k, v in row.items() if k != "id"}, sort_keys=True))
        else:
            events.append(row)
    return sorted(records), events


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_restored_export_holds_what_the_original_did(
    kind: str, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    config = EngineConfig(embedder=embedder)
    async with engramdb.open(target(kind, tmp_path, "original"), config=config) as original:
        await fill(original)
        lines = [json.dumps(row) async for row in original.export()]
        records, events = await rows(original)
        vectors = await original.vector_counts()
    dump = write(tmp_path / "dump.jsonl", lines)
    async with engramdb.open(target(kind, tmp_path, "restored"), config=config) as restored:
        report = await restored.restore(dump)
        assert report.records == report.records_expected == len(records)
        again, restored_events = await rows(restored)
        assert again == records
        restored_ids = {event["event_id"] for event in restored_events}
        assert {event["event_id"] for event in events} <= restored_ids | {
            event["event_id"]
            for event in events
            if event["event_type"] == "memory.provider.registered"
        }
        assert await restored.vector_counts() == vectors
        assert report.vectors == sum(vectors.values())
        alice = restored.scope(tenant="acme", user="alice")
        found = await alice.episodic.remember("Where did I move?")
        assert found[0].text == "I moved to Lisbon last spring"
        assert "forget me" not in "\n".join(lines)
        assert await alice.persistent.restore("hidden")


async def test_a_restore_needs_an_empty_database(engine: Engine, tmp_path: Path) -> None:
    await fill(engine)
    dump = write(tmp_path / "dump.jsonl", [json.dumps(row) async for row in engine.export()])
    before = await engine.events.count()
    with pytest.raises(UsageError, match="empty database"):
        await engine.restore(dump)
    assert await engine.events.count() == before
    with pytest.raises(UsageError, match="no export at"):
        await engine.restore(tmp_path / "nope.jsonl")


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "line 2 is not valid JSON"),
        ('{"kind": "table"}', "line 2 is neither a record nor an event"),
        ('{"kind": "event", "event_type": ""}', "line 2 is not a valid event"),
    ],
)
async def test_a_malformed_export_appends_nothing(tmp_path: Path, line: str, message: str) -> None:
    async with engramdb.open(tmp_path / "a.db", config=EngineConfig(embedder=None)) as source:
        await source.scope(user="alice").persistent.write("k", "v")
        good = [json.dumps(row) async for row in source.export()]
    async with engramdb.open(tmp_path / "b.db", config=EngineConfig(embedder=None)) as empty:
        before = await empty.events.count()
        with pytest.raises(ValidationError, match=message):
            await empty.restore(write(tmp_path / "bad.jsonl", [good[0], line, *good[1:]]))
        assert await empty.events.count() == before
