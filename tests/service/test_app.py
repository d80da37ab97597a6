"""The app in process: bad input is a typed 4xx with nothing written, never a 500; size
limits; idempotency; the OpenAPI schema documents every operation."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from engramdb.client import MemoryClient
from engramdb.core.errors import (
    ConflictError,
    EngineClosedError,
    EngramError,
    EntityNotFoundError,
    GraphMemoryError,
    InvalidTraversalError,
    LLMUnavailableError,
    RelationNotFoundError,
    StorageError,
    UsageError,
)
from engramdb.engine import Engine, EngineConfig
from engramdb.service.app import create_app
from engramdb.service.errors import error_response, status_of
from engramdb.service.settings import LOCAL_TENANT, ServiceSettings
from engramdb.storage.records import RecordQuery


@pytest.fixture
def app(engine: Engine) -> FastAPI:
    return create_app(ServiceSettings(max_body_bytes=4096), engine=engine)


@pytest.fixture
async def http(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as client:
        yield client


JSON_TYPE = {"content-type": "application/json"}
NUL, SURROGATE = "a\u0000b", "x\ud800y"


def _unstorable(bad: str) -> list[tuple[str, str, Any, int, str]]:
    """Requests carrying ``bad`` in each kind of field: no backend stores a NUL character or
    a lone surrogate (the 5xx it was on PostgreSQL named the database), so every backend
    refuses them alike. A plain string field is refused by the request schema already."""
    text_field = "invalid_value" if bad == NUL else "validation_error"
    return [
        ("POST", "/v1/memory/entries", {"key": "k", "value": bad}, 422, "invalid_value"),
        ("POST", "/v1/memory/entries", {"key": "k", "value": {bad: 1}}, 422, "invalid_value"),
        (
            "POST",
            "/v1/memory/entries",
            {"key": "k", "value": 1, "metadata": {"m": bad}},
            422,
            "invalid_value",
        ),
        ("POST", "/v1/memory/episodic", {"role": "user", "content": bad}, 422, text_field),
        ("POST", "/v1/memory/semantic", {"content": bad}, 422, text_field),
        (
            "POST",
            "/v1/memory/procedural",
            {"content": "r", "trigger": f"regex:{bad}"},
            422,
            text_field if bad == SURROGATE else "invalid_pattern",
        ),
        (
            "POST",
            "/v1/memory/plans",
            {"plan_id": "p", "goal_event": "g", "status": bad},
            422,
            text_field,
        ),
        (
            "POST",
            "/v1/memory/plans",
            {"plan_id": "p", "goal_event": "g", "state": {"s": bad}},
            422,
            "invalid_value",
        ),
        (
            "POST",
            "/v1/memory/sessions",
            {"session_id": "s", "metadata": {"m": bad}},
            422,
            "invalid_value",
        ),
        ("PUT", "/v1/memory/working/p/k", {"value": [bad]}, 422, "invalid_value"),
    ]


UNSTORABLE_REQUESTS = _unstorable(NUL) + _unstorable(SURROGATE)

GRAPH_404 = "entity_not_found"
BAD_REQUESTS: list[tuple[str, str, Any, int, str]] = [
    ("POST", "/v1/memory/semantic", {"content": ""}, 422, "validation_error"),
    ("POST", "/v1/memory/semantic", {"content": "x", "extra": 1}, 422, "validation_error"),
    ("POST", "/v1/memory/semantic", [1, 2], 422, "validation_error"),
    (
        "POST",
        "/v1/memory/semantic/upsert",
        {"content": "x", "dedupe_threshold": 0},
        422,
        "validation_error",
    ),
    ("POST", "/v1/memory/semantic", {"content": "x", "key": " padded "}, 422, "validation_error"),
    ("GET", "/v1/memory/semantic/search", None, 422, "validation_error"),
    ("GET", "/v1/memory/semantic/search?q=x&limit=0", None, 422, "validation_error"),
    ("POST", "/v1/memory/episodic", {"role": "narrator", "content": "x"}, 422, "validation_error"),
    ("GET", "/v1/memory/episodic/search?q=x&since=yesterday", None, 422, "validation_error"),
    (
        "POST",
        "/v1/memory/procedural",
        {"content": "x", "trigger": "regex:("},
        422,
        "invalid_pattern",
    ),
    *(
        (
            "POST",
            "/v1/memory/procedural",
            {"content": "x", "trigger": f"regex:{pattern}"},
            422,
            code,
        )
        for pattern, code in (
            (r"(a+)\1", "invalid_pattern"),  # a backreference: no linear-time engine runs it
            ("(?=a)a", "invalid_pattern"),  # lookahead
            ("(?<!x)a", "invalid_pattern"),  # lookbehind
            ("a" * 513, "invalid_pattern"),
        )
    ),
    *UNSTORABLE_REQUESTS,
    ("GET", "/v1/memory/entries?prefix=a%00b", None, 422, "invalid_value"),
    ("PUT", "/v1/memory/working/p/k", {"value": None}, 422, "validation_error"),
    ("PUT", "/v1/memory/working/p/k", {}, 422, "validation_error"),
    ("GET", "/v1/memory/working/p/missing", None, 404, "not_found"),
    ("POST", "/v1/memory/task-context", {"task_id": "t"}, 422, "validation_error"),
    (
        "POST",
        "/v1/memory/task-context",
        {"task_id": "t" * 101, "event_type": "e"},
        422,
        "validation_error",
    ),
    ("GET", "/v1/memory/task-context/nope", None, 404, "not_found"),
    ("PUT", "/v1/memory/task-context/nope", {"state": {}}, 404, "not_found"),
    ("GET", "/v1/memory/task-context/by-subtask/nope", None, 404, "not_found"),
    ("GET", "/v1/memory/plans?limit=5000", None, 422, "validation_error"),
    ("GET", "/v1/memory/plans/nope", None, 404, "not_found"),
    ("DELETE", "/v1/memory/sessions/nope", None, 404, "not_found"),
    ("POST", "/v1/memory/entries", {"key": "k", "value": None}, 422, "invalid_value"),
    (
        "POST",
        "/v1/memory/entries",
        {"key": "k", "value": 1, "content_type": "Not Ok"},
        422,
        "validation_error",
    ),
    ("POST", "/v1/memory/entries", {"key": "k", "value": 1, "ttl_ms": 0}, 422, "validation_error"),
    (
        "POST",
        "/v1/memory/entries",
        {"key": "k", "value": 1, "ttl_ms": 10**20},
        422,
        "validation_error",
    ),
    ("GET", "/v1/memory/entries/nope", None, 404, "not_found"),
    ("DELETE", "/v1/memory/entries/nope", None, 404, "not_found"),
    ("POST", "/v1/memory/recall", {"query": ""}, 422, "validation_error"),
    ("POST", "/v1/memory/recall", {"query": "x", "limit": 0}, 422, "validation_error"),
    ("POST", "/v1/memory/recall", {"query": "x", "timeout_s": 1e-300}, 422, "validation_error"),
    ("POST", "/v1/memory/recall", {"query": "x", "scope": "galaxy"}, 422, "validation_error"),
    (
        "POST",
        "/v1/memory/recall",
        {"query": "x", "provider_ids": ["nope"]},
        404,
        "provider_not_found",
    ),
    ("GET", "/v1/events?after=-1", None, 422, "validation_error"),
    ("GET", f"/v1/events?after={2**70}", None, 422, "validation_error"),
    ("GET", f"/v1/memory/task-context?offset={2**70}", None, 422, "validation_error"),
    ("GET", f"/v1/memory/entries?offset={2**70}", None, 422, "validation_error"),
    ("POST", "/v1/memory/graph/entities", {"name": ""}, 422, "validation_error"),
    (
        "POST",
        "/v1/memory/graph/entities",
        {"name": "x", "entity_type": "Person"},
        422,
        "validation_error",
    ),
    ("GET", "/v1/memory/graph/entities/nope", None, 404, "entity_not_found"),
    ("DELETE", "/v1/memory/graph/entities/nope", None, 404, "entity_not_found"),
    ("GET", "/v1/memory/graph/entities/nope/relations", None, 404, "entity_not_found"),
    (
        "GET",
        "/v1/memory/graph/entities/nope/relations?as_of=2026-01-01T00:00:00",
        None,
        422,
        "validation_error",
    ),
    ("POST", "/v1/memory/graph/relations", {"source_id": "a", "target_id": "b"}, 404, GRAPH_404),
    (
        "POST",
        "/v1/memory/graph/relations",
        {"source_id": "a", "target_id": "b", "valid_at": "2026-01-01T00:00:00"},
        422,
        "validation_error",
    ),
    ("DELETE", "/v1/memory/graph/relations/nope", None, 404, "relation_not_found"),
    ("POST", "/v1/memory/graph/traverse", {"start_entity_id": "a"}, 404, GRAPH_404),
    (
        "POST",
        "/v1/memory/graph/traverse",
        {"start_entity_id": "a", "pattern": "shortest_path"},
        422,
        "invalid_traversal",
    ),
    (
        "POST",
        "/v1/memory/graph/traverse",
        {"start_entity_id": "a", "max_depth": 65},
        422,
        "validation_error",
    ),
    (
        "POST",
        "/v1/memory/graph/traverse",
        {"start_entity_id": "a", "pattern": "x"},
        422,
        "validation_error",
    ),
    ("GET", "/v1/memory/graph/search?q=", None, 422, "validation_error"),
    ("GET", "/v1/memory/graph/search?q=x&entity_type=X", None, 422, "validation_error"),
    ("POST", "/v1/memory/graph/ingest", {"text": ""}, 422, "validation_error"),
    ("GET", "/v1/nowhere", None, 404, "not_found"),
    ("PATCH", "/v1/memory/plans/p", None, 405, "method_not_allowed"),
]


@pytest.mark.parametrize(("method", "path", "body", "status", "code"), BAD_REQUESTS)
async def test_bad_input_is_a_typed_4xx_and_writes_nothing(
    http: httpx.AsyncClient,
    engine: Engine,
    method: str,
    path: str,
    body: Any,
    status: int,
    code: str,
) -> None:
    before = await engine.events.count()
    # Encoded here: JSON escapes (\u0000, \ud800) as a client in any language sends them.
    content = None if body is None else json.dumps(body).encode()
    response = await http.request(method, path, content=content, headers=JSON_TYPE)
    assert (response.status_code, response.json()["error"]) == (status, code), response.text
    assert set(response.json()) == {"error", "message", "details"}
    after = await engine.events.count()
    # The local tenant is registered by the first request; nothing else is written.
    assert after - before <= 1


async def test_malformed_json_is_422(http: httpx.AsyncClient) -> None:
    response = await http.post(
        "/v1/memory/entries", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["error"] == "validation_error"


async def test_taken_ids_are_409(http: httpx.AsyncClient) -> None:
    body = {"plan_id": "p1", "goal_event": "goal"}
    assert (await http.post("/v1/memory/plans", json=body)).status_code == 201
    again = await http.post("/v1/memory/plans", json=body)
    assert (again.status_code, again.json()["error"]) == (409, "conflict")


async def test_declared_oversized_body_is_413(http: httpx.AsyncClient, engine: Engine) -> None:
    before = await engine.events.count()
    response = await http.post("/v1/memory/semantic", json={"content": "x" * 5000})
    assert response.status_code == 413
    assert response.json()["details"]["limit"] == 4096
    assert await engine.events.count() == before


async def test_streamed_oversized_body_is_413(http: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"content": "'
        for _ in range(10):
            yield b"x" * 1000
        yield b'"}'

    response = await http.post(
        "/v1/memory/semantic", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 413


async def test_streamed_body_within_the_limit_is_served(http: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"key": "k", '
        yield b'"value": "v"}'

    response = await http.post(
        "/v1/memory/entries", content=chunks(), headers={"content-type": "application/json"}
    )
    assert response.status_code == 201


async def test_idempotency_key_replays_and_refuses_reuse(
    http: httpx.AsyncClient, engine: Engine
) -> None:
    headers = {"Idempotency-Key": "order-1"}
    body = {"task_id": "t1", "event_type": "research.requested"}
    first = await http.post("/v1/memory/task-context", json=body, headers=headers)
    replay = await http.post("/v1/memory/task-context", json=body, headers=headers)
    assert (first.status_code, replay.status_code) == (201, 201)
    assert replay.json() == first.json()
    assert replay.headers["Idempotent-Replayed"] == "true"
    assert "Idempotent-Replayed" not in first.headers
    reused = await http.post(
        "/v1/memory/task-context", json={**body, "task_id": "t2"}, headers=headers
    )
    assert reused.status_code == 422
    # Without the key the same request is a new one: the id is taken.
    assert (await http.post("/v1/memory/task-context", json=body)).status_code == 409
    bad = await http.post("/v1/memory/task-context", json=body, headers={"Idempotency-Key": ""})
    assert bad.status_code == 422


async def test_idempotency_keys_are_per_user(http: httpx.AsyncClient) -> None:
    body = {"key": "k", "value": 1}
    alice = await http.post(
        "/v1/memory/entries", json=body, headers={"Idempotency-Key": "same", "X-User-ID": "alice"}
    )
    bob = await http.post(
        "/v1/memory/entries", json=body, headers={"Idempotency-Key": "same", "X-User-ID": "bob"}
    )
    assert "Idempotent-Replayed" not in bob.headers
    assert bob.json()["scope"]["user"] == "bob"
    assert alice.json()["scope"]["user"] == "alice"


async def test_a_retry_in_flight_is_409(app: FastAPI, http: httpx.AsyncClient) -> None:
    # Hold the first request inside the handler while the retry arrives.
    entered, release = asyncio.Event(), asyncio.Event()
    engine: Engine = app.state.engine
    persistent_write = type(engine.scope().persistent).write

    async def slow_write(self: Any, *args: Any, **kwargs: Any) -> Any:
        entered.set()
        await release.wait()
        return await persistent_write(self, *args, **kwargs)

    headers = {"Idempotency-Key": "slow"}
    body = {"key": "k", "value": 1}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(type(engine.scope().persistent), "write", slow_write)
        first = asyncio.create_task(http.post("/v1/memory/entries", json=body, headers=headers))
        await entered.wait()
        retry = await http.post("/v1/memory/entries", json=body, headers=headers)
        release.set()
        assert (await first).status_code == 201
    assert (retry.status_code, retry.json()["error"]) == (409, "conflict")


async def test_stored_answers_expire_after_the_configured_time(engine: Engine) -> None:
    app = create_app(ServiceSettings(idempotency_ttl_s=60), engine=engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as http:
        await http.post(
            "/v1/memory/entries", json={"key": "k", "value": 1}, headers={"Idempotency-Key": "ttl"}
        )
    stored = await engine.backend.scan(RecordQuery("idempotency", None))
    assert [r.ttl_ms for r in stored] == [60_000]


async def test_reads_ignore_idempotency_keys(http: httpx.AsyncClient) -> None:
    response = await http.get("/v1/memory/plans", headers={"Idempotency-Key": "read"})
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response.headers


def test_a_model_servers_wait_is_passed_on_as_retry_after() -> None:
    busy = error_response(LLMUnavailableError("busy", status_code=429, retry_after_s=2.5))
    assert busy.status_code == 503
    assert busy.headers["Retry-After"] == "3"
    assert "Retry-After" not in error_response(StorageError("x")).headers


def test_error_table() -> None:
    assert status_of(ConflictError("x")) == 409
    assert status_of(StorageError("x")) == 503
    assert status_of(EngramError("x")) == 500
    assert status_of(EntityNotFoundError("x")) == 404
    assert status_of(RelationNotFoundError("x")) == 404
    assert status_of(InvalidTraversalError("x")) == 422
    assert status_of(GraphMemoryError("x")) == 400


async def test_health_and_local_tenant(http: httpx.AsyncClient, engine: Engine) -> None:
    health = await http.get("/healthz")
    assert health.json()["auth"] == "local"
    await http.get("/v1/memory/plans")
    tenant = await engine.tenancy.get_tenant(ServiceSettings().local_tenant)
    assert tenant is not None
    assert tenant.name == "Default Tenant"


def test_openapi_documents_every_operation(app: FastAPI) -> None:
    schema = app.openapi()
    operations = [
        (path, method, op) for path, item in schema["paths"].items() for method, op in item.items()
    ]
    assert len(operations) >= 35
    for path, method, op in operations:
        success = [code for code in op["responses"] if code.startswith("2")]
        assert success, (path, method)
        content = op["responses"][success[0]].get("content", {})
        assert "application/json" in content, (path, method)
        assert content["application/json"]["schema"], (path, method)
        assert op.get("summary"), (path, method)
        if path != "/healthz":
            for code in ("401", "403", "422"):
                assert code in op["responses"], (path, method, code)
        headers = {p["name"] for p in op.get("parameters", []) if p["in"] == "header"}
        assert ("Idempotency-Key" in headers) == (method in ("post", "put", "delete"))
    paths = set(schema["paths"])
    for expected in (
        "/v1/memory/semantic",
        "/v1/memory/semantic/upsert",
        "/v1/memory/semantic/search",
        "/v1/memory/episodic",
        "/v1/memory/episodic/recent",
        "/v1/memory/episodic/search",
        "/v1/memory/procedural/context",
        "/v1/memory/working/{plan_id}/{key}",
        "/v1/memory/working/{plan_id}",
        "/v1/memory/task-context",
        "/v1/memory/task-context/{task_id}",
        "/v1/memory/task-context/by-subtask/{subtask_id}",
        "/v1/memory/plans",
        "/v1/memory/plans/{plan_id}",
        "/v1/memory/sessions",
        "/v1/memory/sessions/{session_id}",
        "/v1/memory/entries",
        "/v1/memory/recall",
        "/v1/events",
        "/v1/memory/graph/entities",
        "/v1/memory/graph/entities/{entity_id}",
        "/v1/memory/graph/entities/{entity_id}/relations",
        "/v1/memory/graph/relations",
        "/v1/memory/graph/relations/{relation_id}",
        "/v1/memory/graph/traverse",
        "/v1/memory/graph/search",
        "/v1/memory/graph/ingest",
    ):
        assert expected in paths, expected


def test_create_app_needs_one_source(engine: Engine) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        create_app(engine=engine, db="x.db")


async def test_a_bug_is_a_500_without_its_traceback(engine: Engine) -> None:
    app = create_app(engine=engine)

    async def boom() -> None:
        raise RuntimeError("secret internals")

    app.add_api_route("/boom", boom)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://service") as http:
        response = await http.get("/boom")
    assert response.status_code == 500
    assert response.json()["error"] == "internal_error"
    assert "secret" not in response.text


async def test_an_app_on_a_database_opens_and_closes_its_engine(tmp_path: Path) -> None:
    app = create_app(db=tmp_path / "served.db", config=EngineConfig(embedder=None))
    async with app.router.lifespan_context(app):
        opened: Engine = app.state.engine
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://service"
        ) as http:
            assert (await http.get("/healthz")).status_code == 200
    with pytest.raises(EngineClosedError):
        await opened.events.count()


@pytest.mark.parametrize(
    "settings",
    [
        {"auth": "open"},
        {"jwt_secret": "short"},
        {"max_body_bytes": 10},
    ],
)
def test_bad_settings_are_usage_errors(settings: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        ServiceSettings(**settings)


async def test_local_mode_needs_no_credentials(local_client: MemoryClient) -> None:
    entry = await local_client.store("user.city", "Lisbon")
    assert entry.scope is not None
    assert entry.scope.tenant == LOCAL_TENANT
    assert (await local_client.health()).auth == "local"
