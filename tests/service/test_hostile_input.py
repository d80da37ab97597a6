"""Hostile requests on every backend: a rule whose pattern would backtrack for ever answers at
once, unstorable strings and deep values are 4xx (never a 5xx), and a storage failure's answer
does not name the database's user, host or name."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import psycopg
import pytest

import engramdb
from engramdb.client import MemoryClient
from engramdb.core.errors import InvalidValueError, NotFoundError, RecallError, StorageError
from engramdb.engine import EngineConfig
from engramdb.manager.manager import ProviderFailure, _raise_total_failure
from engramdb.service.app import create_app
from engramdb.service.errors import error_response, public_failure
from engramdb.service.settings import ServiceSettings
from engramdb.storage.postgres.connection import connect
from tests.postgres.database import SERVER_URL, empty_database

JSON_TYPE = {"content-type": "application/json"}


@pytest.fixture(params=["sqlite", "postgresql"])
async def http(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    """A client of the app in local mode over each backend (no embedding model)."""
    target = str(tmp_path / "e.db") if request.param == "sqlite" else empty_database()
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        app = create_app(ServiceSettings(), engine=engine)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            yield client


async def test_a_catastrophic_rule_answers_and_fires_only_on_a_match(
    http: httpx.AsyncClient,
) -> None:
    rule = {"content": "evil", "trigger": "regex:(a+)+$"}
    assert (await http.post("/v1/memory/procedural", json=rule)).status_code == 201
    calm = {"content": "calm", "trigger": "always"}
    assert (await http.post("/v1/memory/procedural", json=calm)).status_code == 201
    for _ in range(5):  # each used to hold the event loop for ever (2**40 paths)
        answer = await http.get("/v1/memory/procedural/context", params={"q": "a" * 40 + "!"})
        assert answer.status_code == 200
        assert [i["text"] for i in answer.json()["items"]] == ["calm"]
    assert (await http.get("/healthz")).status_code == 200
    answer = await http.get("/v1/memory/procedural/context", params={"q": "a" * 40})
    assert sorted(i["text"] for i in answer.json()["items"]) == ["calm", "evil"]


@pytest.mark.parametrize("pattern", [r"(a+)\1", "(?=a)a", "(?<!x)a", "a" * 513])
async def test_a_rule_the_linear_engine_cannot_run_is_422(
    http: httpx.AsyncClient, pattern: str
) -> None:
    answer = await http.post(
        "/v1/memory/procedural", json={"content": "x", "trigger": f"regex:{pattern}"}
    )
    assert answer.status_code == 422
    assert answer.json()["error"] == "invalid_pattern"


@pytest.mark.parametrize("bad", ["\\u0000", "\\ud800", "\\udfff"])
@pytest.mark.parametrize(
    ("method", "path", "template"),
    [
        ("POST", "/v1/memory/entries", '{"key": "k", "value": "aBADb"}'),
        ("POST", "/v1/memory/entries", '{"key": "k", "value": 1, "metadata": {"mBAD": 1}}'),
        ("POST", "/v1/memory/plans", '{"plan_id": "p", "goal_event": "g", "state": {"s": "BAD"}}'),
        ("PUT", "/v1/memory/working/p/k", '{"value": {"v": ["BAD"]}}'),
        ("POST", "/v1/memory/sessions", '{"session_id": "s", "metadata": {"BAD": 1}}'),
    ],
)
async def test_unstorable_strings_are_422_on_every_backend(
    http: httpx.AsyncClient, method: str, path: str, template: str, bad: str
) -> None:
    answer = await http.request(
        method, path, content=template.replace("BAD", bad), headers=JSON_TYPE
    )
    assert answer.status_code == 422, answer.text
    assert answer.json()["error"] == "invalid_value"
    listed = await http.get("/v1/memory/entries", params={"prefix": "k"})
    assert listed.json()["items"] == []


async def test_a_nul_in_a_query_is_422_not_a_storage_failure(http: httpx.AsyncClient) -> None:
    answer = await http.get("/v1/memory/entries", params={"prefix": "a\x00b"})
    assert answer.status_code == 422, answer.text


@pytest.mark.parametrize(("depth", "status"), [(150, 422), (10_000, 400)])
async def test_a_deeply_nested_body_is_4xx(
    http: httpx.AsyncClient, depth: int, status: int
) -> None:
    # 10,000 levels stop the JSON parser itself (400); within its reach, the value check (422).
    value = "[" * depth + "1" + "]" * depth
    body = '{"key": "k", "value": ' + value + "}"
    answer = await http.post("/v1/memory/entries", content=body, headers=JSON_TYPE)
    assert answer.status_code == status, answer.text


async def test_a_storage_failure_does_not_name_the_database() -> None:
    url = "postgresql://engram_secret_user@127.0.0.1:5432/engram_secret_db?connect_timeout=2"
    with pytest.raises(StorageError) as raised:
        await connect(url, connect_timeout=2)
    assert "engram_secret" in raised.value.message  # the operator's log keeps it
    answer = error_response(raised.value)
    body = bytes(answer.body).decode()
    assert answer.status_code == 503
    for secret in ("engram_secret_user", "engram_secret_db", "127.0.0.1", "5432", "postgresql"):
        assert secret not in body
    assert json.loads(body)["error"] == "storage_error"


async def test_a_storage_failure_over_http_does_not_name_the_database() -> None:
    url = empty_database()
    database = urlsplit(url).path.lstrip("/")
    async with engramdb.open(url, config=EngineConfig(embedder=None)) as engine:
        app = create_app(ServiceSettings(), engine=engine)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://service") as client:
            first = await client.post("/v1/memory/entries", json={"key": "k", "value": 1})
            assert first.status_code == 201
            _drop_connections(database)  # as a restart of the database server would
            answer = await client.post("/v1/memory/entries", json={"key": "k", "value": 2})
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "storage_error"
    for secret in (database, "postgres", "127.0.0.1", "5432"):
        assert secret not in answer.text


def _drop_connections(database: str) -> None:
    with psycopg.connect(SERVER_URL, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            (database,),
        )


async def test_the_sdk_raises_the_typed_error_for_unsendable_values(tmp_path: Path) -> None:
    async with engramdb.open(tmp_path / "e.db", config=EngineConfig(embedder=None)) as engine:
        app = create_app(ServiceSettings(), engine=engine)
        transport = httpx.ASGITransport(app=app)
        async with MemoryClient("http://service", transport=transport) as client:
            for value in ("x\ud800y", "a\x00b", {"k": ["x\udfff"]}):
                with pytest.raises(InvalidValueError):
                    await client.request(
                        "POST", "/v1/memory/entries", json={"key": "k", "value": value}
                    )
            deep: list[object] = []
            for _ in range(10_000):
                deep = [deep]
            with pytest.raises(InvalidValueError, match="nested too deep"):
                await client.request("POST", "/v1/memory/entries", json={"key": "k", "value": deep})
            with pytest.raises(NotFoundError):
                await client.request("GET", "/v1/memory/entries/k")


async def test_a_recall_whose_stores_failed_does_not_name_the_database() -> None:
    url = "postgresql://engram_secret_user@127.0.0.1:5432/engram_secret_db"
    with pytest.raises(StorageError) as raised:
        await connect(url, connect_timeout=2)
    failure = ProviderFailure.of("episodic", raised.value).to_dict()
    with pytest.raises(RecallError) as recall:
        _raise_total_failure([ProviderFailure.of("episodic", raised.value)], 5.0)
    for answer in (error_response(recall.value).body, json.dumps(public_failure(failure))):
        text = bytes(answer).decode() if not isinstance(answer, str) else answer
        assert "engram_secret" not in text
        assert "127.0.0.1" not in text
