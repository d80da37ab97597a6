"""Task contexts, plans and sessions as stored resources of the engine: each write with its
event, rebuilt from the log, paged, found by sub-task."""

from __future__ import annotations

import pytest

from engramdb.core.errors import ConflictError, NotFoundError, ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.core.types import RecallQuery
from engramdb.engine import Engine
from engramdb.orchestrator.plans import Plan
from engramdb.orchestrator.recent import recent_items
from engramdb.orchestrator.sessions import Session
from engramdb.orchestrator.tasks import TaskContext
from engramdb.storage.backend import EventQuery


async def test_every_write_has_its_event(engine: Engine) -> None:
    tasks = engine.scope(tenant="acme", user="alice").tasks
    before = await engine.events.count()
    await tasks.create(TaskContext(task_id="t1", event_type="research.requested"))
    await tasks.update("t1", {"sub_tasks": ["s1"]})
    await tasks.delete("t1")
    events = await engine.events.read(EventQuery(provider_id="task_context", after=0))
    assert [e.event_type for e in events] == ["memory.written"] * 2 + ["memory.deleted"]
    assert await engine.events.count() == before + 3
    assert events[0].scope.user == "alice"  # the writer's full scope is kept


async def test_resources_are_rebuilt_from_the_log(engine: Engine) -> None:
    memory = engine.scope(tenant="acme", user="alice")
    await memory.tasks.create(TaskContext(task_id="t1", event_type="e", sub_tasks=["s1"]))
    await memory.plans.create(Plan(plan_id="p1", user_id="alice", goal_event="g"))
    await memory.plans.update("p1", {"status": "completed"})
    await memory.sessions.create(Session(session_id="s1", user_id="alice"))
    await memory.sessions.delete("s1")
    before = (await memory.tasks.get("t1"), await memory.plans.get("p1"))
    report = await engine.rebuild()
    assert report.records["task_context"] == 1
    assert report.records["sessions"] == 0
    assert (await memory.tasks.get("t1"), await memory.plans.get("p1")) == before
    assert (await memory.tasks.by_subtask("s1")) == before[0]


async def test_resources_are_never_recalled(engine: Engine) -> None:
    memory = engine.scope(tenant="acme")
    await memory.tasks.create(TaskContext(task_id="zebra-task", event_type="zebra.requested"))
    assert "task_context" not in await memory.manager.providers()
    assert await memory.manager.recall(RecallQuery(query="zebra")) == []


async def test_ids_are_unique_per_tenant(engine: Engine) -> None:
    plan = Plan(plan_id="p1", goal_event="g")
    await engine.scope(tenant="acme").plans.create(plan)
    with pytest.raises(ConflictError):
        await engine.scope(tenant="acme", user="bob").plans.create(plan)
    await engine.scope(tenant="globex").plans.create(plan)


async def test_update_rules(engine: Engine) -> None:
    tasks = engine.scope(tenant="acme").tasks
    await tasks.create(TaskContext(task_id="t1", event_type="e", data={"a": 1}))
    changed = await tasks.update("t1", {"state": {"p": 0.5}})
    assert (changed.data, changed.state) == ({"a": 1}, {"p": 0.5})
    assert changed.updated_at is not None
    assert changed.created_at is not None
    assert changed.updated_at > changed.created_at
    with pytest.raises(ValidationError):
        await tasks.update("t1", {"task_id": "t2"})
    with pytest.raises(ValidationError):
        await tasks.update("t1", {"color": "red"})
    with pytest.raises(ValidationError):
        await tasks.update("t1", {"event_type": None})
    with pytest.raises(NotFoundError):
        await tasks.update("t9", {"state": {}})


async def test_lists_page_and_filter(engine: Engine) -> None:
    plans = engine.scope(tenant="acme").plans
    for n in range(5):
        status = "running" if n % 2 == 0 else "completed"
        await plans.create(Plan(plan_id=f"p{n}", user_id="alice", goal_event="g", status=status))
    first = await plans.list(filters={"status": "running"}, limit=2)
    assert [p.plan_id for p in first.items] == ["p0", "p2"]
    assert first.next_offset == 2
    last = await plans.list(filters={"status": "running"}, limit=2, offset=2)
    assert ([p.plan_id for p in last.items], last.next_offset) == (["p4"], None)
    assert len((await plans.list(filters={"user_id": "bob"})).items) == 0
    with pytest.raises(ValidationError):
        await plans.list(filters={"goal_event": "g"})
    with pytest.raises(ValidationError):
        await plans.list(limit=0)
    with pytest.raises(ValidationError):
        await plans.list(offset=-1)
    with pytest.raises(ValidationError):
        await plans.list(offset=2**70)


async def test_subtask_lookup_is_exact(engine: Engine) -> None:
    tasks = engine.scope(tenant="acme").tasks
    await tasks.create(TaskContext(task_id="t1", event_type="e", sub_tasks=["Sub-1", "a%b"]))
    await tasks.create(TaskContext(task_id="t2", event_type="e", sub_tasks=["sub-1"]))
    found = await tasks.by_subtask("sub-1")
    assert found is not None
    assert found.task_id == "t2"
    assert (
        await tasks.by_subtask("Sub-1") or TaskContext(task_id="x", event_type="e")
    ).task_id == "t1"
    assert (
        await tasks.by_subtask("a%b") or TaskContext(task_id="x", event_type="e")
    ).task_id == "t1"
    assert await tasks.by_subtask("sub") is None
    assert await tasks.by_subtask("a") is None


async def test_sessions_track_last_interaction(engine: Engine) -> None:
    sessions = engine.scope(tenant="acme").sessions
    made = await sessions.create(Session(session_id="s1"))
    touched = await sessions.update("s1", {"metadata": {"k": 1}})
    assert made.last_interaction is not None
    assert touched.last_interaction is not None
    assert touched.last_interaction > made.last_interaction


async def test_recent_items_falls_back_when_the_newest_were_deleted(engine: Engine) -> None:
    episodic = engine.scope(tenant="acme", user="alice").episodic
    kept = await episodic.memorize(MemoryItem(text="the one that stays", role="user"))
    doomed = [
        await episodic.memorize(MemoryItem(text=f"noise {n}", role="user")) for n in range(70)
    ]
    for result in doomed:
        await episodic.provider.delete(result.id)
    recent = await recent_items(episodic, 1)
    assert [i.id for i in recent] == [kept.id]
