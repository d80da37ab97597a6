"""One rule on every backend: a string holding a NUL character or a lone surrogate, anywhere a
write can put it, and a value nested 10,000 deep are refused with a typed error before anything
is written (PostgreSQL cannot store a NUL at all; SQLite used to keep it, so its exports could
not move to PostgreSQL). An export carrying such a string is refused whole."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb.core.errors import InvalidScopeError, ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig, ScopedMemory
from engramdb.orchestrator.plans import Plan
from engramdb.orchestrator.sessions import Session
from engramdb.orchestrator.tasks import TaskContext
from engramdb.providers.graph import GraphEntity
from engramdb.storage.backend import EventQuery
from tests.postgres.database import empty_database

NUL, SURROGATE = "a\x00b", "x\ud800y"


def nested(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture(params=["sqlite", "postgresql"])
async def plain_engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine on each backend, without an embedding model (nothing here searches)."""
    target = str(tmp_path / "e.db") if request.param == "sqlite" else empty_database()
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        yield engine


Write = Callable[[ScopedMemory, str], Awaitable[object]]


async def _plan_update(memory: ScopedMemory, bad: str) -> object:
    await memory.plans.create(Plan(plan_id="p-update", goal_event="g"))
    return await memory.plans.update("p-update", {"state": {"step": bad}})


WRITES: dict[str, Write] = {
    "value": lambda m, bad: m.manager.store("k", bad, tier=engramdb.MemoryTier.PERSISTENT),
    "nested value": lambda m, bad: m.manager.store(
        "k", {"a": [1, {"b": bad}]}, tier=engramdb.MemoryTier.PERSISTENT
    ),
    "value's dict key": lambda m, bad: m.manager.store(
        "k", {bad: 1}, tier=engramdb.MemoryTier.PERSISTENT
    ),
    "metadata": lambda m, bad: m.manager.store(
        "k", 1, metadata={"m": bad}, tier=engramdb.MemoryTier.PERSISTENT
    ),
    "key": lambda m, bad: m.manager.store(f"k{bad}", 1, tier=engramdb.MemoryTier.PERSISTENT),
    "working tier value": lambda m, bad: m.manager.store("k", [bad]),
    "episode content": lambda m, bad: m.episodic.memorize(MemoryItem(text=bad, role="user")),
    "fact": lambda m, bad: m.semantic.memorize(MemoryItem(text=f"The sky is {bad}.")),
    "rule": lambda m, bad: m.procedural.memorize(
        MemoryItem(text=bad, metadata={"trigger": "always"})
    ),
    "plan status": lambda m, bad: m.plans.create(Plan(plan_id="p", goal_event="g", status=bad)),
    "plan state": lambda m, bad: m.plans.create(Plan(plan_id="p", goal_event="g", state={bad: 1})),
    "plan update": _plan_update,
    "task event": lambda m, bad: m.tasks.create(TaskContext(task_id="t", event_type=bad)),
    "session metadata": lambda m, bad: m.sessions.create(
        Session(session_id="s", metadata={"m": bad})
    ),
    "shared state": lambda m, bad: m.working.set("k", {"v": bad}),
    "entity name": lambda m, bad: m.graph.add_entity(GraphEntity(name=bad, entity_type="person")),
    "tenant name": lambda m, bad: m.engine.tenancy.create_tenant("acme", name=bad),
    "user id": lambda m, bad: m.engine.tenancy.create_user("acme", bad),
    "tenant id": lambda m, bad: m.engine.tenancy.create_tenant(bad),
}


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
@pytest.mark.parametrize("where", sorted(WRITES))
async def test_an_unstorable_string_is_refused_and_nothing_is_written(
    plain_engine: Engine, where: str, bad: str
) -> None:
    memory = plain_engine.scope(tenant="acme", user="alice", agent="helper", session="s-1")
    await plain_engine.tenancy.ensure_tenant("acme")
    before = await plain_engine.events.read(EventQuery())
    with pytest.raises(ValidationError):
        await WRITES[where](memory, bad)
    after = await plain_engine.events.read(EventQuery())
    # The plan-update case creates its plan first; the refused update adds nothing to it.
    assert len(after) - len(before) == (1 if where == "plan update" else 0)
    if where == "plan update":
        assert (await memory.plans.get("p-update")).state == {}


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
@pytest.mark.parametrize("level", ["tenant", "user", "agent", "session"])
async def test_a_scope_holding_one_is_refused(plain_engine: Engine, level: str, bad: str) -> None:
    with pytest.raises(InvalidScopeError):
        plain_engine.scope(**{"tenant": "acme", level: f"name{bad}"})


