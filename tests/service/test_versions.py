"""Versions of the service's resources on every backend: in Python (``expected_version``),
over REST (``ETag`` / ``If-Match`` / 409) and in the client SDK."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from engramdb.client import MemoryClient, WorkflowState
from engramdb.core.errors import ConflictError, NotFoundError, VersionConflictError
from engramdb.engine import Engine
from engramdb.orchestrator.plans import Plan
from engramdb.orchestrator.sessions import Session
from engramdb.orchestrator.tasks import TaskContext
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from engramdb.storage.backend import EventQuery
from tests.helpers.races import open_engine
from tests.postgres.database import empty_database


@pytest.fixture(params=["sqlite", "postgresql"])
async def engine(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    target = str(tmp_path / "v.db") if request.param == "sqlite" else empty_database()
    async with open_engine(target) as opened:
        yield opened


@pytest.fixture
async def http(engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServiceSettings(auth="local"), engine=engine)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(base_url="http://service", transport=transport) as client:
        yield client


async def test_resources_carry_versions_and_refuse_stale_writes(engine: Engine) -> None:
    memory = engine.scope(tenant="acme", user="alice")
    plan = await memory.plans.create(Plan(plan_id="p1", goal_event="g"))
    assert plan.version == 1
    assert (await memory.plans.update("p1", {"status": "a"})).version == 2
    with pytest.raises(VersionConflictError) as raised:
        await memory.plans.update("p1", {"status": "stale"}, expected_version=1)
    assert raised.value.details == {
        "resource": "plan",
        "id": "p1",
        "expected": 1,
        "current": 2,
    }
    with pytest.raises(VersionConflictError):
        await memory.plans.delete("p1", expected_version=1)
    updated = await memory.plans.update("p1", {"state": {"x": 1}}, expected_version=2)
    assert (updated.version, updated.status, updated.state) == (3, "a", {"x": 1})
    assert await memory.plans.get("p1") == updated
    await engine.rebuild()
    assert await memory.plans.get("p1") == updated
    await memory.plans.delete("p1", expected_version=3)
    with pytest.raises(NotFoundError):
        await memory.plans.update("p1", {"status": "back?"})
    with pytest.raises(NotFoundError):
        await memory.plans.delete("p1")
    kinds = [e.event_type for e in await engine.events.read(EventQuery(provider_id="plans"))]
    assert kinds == ["memory.written"] * 3 + ["memory.deleted"]
    await memory.tasks.create(TaskContext(task_id="t1", event_type="e"))
    with pytest.raises(VersionConflictError):
        await memory.tasks.update("t1", {"sub_tasks": ["s"]}, expected_version=2)
    await memory.sessions.create(Session(session_id="s1"))
    assert (await memory.sessions.update("s1", {}, expected_version=1)).version == 2


async def test_rest_answers_etags_and_honours_if_match(http: httpx.AsyncClient) -> None:
    created = await http.post("/v1/memory/plans", json={"plan_id": "p1", "goal_event": "g"})
    assert created.json()["version"] == 1
    read = await http.get("/v1/memory/plans/p1")
    assert read.headers["ETag"] == '"1"'
    put = await http.put("/v1/memory/plans/p1", json={"status": "a"}, headers={"If-Match": '"1"'})
    assert (put.status_code, put.headers["ETag"], put.json()["status"]) == (200, '"2"', "a")
    stale = await http.put("/v1/memory/plans/p1", json={"status": "b"}, headers={"If-Match": '"1"'})
    assert stale.status_code == 409
    body = stale.json()
    assert body["error"] == "version_conflict"
    assert body["details"] | {"expected": 1, "current": 2} == body["details"]
    assert "read it again" in body["message"]
    bad = await http.put("/v1/memory/plans/p1", json={"status": "b"}, headers={"If-Match": "v2"})
    assert bad.status_code == 422
    anyone = await http.put("/v1/memory/plans/p1", json={"status": "c"}, headers={"If-Match": "*"})
    assert anyone.headers["ETag"] == '"3"'
    gone = await http.delete("/v1/memory/plans/p1", headers={"If-Match": '"2"'})
    assert gone.status_code == 409
    assert (
        await http.delete("/v1/memory/plans/p1", headers={"If-Match": '"3"'})
    ).status_code == 200
    assert (await http.put("/v1/memory/plans/p1", json={"status": "d"})).status_code == 404
    assert (await http.get("/v1/memory/plans/p1")).status_code == 404
    await http.post("/v1/memory/task-context", json={"task_id": "t1", "event_type": "e"})
    task = await http.put(
        "/v1/memory/task-context/t1", json={"state": {}}, headers={"If-Match": '"1"'}
    )
    assert task.headers["ETag"] == '"2"'
    await http.post("/v1/memory/sessions", json={"session_id": "s1"})
    session = await http.get("/v1/memory/sessions/s1")
    assert session.headers["ETag"] == '"1"'


async def test_the_client_sends_expected_versions(engine: Engine) -> None:
    app = create_app(ServiceSettings(auth="local"), engine=engine)
    transport = httpx.ASGITransport(app=app)
    async with MemoryClient("http://service", transport=transport) as client:
        plan = await client.create_plan("p1", "g")
        await client.update_plan("p1", expected_version=plan.version, status="a")
        with pytest.raises(VersionConflictError):
            await client.update_plan("p1", expected_version=plan.version, status="b")
        with pytest.raises(VersionConflictError):
            await client.delete_plan("p1", expected_version=plan.version)
        await client.delete_plan("p1", expected_version=2)
        await client.store_task_context("t1", "e")
        # Sub-tasks added at once are all kept: a conflicting add reads the list again.
        await asyncio.gather(*(client.add_sub_task("t1", f"s{n}") for n in range(6)))
        task = await client.get_task_context("t1")
        assert sorted(task.sub_tasks) == [f"s{n}" for n in range(6)]
        session = await client.create_session("s1")
        assert session.version == 1
        with pytest.raises(VersionConflictError):
            await client.update_session("s1", expected_version=2)
        await client.delete_task_context("t1", expected_version=task.version)
        await client.delete_session("s1", expected_version=session.version)


async def test_plan_state_has_versions_and_concurrent_actions_are_all_recorded(
    engine: Engine, http: httpx.AsyncClient
) -> None:
    working = engine.scope(tenant="acme", plan="p1").working
    assert await working.set("k", 1) == 1
    assert await working.set("k", 2, expected_version=1) == 2
    with pytest.raises(VersionConflictError):
        await working.set("k", 3, expected_version=1)
    with pytest.raises(ConflictError):
        await working.set("k", 3, create=True)
    assert await working.versioned("k") == (2, 2)
    path = "/v1/memory/working/p1/k"
    first = await http.put(path, json={"value": "a"}, headers={"If-None-Match": "*"})
    assert (first.status_code, first.headers["ETag"], first.json()["version"]) == (200, '"1"', 1)
    taken = await http.put(path, json={"value": "b"}, headers={"If-None-Match": "*"})
    assert taken.status_code == 409
    read = await http.get(path)
    assert (read.headers["ETag"], read.json()["version"]) == ('"1"', 1)
    assert (
        await http.put(path, json={"value": "b"}, headers={"If-Match": '"1"'})
    ).status_code == 200
    stale = await http.put(path, json={"value": "c"}, headers={"If-Match": '"1"'})
    assert (stale.status_code, stale.json()["error"]) == (409, "version_conflict")
    assert (await http.delete(path, headers={"If-Match": '"1"'})).status_code == 409
    assert (await http.delete(path, headers={"If-Match": '"2"'})).json() == {"deleted": True}
    app = create_app(ServiceSettings(auth="local"), engine=engine)
    async with MemoryClient("http://service", transport=httpx.ASGITransport(app=app)) as client:
        state = WorkflowState(client, "p2")
        await asyncio.gather(*(state.record_action(f"a{n}") for n in range(8)))
        assert sorted(await state.get_action_history()) == [f"a{n}" for n in range(8)]


async def test_entries_have_etags_and_honour_if_match(engine: Engine) -> None:
    app = create_app(ServiceSettings(auth="local"), engine=engine)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(base_url="http://service", transport=transport) as http:
        stored = await http.post("/v1/memory/entries", json={"key": "city", "value": "Lisbon"})
        assert (stored.headers["ETag"], stored.json()["version"]) == ('"1"', 1)
        assert (await http.get("/v1/memory/entries/city")).headers["ETag"] == '"1"'
        body = {"key": "city", "value": "Porto"}
        stale = await http.post("/v1/memory/entries", json=body, headers={"If-Match": '"2"'})
        assert (stale.status_code, stale.json()["error"]) == (409, "version_conflict")
        kept = await http.post("/v1/memory/entries", json=body, headers={"If-Match": '"1"'})
        assert kept.headers["ETag"] == '"2"'
        refused = await http.delete("/v1/memory/entries/city", headers={"If-Match": '"1"'})
        assert refused.status_code == 409
    async with MemoryClient("http://service", transport=transport) as client:
        with pytest.raises(VersionConflictError):
            await client.store("city", "Faro", expected_version=1)
        assert (await client.store("city", "Faro", expected_version=2)).version == 3
        with pytest.raises(VersionConflictError):
            await client.delete("city", expected_version=2)
        assert await client.delete("city", expected_version=3)
        with pytest.raises(NotFoundError):
            await client.store("city", "back?", expected_version=3)
