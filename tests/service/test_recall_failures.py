"""Recall over REST never passes a failure off as an empty result, on every backend: input no
provider can evaluate is a 422 before any provider runs, a provider that fails is named in
``failed_providers``, and a recall every provider failed is an error answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import engramdb
from engramdb.client import MemoryClient
from engramdb.core.errors import RecallError
from engramdb.engine import Engine, EngineConfig
from engramdb.index.openai_embedder import OpenAIEmbedder
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.service.app import create_app
from engramdb.service.settings import LOCAL_TENANT, ServiceSettings
from tests.helpers.ports import free_port
from tests.postgres.database import empty_database

JSON = {"Content-Type": "application/json"}


def target(kind: str, tmp_path: Path) -> str:
    return str(tmp_path / "engram.db") if kind == "sqlite" else empty_database()


@pytest.fixture(params=["sqlite", "postgresql"])
async def http(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A local-mode app on each backend, without an embedding model."""
    config = EngineConfig(embedder=None)
    async with engramdb.open(target(request.param, tmp_path), config=config) as engine:
        transport = httpx.ASGITransport(app=create_app(ServiceSettings(), engine=engine))
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            yield client


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity"])
async def test_a_filter_no_provider_can_evaluate_is_422(
    http: httpx.AsyncClient, number: str
) -> None:
    await http.post("/v1/memory/entries", json={"key": "k", "value": "hello", "metadata": {"t": 1}})
    for filters in (f'{{"tag": {number}}}', f'{{"tag": [1, {{"x": {number}}}]}}'):
        body = f'{{"query": "hello", "metadata_filters": {filters}}}'
        answer = await http.post("/v1/memory/recall", content=body, headers=JSON)
        assert (answer.status_code, answer.json()["error"]) == (422, "validation_error"), body
    # A filter names a member: its name is refused where a backend could not look it up.
    answer = await http.post(
        "/v1/memory/recall", json={"query": "hello", "metadata_filters": {'t"': 1}}
    )
    assert (answer.status_code, answer.json()["error"]) == (422, "validation_error")
    fine = await http.post(
        "/v1/memory/recall", json={"query": "hello", "metadata_filters": {"t": 1}}
    )
    assert (fine.status_code, fine.json()["failed_providers"]) == (200, [])
    assert [r["entry"]["key"] for r in fine.json()["results"]] == ["k"]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/v1/memory/entries", '{"key": "k", "value": NaN}'),
        ("POST", "/v1/memory/entries", '{"key": "k", "value": 1, "metadata": {"m": Infinity}}'),
        ("PUT", "/v1/memory/working/p/k", '{"value": [-Infinity]}'),
        ("POST", "/v1/memory/plans", '{"plan_id": "p", "goal_event": "g", "state": {"x": NaN}}'),
        ("POST", "/v1/memory/episodic", '{"role": "user", "content": "c", "importance": NaN}'),
    ],
)
async def test_numbers_json_does_not_have_are_refused_in_bodies(
    http: httpx.AsyncClient, method: str, path: str, body: str
) -> None:
    answer = await http.request(method, path, content=body, headers=JSON)
    assert answer.status_code == 422, answer.text
    events = await http.get("/v1/events")
    assert [e["event_type"] for e in events.json()["events"]] == []


