"""MCP over streamable HTTP inside the REST service (``/mcp``), with the REST service's
credentials.

Every HTTP request is authenticated as a REST request is (an API key or a JWT, the
``X-Tenant-ID`` / ``X-User-ID`` / ``X-Agent-ID`` / ``X-Session-ID`` headers checked against
them) before the SDK sees it, and the messages it carries work in that caller's scope. The
transport is stateless, as the service is: any instance answers any request.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.types import Receive, Scope, Send

from engramdb.core.errors import EngramError
from engramdb.core.scope import Scope as MemoryScope
from engramdb.engine import Engine
from engramdb.mcp.binding import Binding
from engramdb.mcp.server import build_server
from engramdb.service.auth import Caller, request_access
from engramdb.service.errors import error_response
from engramdb.service.settings import ServiceSettings

PATH = "/mcp"
_CALLER = "engram.caller"
_ENGINE = "engram.engine"

#: Local mode takes requests without credentials, so a web page the user visits must not
#: reach it through a rebound DNS name: only local host names are let in. With credentials
#: required, a browser cannot send them cross-site, and the service may sit behind any name.
_LOCAL_ONLY = TransportSecuritySettings(
    enable_dns_rebinding_protection=True,
    allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
    allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
)
_ANY_HOST = TransportSecuritySettings(enable_dns_rebinding_protection=False)


async def http_binding(request: Any) -> Binding:
    """The binding of a message: the scope of the request that carried it, as authenticated
    by ``McpEndpoint``."""
    caller: Caller = request.scope[_CALLER]
    engine: Engine = request.scope[_ENGINE]
    scope = MemoryScope(
        tenant=caller.tenant, user=caller.user, agent=caller.agent, session=caller.session
    )
    return Binding(engine, scope, may_write=caller.principal.role == "writer")


class McpEndpoint:
    """The ASGI endpoint of ``/mcp``: authenticates, then hands over to the SDK's transport."""

    def __init__(self, app: FastAPI, settings: ServiceSettings) -> None:
        self.app = app
        self.server = build_server(http_binding)
        security = _LOCAL_ONLY if settings.auth == "local" else _ANY_HOST
        self.transport = self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            transport_security=security,
        )

    @asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """Run the transport's task group for the application's lifetime."""
        async with self.server.session_manager.run():
            yield

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        try:
            caller = await request_access(request, write=False)
        except EngramError as exc:
            await error_response(exc)(scope, receive, send)
            return
        bound = {**scope, _CALLER: caller, _ENGINE: self.app.state.engine}
        await self.transport(bound, receive, send)
