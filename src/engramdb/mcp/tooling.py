"""``engram_tool``: how every Engram tool is registered — its docstring as one paragraph for
the model to read, and Engram's errors answered as tool error results."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

from engramdb.mcp.errors import tool_errors

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

READ_ONLY = ToolAnnotations(readOnlyHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, openWorldHint=False)


def one_paragraph(doc: str | None) -> str:
    """A docstring as one line: a model reads the words, not the source's line breaks."""
    return " ".join(inspect.cleandoc(doc or "").split())


def engram_tool(server: MCPServer, annotations: ToolAnnotations) -> Callable[[F], F]:
    """Register the decorated coroutine function as a tool of ``server``."""

    def register(fn: F) -> F:
        server.add_tool(
            tool_errors(fn), description=one_paragraph(fn.__doc__), annotations=annotations
        )
        return fn

    return register
