"""The one place where Engram's errors become MCP answers.

A tool that fails on the caller's input answers a tool error result (``isError``) whose text
names the error code and says what to change, so the model can correct its call; the SDK
would otherwise hide the message of any exception but its own ``ToolError``. A resource or
prompt answers a ``ResourceError`` the same way. A bug is left to the SDK, which answers a
generic error and logs the traceback.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

import pydantic
from mcp.server.mcpserver.exceptions import ResourceError, ToolError

from engramdb.core.errors import EngramError

P = ParamSpec("P")
T = TypeVar("T")


def describe(exc: EngramError | pydantic.ValidationError) -> str:
    """One line for a model to act on: ``<code>: <message>``."""
    if isinstance(exc, EngramError):
        return f"{exc.code}: {exc.message}"
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}" for e in exc.errors()
    )
    return f"validation_error: {problems}"


def _guarded(
    fn: Callable[P, Awaitable[T]], error: type[ToolError] | type[ResourceError]
) -> Callable[P, Awaitable[T]]:
    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        try:
            return await fn(*args, **kwargs)
        except (EngramError, pydantic.ValidationError) as exc:
            raise error(describe(exc)) from exc

    return wrapper


def tool_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``fn`` answering an Engram error or invalid input as a tool error result."""
    return _guarded(fn, ToolError)


def resource_errors(fn: Callable[P, Awaitable[T]]) -> Callable[P, Awaitable[T]]:
    """``fn`` answering an Engram error as a resource (or prompt) error."""
    return _guarded(fn, ResourceError)
