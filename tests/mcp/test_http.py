"""MCP over streamable HTTP at ``/mcp`` of a real ``engram serve`` process, with the REST
service's API keys and tokens: each connection works in its credentials' tenant and user."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

import engramdb
from engramdb.engine import EngineConfig
from engramdb.service.auth import issue_token
from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.mcp.conftest import BASE_TOOLS, TOOLS, call, exercise_every_tool, read_json, refused

JWT_SECRET = "a-test-secret-of-at-least-thirty-two-bytes"


@dataclass(frozen=True)
class Served:
    """A running ``engram serve`` and API keys of two tenants."""

    url: str
    acme_alice: str
    acme_reader: str
    globex_alice: str


async def _issue_keys(db: Path) -> tuple[str, str, str]:
    async with engramdb.open(db, config=EngineConfig(embedder=None)) as engine:
        tenancy = engine.tenancy
        for tenant in ("acme", "globex"):
            await tenancy.create_tenant(tenant, tenant.title())
            await tenancy.create_user(tenant, "alice")
        acme = (await tenancy.create_key("acme", user_id="alice"))[1]
        reader = (await tenancy.create_key("acme", user_id="alice", role="reader"))[1]
        globex = (await tenancy.create_key("globex", user_id="alice"))[1]
        return acme, reader, globex


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """``engram serve`` in production mode on a temporary SQLite file."""
    db = tmp_path_factory.mktemp("mcp-http") / "engram.db"
    keys = asyncio.run(_issue_keys(db))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        *(sys.executable, "-m", "engramdb.cli", "--db", str(db), "serve", "--no-vectors"),
        *("--host", "127.0.0.1", "--port", str(port), "--auth", "production"),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "ENGRAM_JWT_SECRET": JWT_SECRET}
    with serving(command, f"{url}/healthz", log=db.parent / "serve.log", env=env):
        yield Served(url, *keys)


@asynccontextmanager
async def mcp_over_http(served: Served, api_key: str) -> AsyncIterator[Client]:
    """A client of ``/mcp`` sending ``api_key`` with every request."""
    headers = {"Authorization": f"Bearer {api_key}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(f"{served.url}/mcp", http_client=http)
        async with Client(transport) as client:
            yield client


async def test_every_tool_over_http(served: Served) -> None:
    async with mcp_over_http(served, served.acme_alice) as client:
        assert {t.name for t in (await client.list_tools()).tools} == TOOLS
        assert await exercise_every_tool(client) == BASE_TOOLS


async def test_tools_over_http_in_the_keys_tenant_and_user(served: Served) -> None:
    async with mcp_over_http(served, served.acme_alice) as client:
        await call(client, "memorize", type="semantic", text="Alice's team is called Orca")
        await call(client, "memorize", type="episodic", text="Orca shipped release 2")
        found = await call(client, "remember", type="semantic", query="team name")
        assert [i["text"] for i in found["items"]] == ["Alice's team is called Orca"]
        assert "Orca" in (await call(client, "assemble", query="Orca"))["text"]
        await call(client, "set_state", key="sprint", value=14)
        assert (await call(client, "get_state", key="sprint"))["value"] == 14
        orca = await call(client, "graph_add_entity", name="Orca", entity_type="organization")
        assert (await call(client, "graph_search", query="Orca"))["items"][0]["entity_id"] == (
            orca["entity_id"]
        )
        recent = await read_json(client, "engram://episodes/recent")
        assert [e["text"] for e in recent["items"]] == ["Orca shipped release 2"]
        assert "invalid_forget" in await refused(
            client, "forget", type="episodic", instruction="whatever"
        )


async def test_two_tenants_over_http_see_nothing_of_each_other(served: Served) -> None:
    async with (
        mcp_over_http(served, served.acme_alice) as acme,
        mcp_over_http(served, served.globex_alice) as globex,
    ):
        await call(acme, "memorize", type="semantic", text="The merger target is Initech")
        await call(acme, "set_state", key="deal", value="secret")
        assert (await call(globex, "remember", type="semantic", query="merger target"))[
            "items"
        ] == []
        assert "Initech" not in (await call(globex, "assemble", query="merger"))["text"]
        assert (await call(globex, "get_state"))["state"] == {}
        assert (await read_json(globex, "engram://profile"))["facts"] == []
        mine = await call(acme, "remember", type="semantic", query="merger target")
        assert [i["text"] for i in mine["items"]] == ["The merger target is Initech"]


async def test_a_jwt_binds_the_connection_to_its_claims(served: Served) -> None:
    token = issue_token(JWT_SECRET, "initech", user="peter")
    async with mcp_over_http(served, token) as peter:
        await call(peter, "memorize", type="semantic", text="Peter's stapler is red")
        found = await call(peter, "remember", type="semantic", query="stapler")
        assert [i["text"] for i in found["items"]] == ["Peter's stapler is red"]
    async with mcp_over_http(served, served.acme_alice) as alice:
        assert (await call(alice, "remember", type="semantic", query="stapler"))["items"] == []


async def test_a_reader_key_reads_but_may_not_write(served: Served) -> None:
    async with mcp_over_http(served, served.acme_reader) as client:
        assert "permission_denied" in await refused(client, "memorize", type="semantic", text="x")
        await call(client, "remember", type="semantic", query="anything")


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Bearer ek_not-a-key"}, 401),
        ({"X-Tenant-ID": "globex"}, 403),
    ],
)
def test_requests_without_valid_credentials_for_the_scope_are_refused(
    served: Served, headers: dict[str, str], status: int
) -> None:
    if status == 403:
        headers = {**headers, "Authorization": f"Bearer {served.acme_alice}"}
    answer = httpx.post(
        f"{served.url}/mcp",
        json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert answer.status_code == status
    assert answer.json()["error"] in ("unauthenticated", "permission_denied")
