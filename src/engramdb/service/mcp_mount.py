"""``/mcp`` of the service: the MCP server over streamable HTTP when the ``mcp`` extra is
installed (see ``engramdb.mcp.http``), else a clear 501 saying how to install it.

The SDK is imported when the application starts, not when it is made, so a service without
the extra, and the tests that make applications, pay nothing for it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.types import Receive, Scope, Send

from engramdb.mcp import INSTALL, sdk_missing
from engramdb.service.models import ErrorBody
from engramdb.service.settings import ServiceSettings

if TYPE_CHECKING:
    from engramdb.mcp.http import McpEndpoint

PATH = "/mcp"
INSTALL_HINT = f"MCP is not installed on this server: {INSTALL}"


class McpMount:
    """The ``/mcp`` route: the endpoint once the application has started it."""

    def __init__(self, settings: ServiceSettings) -> None:
        self.settings = settings
        self.endpoint: McpEndpoint | None = None

    @asynccontextmanager
    async def running(self, app: FastAPI) -> AsyncIterator[None]:
        """Start the MCP endpoint for ``app``'s lifetime (if the extra is installed)."""
        try:
            from engramdb.mcp.http import McpEndpoint
        except ModuleNotFoundError as exc:
            if not sdk_missing(exc):
                raise
            yield
            return
        endpoint = McpEndpoint(app, self.settings)
        async with endpoint.running():
            self.endpoint = endpoint
            try:
                yield
            finally:
                self.endpoint = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.endpoint is not None:
            await self.endpoint(scope, receive, send)
            return
        from fastapi.responses import JSONResponse

        body = ErrorBody(error="not_implemented", message=INSTALL_HINT)
        await JSONResponse(body.model_dump(), status_code=501)(scope, receive, send)
