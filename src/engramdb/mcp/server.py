"""``build_server``: the MCP server of Engram, every message bound to its connection's scope."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

import engramdb
from engramdb.mcp import context, graph_tools, ingest, memory_tools, state_tools
from engramdb.mcp.binding import ScopeSource, bind_scope

INSTRUCTIONS = """Engram is your long-term memory of this user, kept across conversations.
Before answering a question that may depend on the user's past, preferences or earlier work,
call `assemble` (or `remember` for one memory type). When the user tells you something worth
keeping — a fact about them, a decision, an event, a rule for you to follow — store it with
`memorize`. Forget on request with `forget`. People, places and organizations and how they
relate go in the graph (`graph_add_entity`, `graph_add_relation`, `graph_search`,
`graph_traverse`); the state of the task at hand in `set_state` / `get_state`."""


def build_server(source: ScopeSource) -> MCPServer:
    """The MCP server whose every message works in the scope ``source`` binds it to."""
    server: MCPServer = MCPServer(
        name="engram",
        title="Engram memory",
        instructions=INSTRUCTIONS,
        version=engramdb.__version__,
        website_url="https://pypi.org/project/engramdb/",
        middleware=[bind_scope(source)],
        log_level="WARNING",
    )
    memory_tools.register(server)
    state_tools.register(server)
    graph_tools.register(server)
    ingest.register(server)
    context.register(server)
    return server
