"""MCP over stdio, for desktop agents: one process, one database, one fixed scope."""

from __future__ import annotations

import contextlib

import anyio

from engramdb.core.errors import EngramError
from engramdb.core.scope import Scope
from engramdb.engine import Engine, EngineConfig
from engramdb.engine import open as open_engine
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server


async def _warm(engine: Engine) -> None:
    # A model that fails to load is reported by the first tool that needs it.
    with contextlib.suppress(EngramError):
        await engine.indexer.warm()


async def serve_stdio(target: str, scope: Scope, config: EngineConfig | None = None) -> None:
    """Serve ``scope`` of the database ``target`` over stdin and stdout until the client
    closes them. The embedding model loads while the client connects, not in its first
    call."""
    async with open_engine(target, config=config) as engine:
        server = build_server(fixed(Binding(engine, scope)))
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(_warm, engine)
            await server.run_stdio_async()
            tasks.cancel_scope.cancel()
