"""Each forget instruction, in both modes, selects what it says; a hard-forgotten item cannot
be found by any path afterwards."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engramdb.cli.app import app
from engramdb.core.intent import MemoryItem
from engramdb.core.types import RecallQuery
from engramdb.engine import Engine
from engramdb.orchestrator.plugin import StoredMemoryType
from engramdb.storage.records import RecordQuery

T0 = datetime(2026, 1, 10, tzinfo=UTC)
ITEMS = [  # id, text, importance, days after T0
    ("a", "bought oat milk at the corner shop", 0.9, 0),
    ("b", "the dentist appointment moved to Friday", 0.2, 1),
    ("c", "started reading a novel about whales", 0.5, 2),
    ("d", "the corner shop now opens at eight", 0.7, 3),
]


async def fill(plugin: StoredMemoryType) -> None:
    for key, text, weight, days in ITEMS:
        await plugin.memorize(
            MemoryItem(
                text=text,
                id=key,
                key=key,
                importance=weight,
                occurred_at=T0 + timedelta(days=days),
                role="user",
            )
        )


async def live(plugin: StoredMemoryType) -> list[str]:
    return sorted(r.key for r in await plugin.records())


CASES = [
    ("id:c", ["c"]),
    ("oldest", ["a"]),
    ("oldest 2", ["a", "b"]),
    ("least important", ["b"]),
    ("least important 2", ["b", "c"]),
    ("before 2026-01-12", ["a", "b"]),
    ("older than 1 day", ["a", "b", "c", "d"]),
    ('matching "corner shop"', ["a", "d"]),
    ("all", ["a", "b", "c", "d"]),
]


@pytest.mark.parametrize("mode", ["soft", "hard"])
@pytest.mark.parametrize(("instruction", "expected"), CASES)
async def test_instruction_selects_what_it_says(
    engine: Engine, instruction: str, expected: list[str], mode: str
) -> None:
    plugin = engine.scope(tenant="acme", user="alice").episodic
    await fill(plugin)
    result = await plugin.forget(instruction, mode)
    assert sorted(result.forgotten) == expected
    assert await live(plugin) == sorted({"a", "b", "c", "d"} - set(expected))
    provider = plugin.provider
    hidden = await provider.backend.keys(
        RecordQuery(provider.provider_id, provider.partition, hidden=True)
    )
    assert sorted(hidden) == (expected if mode == "soft" else [])


IN_WORDS = [
    ("memory id c", ["c"]),
    ("oldest item", ["a"]),
    ("delete the oldest 2 items", ["a", "b"]),
    ("forget the least important memory", ["b"]),
    ("forget everything before 2026-01-12", ["a", "b"]),
    ("forget what I said about the corner shop", ["a", "d"]),
    ("forget all", ["a", "b", "c", "d"]),
]


@pytest.mark.parametrize(("instruction", "expected"), IN_WORDS)
async def test_instructions_in_words_select_what_they_say(
    engine: Engine, instruction: str, expected: list[str]
) -> None:
    plugin = engine.scope(tenant="acme", user="alice").episodic
    await fill(plugin)
    result = await plugin.forget(instruction, "hard")
    assert sorted(result.forgotten) == expected
    assert result.instruction == instruction


async def test_the_spec_fade_sentence_fades_a_little(engine: Engine) -> None:
    plugin = engine.scope(tenant="acme", user="alice").working
    await fill(plugin)
    await plugin.memorize(MemoryItem(text="being on a bike at 5 years old", id="bike"))
    result = await plugin.forget("slightly fade the memory about being on a bike at 5 years old")
    assert result.faded == ["bike"]
    assert result.forgotten == []
    weights = {r.key: r.value["importance"] for r in await plugin.records()}
    assert weights["bike"] == 0.375  # 0.5 faded by a quarter
    assert weights["a"] == 0.9


async def test_the_cli_forgets_by_the_spec_sentences(engine: Engine, db_path: Path) -> None:
    plugin = engine.scope(tenant="acme", user="alice").episodic
    await fill(plugin)
    await plugin.memorize(MemoryItem(text="note five", id="5", occurred_at=T0 + timedelta(9)))
    await engine.close()
    cli = CliRunner(env={"ENGRAM_DB": str(db_path)})
    scope = ["--tenant", "acme", "--user", "alice"]
    for sentence, told in (("memory id 5", "forgot (soft) 1: 5"), ("oldest item", ": a")):
        result = await asyncio.to_thread(cli.invoke, app, [*scope, "forget", sentence])
        assert result.exit_code == 0, result.stderr
        assert told in result.stdout
    result = await asyncio.to_thread(cli.invoke, app, [*scope, "forget", "banish the rest"])
    assert result.exit_code == 2
    assert "id:<id>" in result.stderr
    assert "delete the oldest 3 items" in result.stderr


async def test_key_instruction_on_semantic_memory(engine: Engine) -> None:
    plugin = engine.scope(tenant="acme", user="alice").semantic
    await fill(plugin)
    result = await plugin.forget("key:d", "hard")
    assert result.forgotten == ["d"]
    assert await live(plugin) == ["a", "b", "c"]


async def test_before_turn_on_the_conversation_buffer(engine: Engine) -> None:
    plugin = engine.scope(tenant="acme", user="alice", session="s-1").conversation
    await fill(plugin)
    result = await plugin.forget("before turn 3", "soft")
    assert sorted(result.forgotten) == ["a", "b"]
    assert [i.id for i in await plugin.recent(10)] == ["c", "d"]


async def test_fade_lowers_importance_without_forgetting(engine: Engine) -> None:
    plugin = engine.scope(tenant="acme", user="alice").working
    await fill(plugin)
    result = await plugin.forget('fade "corner shop" by 0.5', "soft")
    assert sorted(result.faded) == ["a", "d"]
    assert result.forgotten == []
    weights = {r.key: r.value["importance"] for r in await plugin.records()}
    assert weights == {"a": 0.45, "b": 0.2, "c": 0.5, "d": 0.35}
    assert (await plugin.forget("least important", "hard")).forgotten == ["b"]


SECRET = "quokka-4417 vault code"


async def test_hard_forgotten_item_is_found_by_no_path(engine: Engine, db_path: Path) -> None:
    mem = engine.scope(tenant="acme", user="alice")
    await mem.episodic.memorize(
        MemoryItem(text=f"the {SECRET} is taped under the desk", id="secret", role="user")
    )
    await mem.semantic.memorize(
        MemoryItem(text=f"Alice's {SECRET} opens the office safe", key="vault")
    )
    await mem.episodic.memorize(MemoryItem(text="lunch was a quinoa salad", id="lunch"))
    assert "secret" in [i.id for i in await mem.episodic.remember("vault code desk")]
    assert (await mem.episodic.forget("id:secret", "hard")).forgotten == ["secret"]
    assert (await mem.semantic.forget("key:vault", "hard")).forgotten == ["vault"]

    # remember, recall and the assembled context
    assert "secret" not in [i.id for i in await mem.episodic.remember("quokka vault code desk")]
    assert await mem.semantic.remember("vault code safe") == []
    recalled = await mem.manager.recall(RecallQuery(query="quokka vault code", limit=50))
    assert all(SECRET not in json.dumps(r.entry.value) for r in recalled)
    assert SECRET not in (await mem.assemble("vault code", 500)).text
    # text index and vector index
    index = await engine.indexer.vector_index("episodic", mem.episodic.provider.partition)
    assert engine.indexer.embedder is not None
    query = await engine.indexer.embedder.embed_one(f"the {SECRET} is taped under the desk")
    record_ids = {hit for hit, _ in index.search(query, 10)}
    remaining = {r.id for r in await mem.episodic.records()}
    assert record_ids <= remaining
    # export
    exported = [row async for row in engine.export()]
    assert all(SECRET not in json.dumps(row) for row in exported)
    await engine.close()
    # the CLI, on the same file
    cli = CliRunner(env={"ENGRAM_DB": str(db_path)})
    for args in (
        ["--tenant", "acme", "--user", "alice", "remember", "vault code desk"],
        ["--tenant", "acme", "--user", "alice", "recall", "vault code desk"],
        ["--tenant", "acme", "--user", "alice", "remember", "vault", "-t", "semantic"],
        ["export"],
        ["events", "--limit", "1000", "--json"],
    ):
        result = await asyncio.to_thread(cli.invoke, app, args)
        assert result.exit_code == 0, result.stderr
        assert "quokka" not in result.stdout
    # the full-text index and the file itself
    with sqlite3.connect(db_path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        hits = conn.execute("SELECT count(*) FROM records_fts WHERE records_fts MATCH 'quokka'")
        assert hits.fetchone()[0] == 0
    assert b"quokka" not in await asyncio.to_thread(db_path.read_bytes)
