"""The service's stored resources, tenancy and idempotency over every storage backend: the
same API calls on SQLite and on PostgreSQL (whose server the test suite requires)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

import engramdb
from engramdb.client import MemoryClient, WorkflowState
from engramdb.core.errors import (
    AuthenticationError,
    ConflictError,
    EntityNotFoundError,
    InvalidScopeError,
    NotFoundError,
)
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.engine import Engine, EngineConfig
from engramdb.orchestrator.idempotency import IDEMPOTENCY_SPEC
from engramdb.orchestrator.plans import Plan
from engramdb.orchestrator.sessions import Session
from engramdb.orchestrator.tasks import TaskContext
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.service.app import create_app
from engramdb.service.settings import LOCAL_TENANT, ServiceSettings
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import RecordQuery
from tests.postgres.database import empty_database


async def test_the_api_on_every_backend(any_engine: Engine) -> None:
    tenancy = any_engine.tenancy
    await tenancy.create_tenant("acme")
    record, key = await tenancy.create_key("acme", user_id="alice")
    app = create_app(ServiceSettings(auth="production"), engine=any_engine)
    async with MemoryClient(
        "http://service", api_key=key, transport=httpx.ASGITransport(app=app)
    ) as client:
        await client.store_task_context("t1", "research.requested", plan_id="p1")
        await client.add_sub_task("t1", "s1")
        assert (await client.get_task_by_subtask("s1")).task_id == "t1"
        with pytest.raises(ConflictError):
            await client.store_task_context("t1", "research.requested")
        await client.create_plan("p1", "goal.set")
        await client.update_plan("p1", status="done")
        assert [p.plan_id for p in (await client.list_plans(status="done")).items] == ["p1"]
        await client.create_session("s-1")
        assert len((await client.list_sessions()).items) == 1
        state = WorkflowState(client, "p1")
        await state.record_action("started")
        assert await state.get_action_history() == ["started"]
        assert await state.cleanup() == 1
        first = await client.upsert_knowledge("Python was created by Guido van Rossum.")
        again = await client.upsert_knowledge("Python was created by Guido van Rossum!")
        assert (first.status, again.status, again.id) == ("created", "updated", first.id)
        await client.log_interaction("user", "I moved to Lisbon")
        assert (await client.get_recent_history())[0].text == "I moved to Lisbon"
        body = {"key": "k", "value": 1}
        await client.request("POST", "/v1/memory/entries", json=body, idempotency_key="i")
        replay = await client.request("POST", "/v1/memory/entries", json=body, idempotency_key="i")
        assert replay.headers["Idempotent-Replayed"] == "true"
        await tenancy.revoke_key(record.key_id)
        with pytest.raises(AuthenticationError):
            await client.list_plans()
    assert await tenancy.delete_tenant("acme") > 0
    with pytest.raises(NotFoundError):
        await any_engine.scope(tenant="acme").tasks.get("t1")


async def test_stored_answers_have_no_words_to_index(any_engine: Engine) -> None:
    """A stored answer is found by its slot alone: neither its claim nor its answer puts
    words into the tenant-wide partition every writer of the tenant would count them in."""
    app = create_app(ServiceSettings(), engine=any_engine)
    transport = httpx.ASGITransport(app=app)
    async with MemoryClient("http://service", transport=transport, user_id="alice") as client:
        body = {"key": "k", "value": "lisbon invoice"}
        await client.request("POST", "/v1/memory/entries", json=body, idempotency_key="i")
        replay = await client.request("POST", "/v1/memory/entries", json=body, idempotency_key="i")
    assert replay.headers["Idempotent-Replayed"] == "true"
    tenant = Scope(tenant=LOCAL_TENANT)
    stored = await any_engine.backend.scan(RecordQuery(IDEMPOTENCY_SPEC.namespace, tenant))
    assert len(stored) == 1
    assert stored[0].text == ""
    assert "lisbon" in stored[0].value["body"]


async def test_the_graph_api_on_every_backend(any_engine: Engine) -> None:
    app = create_app(ServiceSettings(), engine=any_engine)
    transport = httpx.ASGITransport(app=app)
    async with MemoryClient("http://service", transport=transport, user_id="alice") as client:
        graph = client.graph
        added = await graph.ingest(
            "Alice works for Acme. Alice lives in Lisbon.",
            occurred_at=datetime(2020, 1, 1, tzinfo=UTC),
        )
        lisbon = next(e for e in added.entities if e.name == "Lisbon")
        alice = next(e for e in added.entities if e.name == "Alice")
        porto = await graph.add_entity("Porto", "location")
        moved = datetime(2026, 1, 1, tzinfo=UTC)
        await graph.add_relation(alice.entity_id, porto.entity_id, "lives_in", valid_at=moved)
        now = await graph.get_relations(alice.entity_id, relation_type="lives_in")
        assert [r.target_id for r in now] == [porto.entity_id]
        before = await graph.get_relations(
            alice.entity_id, "outgoing", "lives_in", as_of=moved - timedelta(days=1)
        )
        assert [r.target_id for r in before] == [lisbon.entity_id]
        reached = await graph.traverse(alice.entity_id, "neighbors")
        assert {e.name for e in reached.entities} == {"Acme", "Porto"}
        path = await graph.traverse(
            alice.entity_id, "shortest_path", target_entity_id=porto.entity_id
        )
        assert path.paths is not None
        assert [e.name for e in path.paths[0].entities] == ["Alice", "Porto"]
        assert (await graph.search("Acme"))[0][0].name == "Acme"
        assert await graph.delete_entity(porto.entity_id)
        with pytest.raises(EntityNotFoundError):
            await graph.get_relations(porto.entity_id)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_two_instances_share_one_database(kind: str, tmp_path: Path) -> None:
    target = str(tmp_path / "shared.db") if kind == "sqlite" else empty_database()
    config = EngineConfig(embedder=None)
    async with (
        engramdb.open(target, config=config) as one,
        engramdb.open(target, config=config) as two,
    ):
        await one.tenancy.create_tenant("acme")
        _, key = await one.tenancy.create_key("acme")
        clients = [
            MemoryClient(
                "http://service",
                api_key=key,
                transport=httpx.ASGITransport(
                    app=create_app(ServiceSettings(auth="production"), engine=engine)
                ),
            )
            for engine in (one, two)
        ]
        first, second = clients
        await first.set_plan_state("p1", "step", 3)
        assert (await second.get_plan_state("p1", "step")).value == 3
        body = {"task_id": "t1", "event_type": "e"}
        answer = await first.request(
            "POST", "/v1/memory/task-context", json=body, idempotency_key="retry-1"
        )
        # The retry reaches the other instance: it replays instead of failing with 409.
        replay = await second.request(
            "POST", "/v1/memory/task-context", json=body, idempotency_key="retry-1"
        )
        assert replay.headers["Idempotent-Replayed"] == "true"
        assert replay.json() == answer.json()
        for client in clients:
            await client.aclose()


PAY = {"key": "k", "value": 1}
PAY_KEY = {"Idempotency-Key": "pay-1"}


class HeldFirstWrite:
    """``EventSourcedProvider.write`` patched so that the first write stays inside its handler
    until its request is cancelled; any other runs through. ``calls`` counts them."""

    def __init__(self) -> None:
        self.entered, self._never = asyncio.Event(), asyncio.Event()
        self.calls = 0
        self._write = EventSourcedProvider.write

    def patched(self) -> Callable[..., Awaitable[Any]]:
        """The method to patch in (a function, so that it binds to each provider)."""

        async def write(provider: Any, *args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            if self.calls == 1:
                self.entered.set()
                await self._never.wait()
            return await self._write(provider, *args, **kwargs)

        return write


@asynccontextmanager
async def two_instances_one_held(
    target: str, first_lease_s: int
) -> AsyncIterator[tuple[httpx.AsyncClient, HeldFirstWrite]]:
    """Two service instances on ``target``; the first has claimed key ``pay-1`` (its lease
    ``first_lease_s``) and is held inside its write, as if it hung or died. Yields the second
    instance's client."""
    config = EngineConfig(embedder=None)
    held = HeldFirstWrite()
    async with (
        engramdb.open(target, config=config) as one,
        engramdb.open(target, config=config) as two,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(
                app=create_app(ServiceSettings(idempotency_lease_s=first_lease_s), engine=one)
            ),
            base_url="http://service",
        ) as one_http,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(ServiceSettings(), engine=two)),
            base_url="http://service",
        ) as two_http,
    ):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(EventSourcedProvider, "write", held.patched())
            first = asyncio.create_task(
                one_http.post("/v1/memory/entries", json=PAY, headers=PAY_KEY)
            )
            await held.entered.wait()
            try:
                yield two_http, held
            finally:
                first.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await first


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_retry_while_the_first_runs_gets_409_on_another_instance(
    kind: str, tmp_path: Path
) -> None:
    target = str(tmp_path / "shared.db") if kind == "sqlite" else empty_database()
    # The default lease (minutes): the retry lands inside it however loaded the machine.
    async with two_instances_one_held(target, ServiceSettings().idempotency_lease_s) as (
        two_http,
        held,
    ):
        retry = await two_http.post("/v1/memory/entries", json=PAY, headers=PAY_KEY)
        assert (retry.status_code, retry.json()["error"]) == (409, "conflict")
        assert held.calls == 1


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_claim_lapses_when_its_instance_dies(kind: str, tmp_path: Path) -> None:
    target = str(tmp_path / "shared.db") if kind == "sqlite" else empty_database()
    async with two_instances_one_held(target, 1) as (two_http, held):
        # Once the first instance's lease lapses the key runs again: polled, with a generous
        # bound, so that a loaded machine only makes the test take longer.
        deadline = time.monotonic() + 120
        while True:
            late = await two_http.post("/v1/memory/entries", json=PAY, headers=PAY_KEY)
            if late.status_code != 409 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.2)
        assert late.status_code == 201, late.text
        assert "Idempotent-Replayed" not in late.headers
        assert held.calls == 2
        replay = await two_http.post("/v1/memory/entries", json=PAY, headers=PAY_KEY)
        assert replay.headers["Idempotent-Replayed"] == "true"