@pytest.mark.parametrize("bad", [NUL, SURROGATE], ids=["nul", "surrogate"])
async def test_reads_naming_one_are_refused_alike(plain_engine: Engine, bad: str) -> None:
    memory = plain_engine.scope(tenant="acme", user="alice")
    with pytest.raises(ValidationError):
        await memory.persistent.list_keys(prefix=bad)


@pytest.mark.parametrize("depth", [101, 10_000])
async def test_a_value_nested_too_deep_is_a_typed_error(plain_engine: Engine, depth: int) -> None:
    memory = plain_engine.scope(tenant="acme", user="alice")
    with pytest.raises(ValidationError, match="nests deeper than 100"):
        await memory.manager.store("deep", nested(depth), tier=engramdb.MemoryTier.PERSISTENT)
    with pytest.raises(ValidationError):
        await memory.manager.store(
            "deep", 1, metadata={"m": nested(depth)}, tier=engramdb.MemoryTier.PERSISTENT
        )
    assert await memory.persistent.read("deep") is None
    stored = await memory.manager.store(
        "deep", nested(99), tier=engramdb.MemoryTier.PERSISTENT
    )  # the deepest a value may nest
    assert stored.value == nested(99)


async def test_an_export_holding_one_is_refused_whole(plain_engine: Engine, tmp_path: Path) -> None:
    source_db = tmp_path / "source.db"
    async with engramdb.open(source_db, config=EngineConfig(embedder=None)) as source:
        memory = source.scope(tenant="acme", user="alice")
        await memory.manager.store("fine", "kept?", tier=engramdb.MemoryTier.PERSISTENT)
        await memory.manager.store("bad", "placeholder", tier=engramdb.MemoryTier.PERSISTENT)
        rows = [json.dumps(row) async for row in source.export()]
    # What an older SQLite database could hold: a NUL in a written value.
    tampered = [row.replace('"placeholder"', '"a\\u0000b"') for row in rows]
    assert tampered != rows
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(tampered) + "\n", encoding="utf-8")
    before = await plain_engine.events.count()
    with pytest.raises(ValidationError, match="line"):
        await plain_engine.restore(export)
    assert await plain_engine.events.count() == before  # not even the good lines


async def test_an_export_moves_from_sqlite_to_this_backend_unchanged(
    plain_engine: Engine, tmp_path: Path
) -> None:
    odd = {"text": "tab\tnewline\n emoji 🦘 accents é ß", "control": "\x01\x1f", "n": [1.5, None]}
    async with engramdb.open(tmp_path / "s.db", config=EngineConfig(embedder=None)) as source:
        memory = source.scope(tenant="acme", user="alice")
        await memory.manager.store("odd", odd, tier=engramdb.MemoryTier.PERSISTENT)
        lines = [json.dumps(row, ensure_ascii=False) async for row in source.export()]
    export = tmp_path / "export.jsonl"
    export.write_text("\n".join(lines) + "\n", encoding="utf-8")
    await plain_engine.restore(export)
    entry = await plain_engine.scope(tenant="acme", user="alice").persistent.read("odd")
    assert entry is not None
    assert entry.value == odd


DEEP_WRITES: dict[str, Write] = {
    "episode metadata": lambda m, _: m.episodic.memorize(
        MemoryItem(text="x", metadata={"a": nested(10_000)})
    ),
    "plan state": lambda m, _: m.plans.create(
        Plan(plan_id="p", goal_event="g", state={"a": nested(10_000)})
    ),
    "session metadata": lambda m, _: m.sessions.create(
        Session(session_id="s", metadata={"a": nested(10_000)})
    ),
    "entity properties": lambda m, _: m.graph.add_entity(
        GraphEntity(name="n", entity_type="person", properties={"a": nested(10_000)})
    ),
    "shared state": lambda m, _: m.working.set("k", nested(10_000)),
    "recall filter": lambda m, _: m.manager.recall(
        engramdb.RecallQuery(query="x", metadata_filters={"a": nested(10_000)})
    ),
}


@pytest.mark.parametrize("where", sorted(DEEP_WRITES))
async def test_a_value_10000_deep_anywhere_is_a_typed_error(
    plain_engine: Engine, where: str
) -> None:
    memory = plain_engine.scope(tenant="acme", user="alice", agent="helper", session="s-1")
    before = await plain_engine.events.count()
    with pytest.raises(ValidationError, match="nests deeper than 100"):
        await DEEP_WRITES[where](memory, "")
    assert await plain_engine.events.count() == before
