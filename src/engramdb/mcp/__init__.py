"""The MCP server: Engram's memory as tools, resources and a prompt for any MCP client.

``build_server`` (in ``server``) makes an ``MCPServer`` of the official ``mcp`` SDK whose every
call works in the scope its connection is bound to: one fixed scope over stdio
(``engram mcp --tenant … --user …``, see ``stdio``), the caller's verified tenant and user over
streamable HTTP in ``engram serve`` (``/mcp``, see ``http``). The SDK is the optional extra
``engramdb[mcp]``: this module imports nothing of it, and only the modules beside it do, so
the command line and the service import them when MCP is used, not before.
"""

from __future__ import annotations

#: How to install what this package needs.
INSTALL = "pip install 'engramdb[mcp]'"


def sdk_missing(exc: ModuleNotFoundError) -> bool:
    """Whether ``exc`` says the MCP SDK is not installed (rather than anything else missing)."""
    return exc.name is not None and (exc.name == "mcp" or exc.name.startswith("mcp."))
