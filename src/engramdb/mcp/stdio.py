"""MCP over stdio, for desktop agents: one process, one database, one fixed scope."""

from __future__ import annotations

from engramdb.core.scope import Scope
from engramdb.engine import EngineConfig
from engramdb.engine import open as open_engine
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server


async def serve_stdio(target: str, scope: Scope, config: EngineConfig | None = None) -> None:
    """Serve ``scope`` of the database ``target`` over stdin and stdout until the client
    closes them."""
    async with open_engine(target, config=config) as engine:
        server = build_server(fixed(Binding(engine, scope)))
        await server.run_stdio_async()
