"""Which scope a message works in: ``Binding``, and the middleware that binds it per message.

A ``ScopeSource`` turns the transport's request (``None`` over stdio and in memory, the HTTP
request over streamable HTTP) into a ``Binding``; ``bind_scope`` sets it for the handler of
each message, and tools, resources and prompts read it with ``bound()``. So a tool never
takes a tenant or user from its arguments: a model cannot talk its way into another scope.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

from engramdb.core.errors import PermissionDeniedError
from engramdb.core.scope import Scope
from engramdb.engine import Engine, ScopedMemory


@dataclass(frozen=True)
class Binding:
    """The engine and scope one connection works in, and whether it may write."""

    engine: Engine
    scope: Scope
    may_write: bool = True

    def memory(self, plan: str | None = None) -> ScopedMemory:
        """The scoped memory (of ``plan``'s shared state, which is the tenant's, if given)."""
        if plan is not None:
            return self.engine.scope(tenant=self.scope.tenant, plan=plan)
        s = self.scope
        return self.engine.scope(tenant=s.tenant, user=s.user, agent=s.agent, session=s.session)

    def writer(self, plan: str | None = None) -> ScopedMemory:
        """``memory(plan)`` for a write.

        Raises:
            PermissionDeniedError: the connection's credentials may only read.
        """
        if not self.may_write:
            raise PermissionDeniedError("these credentials may only read")
        return self.memory(plan)


#: Finds the binding of one message from the transport's request object.
ScopeSource = Callable[[Any], Awaitable[Binding]]

_current: ContextVar[Binding] = ContextVar("engram_mcp_binding")


def bound() -> Binding:
    """The binding of the message being handled."""
    try:
        return _current.get()
    except LookupError:  # a handler run outside bind_scope: a wiring bug, not a caller's
        raise RuntimeError("no scope is bound: the server was built without bind_scope") from None


def fixed(binding: Binding) -> ScopeSource:
    """A source that binds every message to ``binding`` (stdio, in memory)."""

    async def source(request: Any) -> Binding:
        return binding

    return source


def bind_scope(source: ScopeSource) -> ServerMiddleware[Any]:
    """Server middleware binding each message to the scope ``source`` finds for it."""

    async def middleware(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
        token = _current.set(await source(ctx.request))
        try:
            return await call_next(ctx)
        finally:
            _current.reset(token)

    return middleware
