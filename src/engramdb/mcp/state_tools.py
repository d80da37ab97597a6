"""Working state tools: the key/value state of the task at hand (``mem.working``), or of a
plan that every agent of the tenant shares."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from engramdb.core.errors import NotFoundError
from engramdb.mcp.binding import bound
from engramdb.mcp.tooling import READ_ONLY, WRITES, engram_tool

KeyArg = Annotated[str, Field(min_length=1, max_length=512, description="The state's name.")]
PlanArg = Annotated[
    str | None,
    Field(
        description="A plan id: read or write the plan's state, shared by every agent of the "
        "tenant working on it, instead of this conversation's own."
    ),
]
_MISSING = object()


def register(server: MCPServer) -> None:
    """Add the working state tools to ``server``."""

    @engram_tool(server, WRITES)
    async def set_state(
        key: KeyArg,
        value: Annotated[Any, Field(description="Any JSON value; replaces the one stored.")],
        plan: PlanArg = None,
    ) -> dict[str, Any]:
        """Set one value of the working state (progress, the current step, intermediate
        results), to read back later with `get_state`."""
        await bound().writer(plan).working.set(key, value)
        return {"key": key, "value": value, "plan": plan}

    @engram_tool(server, READ_ONLY)
    async def get_state(
        key: Annotated[
            str | None, Field(max_length=512, description="One state's name; omit for all.")
        ] = None,
        plan: PlanArg = None,
    ) -> dict[str, Any]:
        """Read the working state: one value by `key`, or every key and value."""
        working = bound().memory(plan).working
        if key is None:
            return {"state": await working.state(), "plan": plan}
        value = await working.get(key, _MISSING)
        if value is _MISSING:
            raise NotFoundError(f"no state {key!r}", resource="state", id=key)
        return {"key": key, "value": value, "plan": plan}
