"""Idempotent replays answer only who may make the request: access is checked before a key is
looked up, and a stored answer belongs to the credentials that made it, on every backend."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from engramdb.engine import Engine
from engramdb.service.app import create_app
from engramdb.service.auth import issue_token
from engramdb.service.settings import ServiceSettings
from engramdb.storage.backend import EventQuery
from tests.service.conftest import JWT_SECRET

ENTRY = {"key": "k", "value": "written once"}


@pytest.fixture
async def http(any_engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(ServiceSettings(auth="production", jwt_secret=JWT_SECRET), engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://service"
    ) as client:
        yield client


async def written(engine: Engine) -> int:
    """How many times the entry was written (its events)."""
    return await engine.events.count(EventQuery(event_types=("memory.written",), key="k"))


async def post(
    http: httpx.AsyncClient, credential: str, key: str = "retry-1", **headers: str
) -> httpx.Response:
    sent = {"Authorization": f"Bearer {credential}", "Idempotency-Key": key, **headers}
    return await http.post("/v1/memory/entries", json=ENTRY, headers=sent)


async def test_a_reader_replaying_a_writers_key_is_refused(
    any_engine: Engine, http: httpx.AsyncClient
) -> None:
    tenancy = any_engine.tenancy
    await tenancy.create_tenant("acme")
    _, writer = await tenancy.create_key("acme")
    _, reader = await tenancy.create_key("acme", role="reader")
    first = await post(http, writer)
    assert first.status_code == 201
    refused = await post(http, reader)
    assert (refused.status_code, refused.json()["error"]) == (403, "permission_denied")
    assert "Idempotent-Replayed" not in refused.headers
    # A reader's token of the same subject as the writer's is refused as well.
    writer_jwt = issue_token(JWT_SECRET, "acme", user="alice")
    reader_jwt = issue_token(JWT_SECRET, "acme", user="alice", role="reader")
    assert (await post(http, writer_jwt, "retry-2")).status_code == 201
    assert (await post(http, reader_jwt, "retry-2")).status_code == 403
    # The writer's own retry still replays.
    replay = await post(http, writer)
    assert (replay.status_code, replay.headers["Idempotent-Replayed"]) == (201, "true")
    assert replay.json() == first.json()
    assert await written(any_engine) == 2


async def test_a_replay_for_another_tenant_or_user_is_refused(
    any_engine: Engine, http: httpx.AsyncClient
) -> None:
    tenancy = any_engine.tenancy
    for tenant in ("acme", "globex"):
        await tenancy.create_tenant(tenant)
    _, writer = await tenancy.create_key("acme")
    _, alice = await tenancy.create_key("acme", user_id="alice")
    assert (await post(http, writer, **{"X-Tenant-ID": "acme"})).status_code == 201
    other_tenant = await post(http, writer, **{"X-Tenant-ID": "globex"})
    assert (other_tenant.status_code, other_tenant.json()["error"]) == (403, "permission_denied")
    assert (await post(http, alice, "retry-3")).status_code == 201
    other_user = await post(http, alice, "retry-3", **{"X-User-ID": "bob"})
    assert (other_user.status_code, other_user.json()["error"]) == (403, "permission_denied")
    assert await written(any_engine) == 2


async def test_another_holder_of_the_same_key_makes_a_new_request(
    any_engine: Engine, http: httpx.AsyncClient
) -> None:
    tenancy = any_engine.tenancy
    await tenancy.create_tenant("acme")
    _, one = await tenancy.create_key("acme", name="one")
    _, two = await tenancy.create_key("acme", name="two")
    assert (await post(http, one)).status_code == 201
    # Same tenant, same rights, same key and body: still not the first holder's answer.
    other = await post(http, two)
    assert (other.status_code, "Idempotent-Replayed" in other.headers) == (201, False)
    assert await written(any_engine) == 2
    assert (await post(http, two)).headers["Idempotent-Replayed"] == "true"
    assert await written(any_engine) == 2
