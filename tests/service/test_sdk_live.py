"""Every endpoint through the client SDK, against a real ``engram serve`` process (production
mode, API keys issued before it started, a temporary SQLite file)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from engramdb.client import WorkflowState
from engramdb.core.errors import (
    AuthenticationError,
    ConflictError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from engramdb.core.types import RecallQuery
from tests.service.conftest import LIVE_TENANT, Connect, LiveServer


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


async def test_health(connect: Connect) -> None:
    health = await connect().health()
    assert (health.status, health.auth) == ("ok", "production")


async def test_semantic_add_search_upsert(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice)
    added = await alice.store_knowledge(
        "Error 402 means the card has insufficient funds.", metadata={"doc": "billing"}
    )
    assert added.status == "created"
    hits = await alice.search_knowledge("what does error 402 mean?")
    assert hits[0].id == added.id
    assert hits[0].metadata == {"doc": "billing"}
    assert hits[0].score is not None
    again = await alice.upsert_knowledge("Error 402 means the card has insufficient funds!")
    assert (again.status, again.id) == ("updated", added.id)
    fresh = await alice.upsert_knowledge("Refunds take five business days.")
    assert fresh.status == "created"
    assert fresh.id != added.id


async def test_semantic_privacy(connect: Connect, live_server: LiveServer) -> None:
    alice, bob = connect(live_server.alice), connect(live_server.bob)
    secret = unique("falcon")
    shared = unique("heron")
    await alice.store_knowledge(f"The vault code word is {secret}.")
    await alice.store_knowledge(f"The office mascot is a {shared}.", public=True)
    assert any(secret in h.text for h in await alice.search_knowledge(secret))
    assert not any(secret in h.text for h in await bob.search_knowledge(secret))
    assert any(shared in h.text for h in await bob.search_knowledge(shared))
    with pytest.raises(PermissionDeniedError):
        await alice.store_knowledge("not mine to write", user_id="bob")
    # A tenant-wide key may write for a user, and only that user sees it.
    service = connect(live_server.service)
    agent_fact = unique("osprey")
    await service.store_knowledge(f"The research agent prefers {agent_fact}.", user_id="bob")
    assert any(agent_fact in h.text for h in await bob.search_knowledge(agent_fact))
    assert not any(agent_fact in h.text for h in await alice.search_knowledge(agent_fact))


async def test_episodic_log_recent_search(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice, agent_id=unique("agent"))
    start = datetime(2026, 5, 1, tzinfo=UTC)
    for n, text in enumerate(["I moved to Lisbon", "I adopted a cat named Miso", "Hello"]):
        await alice.log_interaction(
            "user", text, occurred_at=start + timedelta(days=n), metadata={"turn": n}
        )
    recent = await alice.get_recent_history(limit=2)
    assert [i.text for i in recent] == ["Hello", "I adopted a cat named Miso"]
    found = await alice.search_interactions("where does the user live?")
    assert found[0].text == "I moved to Lisbon"
    assert found[0].metadata == {"turn": 0}
    later = await alice.search_interactions("cat", since=start + timedelta(days=1))
    assert all(i.text != "I moved to Lisbon" for i in later)
    with pytest.raises(ValidationError):
        await alice.log_interaction("narrator", "x")  # type: ignore[arg-type]


async def test_procedural_context(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice, agent_id=unique("support"))
    await alice.add_procedure("Check Stripe status first.", trigger="keywords:billing,invoice")
    await alice.add_procedure("Q: hi A: hello!", procedure_type="few_shot_example")
    skills = await alice.get_relevant_skills("why did my billing fail?")
    assert skills[0].text == "Check Stripe status first."
    assert skills[0].score == 1.0
    with pytest.raises(ValidationError):
        await alice.add_procedure("broken", trigger="regex:(")


async def test_working_memory_and_workflow_state(connect: Connect, live_server: LiveServer) -> None:
    alice, bob = connect(live_server.alice), connect(live_server.bob)
    plan = unique("plan")
    await alice.set_plan_state(plan, "account_id", "acc_123")
    assert (await bob.get_plan_state(plan, "account_id")).value == "acc_123"  # shared
    assert await bob.get_all_plan_state(plan) == {"account_id": "acc_123"}
    with pytest.raises(NotFoundError):
        await alice.get_plan_state(plan, "missing")
    assert await alice.delete_plan_state(plan, "account_id") == 1
    assert await alice.delete_plan_state(plan, "account_id") == 0

    state = WorkflowState(alice, plan)
    await state.set("research_data", {"findings": ["a", "b"]})
    assert await state.get("research_data") == {"findings": ["a", "b"]}
    assert await state.get("nothing", "default") == "default"
    await state.record_action("research.started")
    await state.record_action("research.completed")
    assert await state.get_action_history() == ["research.started", "research.completed"]
    assert await state.delete("research_data") is True
    assert await state.delete("research_data") is False
    await state.set("api_key", "sk-1")
    assert await state.cleanup() == 2
    assert await alice.get_all_plan_state(plan) == {}


async def test_task_context(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice)
    task, plan = unique("task"), unique("plan")
    stored = await alice.store_task_context(
        task,
        "research.requested",
        plan_id=plan,
        response_event="research.completed",
        data={"topic": "memory"},
    )
    assert stored.response_topic == "action-results"
    assert stored.created_at is not None
    with pytest.raises(ConflictError):
        await alice.store_task_context(task, "research.requested")
    await alice.add_sub_task(task, "sub-1")
    updated = await alice.update_task_context(task, state={"progress": 0.75})
    assert (updated.sub_tasks, updated.state) == (["sub-1"], {"progress": 0.75})
    assert (await alice.get_task_by_subtask("sub-1")).task_id == task
    assert await alice.find_parent_task(unique("nobody")) is None
    listed = await alice.list_task_contexts(plan_id=plan)
    assert [t.task_id for t in listed.items] == [task]
    assert (await alice.get_task_context(task)).data == {"topic": "memory"}
    await alice.delete_task_context(task)
    with pytest.raises(NotFoundError):
        await alice.get_task_context(task)
    with pytest.raises(NotFoundError):
        await alice.delete_task_context(task)


async def test_plans(connect: Connect, live_server: LiveServer) -> None:
    alice, bob = connect(live_server.alice), connect(live_server.bob)
    ids = [unique("plan") for _ in range(3)]
    for plan_id in ids:
        made = await alice.create_plan(plan_id, "goal.set", goal_data={"goal": plan_id})
        assert (made.user_id, made.status) == ("alice", "running")
    await alice.update_plan(ids[0], status="completed", state={"done": True})
    running = await alice.list_plans(status="running", limit=1)
    assert len(running.items) == 1
    assert running.next_offset == 1
    rest = await alice.list_plans(status="running", limit=10, offset=1)
    assert {p.plan_id for p in running.items + rest.items} >= set(ids[1:])
    assert ids[0] not in {p.plan_id for p in running.items + rest.items}
    assert (await alice.get_plan(ids[0])).state == {"done": True}
    assert (await bob.list_plans()).items == []
    with pytest.raises(PermissionDeniedError):
        await bob.get_plan(ids[0])
    await alice.delete_plan(ids[0])
    with pytest.raises(NotFoundError):
        await alice.get_plan(ids[0])


async def test_sessions(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice, agent_id="helper")
    session = unique("session")
    made = await alice.create_session(session, metadata={"channel": "web"})
    assert (made.user_id, made.agent_id) == ("alice", "helper")
    assert made.last_interaction is not None
    touched = await alice.update_session(session, metadata={"channel": "mobile"})
    assert touched.last_interaction is not None
    assert touched.last_interaction > made.last_interaction
    assert session in {s.session_id for s in (await alice.list_sessions(agent_id="helper")).items}
    assert (await alice.get_session(session)).metadata == {"channel": "mobile"}
    await alice.delete_session(session)
    with pytest.raises(NotFoundError):
        await alice.get_session(session)


async def test_entries_recall_events(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice, agent_id=unique("agent"))
    entry = await alice.store("user.city", "Lisbon", content_type="profile", metadata={"v": 1})
    assert (entry.key, entry.value) == ("user.city", "Lisbon")
    await alice.store("user.pet", {"kind": "cat", "name": "Miso"})
    assert (await alice.read("user.city")) == entry
    assert await alice.read("user.none") is None
    page = await alice.list_entries(prefix="user.", limit=1)
    assert [e.key for e in page.items] == ["user.city"]
    assert page.next_offset == 1
    assert [e.key for e in (await alice.list_entries(prefix="user.", offset=1)).items] == [
        "user.pet"
    ]
    results = await alice.recall("which city does the user live in")
    assert "user.city" in [r.entry.key for r in results[:3]]
    assert await alice.recall(RecallQuery(query="Miso", limit=1))
    assert await alice.delete("user.pet") is True
    assert await alice.delete("user.pet") is False

    first = await alice.events(limit=2)
    assert len(first.events) == 2
    assert first.next_cursor is not None
    second = await alice.events(after=first.next_cursor, limit=2)
    assert second.events[0].position is not None
    assert second.events[0].position > first.next_cursor
    assert all(e.scope.tenant == LIVE_TENANT for e in first.events + second.events)
    assert all(e.scope.user == "alice" for e in first.events + second.events)
    deleted = await alice.events(event_types=["memory.deleted"], limit=1000)
    assert any(e.payload.get("key") == "user.pet" for e in deleted.events)


async def test_idempotent_write_replays(connect: Connect, live_server: LiveServer) -> None:
    alice = connect(live_server.alice)
    key = unique("idem")
    body = {"key": unique("k"), "value": 1}
    first = await alice.request("POST", "/v1/memory/entries", json=body, idempotency_key=key)
    again = await alice.request("POST", "/v1/memory/entries", json=body, idempotency_key=key)
    assert again.headers["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    with pytest.raises(ValidationError, match="different request"):
        await alice.request(
            "POST", "/v1/memory/entries", json={**body, "value": 2}, idempotency_key=key
        )
    written = await alice.events(event_types=["memory.written"], limit=1000)
    assert sum(e.payload.get("key") == body["key"] for e in written.events) == 1


async def test_auth_over_the_wire(connect: Connect, live_server: LiveServer) -> None:
    with pytest.raises(AuthenticationError):
        await connect().list_plans()
    with pytest.raises(AuthenticationError):
        await connect("ek_000000000000_" + "x" * 43).list_plans()
    with pytest.raises(PermissionDeniedError):
        await connect(live_server.alice, tenant_id="other").list_plans()
    with pytest.raises(PermissionDeniedError):
        await connect(live_server.alice, user_id="bob").list_plans()
    reader = connect(live_server.reader)
    assert (await reader.list_plans()).items is not None
    with pytest.raises(PermissionDeniedError):
        await reader.store("k", "v")
    async with httpx.AsyncClient() as http:
        raw = await http.get(f"{live_server.url}/v1/memory/plans")
    assert raw.status_code == 401
    assert raw.headers["www-authenticate"] == "Bearer"
    assert raw.json()["error"] == "unauthenticated"
