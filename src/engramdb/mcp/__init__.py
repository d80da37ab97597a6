"""The MCP server: Engram's memory as tools, resources and a prompt for any MCP client.

``build_server`` (in ``server``) makes an ``MCPServer`` of the official ``mcp`` SDK whose every
call works in the scope its connection is bound to: one fixed scope over stdio
(``engram mcp --tenant … --user …``, see ``stdio``), the caller's verified tenant and user over
streamable HTTP in ``engram serve`` (``/mcp``, see ``http``). The SDK is the optional extra
``engramdb[mcp]``; nothing else in Engram imports this package.
"""