@pytest.fixture(params=["sqlite", "postgresql"])
async def no_model(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine on each backend whose embeddings endpoint does not answer (nothing listens on
    its port), holding one memory stored before."""
    where = target(request.param, tmp_path)
    async with engramdb.open(where, config=EngineConfig(embedder=None)) as engine:
        await engine.scope(tenant=LOCAL_TENANT).persistent.write("k", "hello world")
    down = OpenAIEmbedder("m", dimensions=8, base_url=f"http://127.0.0.1:{free_port()}/v1")
    async with engramdb.open(where, config=EngineConfig(embedder=down)) as engine:
        yield engine
    await down.aclose()


async def test_a_model_server_that_is_down_leaves_recall_to_full_text(no_model: Engine) -> None:
    app = create_app(ServiceSettings(), engine=no_model)
    async with MemoryClient("http://service", transport=httpx.ASGITransport(app=app)) as client:
        body = (await client.request("POST", "/v1/memory/recall", json={"query": "hello"})).json()
    assert [r["entry"]["key"] for r in body["results"]] == ["k"]
    assert body["failed_providers"] == []


@pytest.fixture
def failing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The episodic and conversation providers fail at run time (a fault inside the engine,
    not the caller's query): their searches raise."""
    search = EventSourcedProvider.search

    async def broken(self: EventSourcedProvider, *args: Any, **kwargs: Any) -> Any:
        if self.provider_id in ("episodic", "conversation"):
            raise RuntimeError("the index of this provider is broken")
        return await search(self, *args, **kwargs)

    monkeypatch.setattr(EventSourcedProvider, "search", broken)


async def test_providers_that_fail_are_named_and_a_total_failure_is_503(
    any_engine: Engine, failing: None
) -> None:
    await any_engine.scope(tenant=LOCAL_TENANT).persistent.write("k", "hello world")
    app = create_app(ServiceSettings(), engine=any_engine)
    async with MemoryClient("http://service", transport=httpx.ASGITransport(app=app)) as client:
        answer = await client.request("POST", "/v1/memory/recall", json={"query": "hello"})
        body = answer.json()
        assert [r["entry"]["key"] for r in body["results"]] == ["k"]
        failed = {f["provider_id"]: f for f in body["failed_providers"]}
        assert {"episodic", "conversation"} <= set(failed)
        assert {(f["error"], f["cause"]) for f in failed.values()} == {("RuntimeError", "runtime")}
        with pytest.warns(engramdb.PartialRecallWarning, match="episodic"):
            assert [r.entry.key for r in await client.recall("hello")] == ["k"]
        only_failing = {"query": "hello", "provider_ids": ["episodic", "conversation"]}
        with pytest.raises(RecallError) as raised:
            await client.request("POST", "/v1/memory/recall", json=only_failing)
        assert raised.value.details["status_code"] == 503
        assert [f["cause"] for f in raised.value.details["failures"]] == ["runtime", "runtime"]
    # In process the same: the results of the others, and a warning naming who failed.
    manager = any_engine.scope(tenant=LOCAL_TENANT).manager
    with pytest.warns(engramdb.PartialRecallWarning, match="conversation"):
        hits = await manager.recall(engramdb.RecallQuery(query="hello"))
    assert [r.entry.key for r in hits] == ["k"]


async def test_a_recall_every_provider_ran_out_of_time_for_is_503_with_retry_after(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine too busy to answer in the caller's ``timeout_s``: the documented 503, with
    how long to wait; a provider that breaks instead says no such thing."""
    search = EventSourcedProvider.search

    async def stuck(self: EventSourcedProvider, *args: Any, **kwargs: Any) -> Any:
        if self.provider_id == "episodic":
            await asyncio.sleep(60)  # far past the 1 s the recall allows
        if self.provider_id == "conversation":
            raise RuntimeError("the index of this provider is broken")
        return await search(self, *args, **kwargs)

    monkeypatch.setattr(EventSourcedProvider, "search", stuck)
    app = create_app(ServiceSettings(), engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as http:
        late = {"query": "hello", "provider_ids": ["episodic"], "timeout_s": 1}
        answer = await http.post("/v1/memory/recall", json=late)
        assert (answer.status_code, answer.json()["error"]) == (503, "recall_error")
        assert answer.headers["Retry-After"] == "1"
        broken = {**late, "provider_ids": ["episodic", "conversation"]}
        answer = await http.post("/v1/memory/recall", json=broken)
        assert (answer.status_code, answer.json()["error"]) == (503, "recall_error")
        assert "Retry-After" not in answer.headers
        schema = (await http.get("/openapi.json")).json()
    documented = schema["paths"]["/v1/memory/recall"]["post"]["responses"]["503"]
    assert "Retry-After" in documented["headers"]
