"""Fixtures of the MCP tests: clients of the SDK connected to Engram's MCP server in memory,
and helpers to read their answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import pytest
from mcp import Client
from mcp.types import CallToolResult, TextContent, TextResourceContents

from engramdb.core.scope import Scope
from engramdb.engine import Engine
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server

#: Every tool the server offers but ``ingest`` (exercised on its own: it runs formation).
BASE_TOOLS = {
    "memorize",
    "remember",
    "forget",
    "summarize",
    "assemble",
    "capacity",
    "memory_types",
    "set_state",
    "get_state",
    "graph_add_entity",
    "graph_add_relation",
    "graph_search",
    "graph_traverse",
}
TOOLS = BASE_TOOLS | {"ingest"}

Connect = Callable[..., AbstractAsyncContextManager[Client]]


@pytest.fixture
def connect(any_engine: Engine) -> Connect:
    """In-memory connections to a server bound to one scope of the engine:
    ``async with connect("acme", "alice") as client``."""

    @asynccontextmanager
    async def connection(
        tenant: str, user: str | None = None, *, may_write: bool = True
    ) -> AsyncIterator[Client]:
        binding = Binding(any_engine, Scope(tenant=tenant, user=user), may_write=may_write)
        async with Client(build_server(fixed(binding))) as client:
            yield client

    return connection


def text_of(result: CallToolResult) -> str:
    """The text of a tool's answer."""
    return "".join(c.text for c in result.content if isinstance(c, TextContent))


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The JSON answer of a tool that must succeed."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The message of a tool call that must fail as a tool error result."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, text_of(result)
    return text_of(result)


async def read_json(client: Client, uri: str) -> Any:
    """A JSON resource, parsed."""
    found = await client.read_resource(uri)
    (content,) = found.contents
    assert isinstance(content, TextResourceContents)
    assert content.mime_type == "application/json"
    return json.loads(content.text)


async def exercise_every_tool(client: Client) -> set[str]:
    """Call every tool once with good arguments (each must succeed), read both resources and
    get the prompt: the names of the tools called."""
    called: set[str] = set()

    async def use(tool: str, **arguments: Any) -> dict[str, Any]:
        called.add(tool)
        return await call(client, tool, **arguments)

    await use("memorize", type="semantic", text="Dana's favourite colour is teal", key="colour")
    await use("remember", type="semantic", query="favourite colour")
    await use("summarize", type="semantic", scope="recent", token_limit=100)
    await use("capacity", type="semantic")
    await use("memory_types")
    await use("assemble", query="what colour does Dana like?", token_limit=300)
    await use("forget", type="semantic", instruction="key:colour", mode="hard")
    await use("set_state", key="step", value=[1, 2])
    await use("get_state", key="step")
    dana = await use("graph_add_entity", name="Dana", entity_type="person")
    teal = await use("graph_add_entity", name="Teal", entity_type="concept")
    await use(
        "graph_add_relation",
        source_id=dana["entity_id"],
        target_id=teal["entity_id"],
        relation_type="likes",
    )
    await use("graph_search", query="Dana")
    await use("graph_traverse", start_entity_id=dana["entity_id"], pattern="bfs")
    await read_json(client, "engram://profile")
    await read_json(client, "engram://episodes/recent")
    await client.get_prompt("recall_then_answer", {"question": "What does Dana like?"})
    return called
