"""``POST /v1/memory/ingest``: the report over REST, and a malformed message refused with a
422 before anything is stored."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from engramdb.client import MemoryClient
from engramdb.engine import Engine
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings

NOW = datetime(2024, 6, 3, 10, tzinfo=UTC)


def client(engine: Engine) -> httpx.AsyncClient:
    app = create_app(ServiceSettings(), engine=engine)
    return httpx.AsyncClient(base_url="http://service", transport=httpx.ASGITransport(app=app))


async def test_ingest_over_rest(engine: Engine) -> None:
    messages = [
        {"role": "user", "content": "I live in Lisbon.", "timestamp": "2024-01-02T10:00:00Z"},
        {"role": "user", "content": "I moved to Porto.", "timestamp": "2024-03-02T10:00:00Z"},
    ]
    async with client(engine) as http:
        answer = await http.post("/v1/memory/ingest", json={"messages": messages})
        assert answer.status_code == 200, answer.text
        report = answer.json()
        assert report["categories"]["profile"]["updated"] == 1
        assert [i["decision"] for i in report["items"]] == ["added", "updated"]
        found = await http.get("/v1/memory/semantic/search", params={"q": "where do I live"})
        assert found.json()["items"][0]["text"] == "The user lives in Porto."


async def test_a_malformed_message_is_a_422_and_stores_nothing(engine: Engine) -> None:
    before = await engine.events.count()
    async with client(engine) as http:
        for body in (
            {"messages": [{"role": "user", "content": "I live in Lisbon."}, {"role": "user"}]},
            {"messages": [{"role": "user", "content": "x", "timestamp": "2024-01-02T10:00"}]},
            {"messages": [], "extra": 1},
        ):
            answer = await http.post("/v1/memory/ingest", json=body)
            assert answer.status_code == 422, body
            assert answer.json()["error"] == "validation_error"
    # The local tenant is registered by the first request; nothing else is written.
    assert await engine.events.count() - before <= 1


async def test_ingest_through_the_client(engine: Engine) -> None:
    app = create_app(ServiceSettings(), engine=engine)
    transport = httpx.ASGITransport(app=app)
    async with MemoryClient("http://service", transport=transport) as memory:
        report = await memory.ingest(
            [{"role": "user", "content": "My dog Rex loves Lisbon.", "timestamp": NOW}],
            user_id="ana",
        )
    assert report.extracted == 1
    assert report.items[0]["key"] == "user.pet.rex"
    mem = engine.scope(tenant=ServiceSettings().local_tenant, user="ana")
    stored = await mem.semantic.history("user.pet.rex")
    assert stored[0].valid_from == NOW