async def test_a_failed_request_lets_go_of_its_idempotency_key(any_engine: Engine) -> None:
    app = create_app(ServiceSettings(), engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as http:
        headers = {"Idempotency-Key": "update-1"}
        change = {"status": "done"}
        missing = await http.put("/v1/memory/plans/p1", json=change, headers=headers)
        assert missing.status_code == 404
        created = await http.post("/v1/memory/plans", json={"plan_id": "p1", "goal_event": "g"})
        assert created.status_code == 201
        retried = await http.put("/v1/memory/plans/p1", json=change, headers=headers)
        assert (retried.status_code, retried.json()["status"]) == (200, "done")
        assert "Idempotent-Replayed" not in retried.headers


async def _store_a_life(engine: Engine, user: str, fact: str) -> None:
    """Memories of every kind under ``user``: episodes, a fact, a graph, working memory, a
    session's turn, a traced context assembly (whose prompt only the log holds), and a plan
    and a session, which are the tenant's records that name their user."""
    memory = engine.scope(tenant="acme", user=user)
    await memory.plans.create(Plan(plan_id=f"{user}-trip", user_id=user, goal_event=fact))
    await memory.sessions.create(Session(session_id=f"{user}-s1", user_id=user))
    await memory.episodic.memorize(MemoryItem(text=f"I moved to {fact} last spring"))
    await memory.semantic.memorize(MemoryItem(text=f"{user.title()} lives in {fact}"))
    await memory.graph.ingest(f"{user.title()} lives in {fact}.")
    await memory.working.memorize(MemoryItem(text=f"planning a trip from {fact}"))
    chat = engine.scope(tenant="acme", user=user, session="s1")
    await chat.conversation.memorize(MemoryItem(text=f"What is on in {fact}?", role="user"))
    await memory.assemble(f"Where in {fact} should I eat?")


async def _mentions(engine: Engine, word: str) -> list[str]:
    """Every exported record and event (the log included) that holds ``word``."""
    return [str(item) async for item in engine.export() if word in str(item)]


async def test_an_erased_user_leaves_nothing_but_tombstones(any_engine: Engine) -> None:
    tenancy = any_engine.tenancy
    await tenancy.create_tenant("acme")
    await tenancy.create_user("acme", "alice")
    await tenancy.create_user("acme", "bob")
    _, alice_key = await tenancy.create_key("acme", user_id="alice")
    _, bob_key = await tenancy.create_key("acme", user_id="bob")
    _, tenant_key = await tenancy.create_key("acme")
    await _store_a_life(any_engine, "alice", "Lisbon")
    await _store_a_life(any_engine, "bob", "Oslo")
    # What alice gave the tenant outlives her; what she wrote and deleted there does not.
    alice_memory = any_engine.scope(tenant="acme", user="alice")
    await alice_memory.semantic.memorize(MemoryItem(text="The office wifi is fast"), public=True)
    await alice_memory.tasks.create(TaskContext(task_id="kept", event_type="office.move"))
    await alice_memory.tasks.create(TaskContext(task_id="gone", event_type="Lisbon.trip"))
    await alice_memory.tasks.delete("gone")
    assert any("turn.traced" in found for found in await _mentions(any_engine, "Lisbon"))

    removed = await tenancy.delete_user("acme", "alice")

    # 7 memories (the graph: 2 entities, 1 relation), plan, session, registration, key
    assert removed == 11
    assert await _mentions(any_engine, "Lisbon") == []
    alice = any_engine.scope(tenant="acme", user="alice")
    assert await alice.episodic.remember("Where did I move?") == []
    assert await alice.graph.search_entities("Lisbon") == []
    assert await alice.working.remember("trip") == []
    assert [p.plan_id for p in (await alice.plans.list()).items] == ["bob-trip"]
    assert [s.session_id for s in (await alice.sessions.list()).items] == ["bob-s1"]
    with pytest.raises(AuthenticationError):
        await tenancy.verify_key(alice_key)
    assert [u.user_id for u in (await tenancy.list_users("acme")).items] == ["bob"]
    for kept in (bob_key, tenant_key):
        assert (await tenancy.verify_key(kept)).tenant_id == "acme"
    bob = any_engine.scope(tenant="acme", user="bob")
    assert [m.text for m in await bob.episodic.remember("Where did I move?")] == [
        "I moved to Oslo last spring"
    ]
    assert "Oslo" in {e.name for e, _ in await bob.graph.search_entities("Oslo")}
    # The log still tells that records went, and a rebuild from it brings none back.
    deleted = await any_engine.events.read(EventQuery(event_types=("memory.deleted",)))
    assert len([e for e in deleted if e.payload.get("purged")]) == removed
    await any_engine.rebuild()
    assert await _mentions(any_engine, "Lisbon") == []
    assert len(await _mentions(any_engine, "Oslo")) > 0
    public = await bob.semantic.remember("office wifi")
    assert [m.text for m in public][:1] == ["The office wifi is fast"]
    assert (await bob.tasks.get("kept")).event_type == "office.move"
    with pytest.raises(NotFoundError):
        await tenancy.delete_user("acme", "alice")
    with pytest.raises(InvalidScopeError):
        await tenancy.delete_user("acme", " alice ")


async def test_a_deleted_tenant_takes_its_graphs_and_traces(any_engine: Engine) -> None:
    await any_engine.tenancy.create_tenant("acme")
    await _store_a_life(any_engine, "alice", "Lisbon")
    await any_engine.tenancy.delete_tenant("acme")
    assert await _mentions(any_engine, "Lisbon") == []
    alice = any_engine.scope(tenant="acme", user="alice")
    assert await alice.graph.search_entities("Lisbon") == []


async def test_an_erased_user_takes_their_stored_answers(any_engine: Engine) -> None:
    app = create_app(ServiceSettings(), engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as http:
        for user in ("alice", "bob"):
            answer = await http.post(
                "/v1/memory/entries",
                json={"key": "home", "value": f"{user} lives in Lisbon"},
                headers={"Idempotency-Key": "k1", "X-User-ID": user},
            )
            assert answer.status_code == 201
    stored = RecordQuery("idempotency", None)
    assert len(await any_engine.backend.scan(stored)) == 2
    await any_engine.tenancy.delete_user(LOCAL_TENANT, "alice")
    (left,) = await any_engine.backend.scan(stored)
    assert left.metadata == {"user_id": "bob"}
    assert "alice lives" not in "".join([str(item) async for item in any_engine.export()])
