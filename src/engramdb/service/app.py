"""``create_app``: the FastAPI application of the REST service.

The application holds no state of its own beyond caches that are safe to lose: every
request reads and writes the database, so several instances may serve one database (on
PostgreSQL; SQLite allows one machine). Given an ``Engine`` it serves that one; given a
database target it opens the engine at start-up and closes it at shutdown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from fastapi import FastAPI
from starlette.routing import Route

import engramdb
from engramdb.asgi import Lifespan, engine_lifespan
from engramdb.engine import Engine, EngineConfig
from engramdb.service import errors
from engramdb.service.docs import install_docs
from engramdb.service.limits import BodyLimit
from engramdb.service.mcp_mount import PATH as MCP_PATH
from engramdb.service.mcp_mount import McpMount
from engramdb.service.routers import ROUTERS
from engramdb.service.routing import operation_id
from engramdb.service.settings import ServiceSettings
from engramdb.service.urls import Utf8Url

DESCRIPTION = """Long-term memory for LLM agents: semantic, episodic, procedural and working
memory, task contexts, plans and sessions, per tenant and user.

Writes accept an `Idempotency-Key` header: the same key replays the first answer."""


def create_app(
    settings: ServiceSettings | None = None,
    *,
    engine: Engine | None = None,
    db: str | Path | None = None,
    config: EngineConfig | None = None,
) -> FastAPI:
    """The application serving ``engine``, or the database ``db`` (opened at start-up
    with ``config``)."""
    chosen = settings or ServiceSettings()
    engine_running = with_bridge(engine_lifespan(engine, db, config, warm=True), chosen)
    mcp = McpMount(chosen)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with engine_running(app), mcp.running(app):
            yield

    app = FastAPI(
        title="Engram memory service",
        version=engramdb.__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served from the package's own files: see install_docs
        redoc_url=None,
        generate_unique_id_function=operation_id,
    )
    app.state.settings = chosen
    app.state.engine = engine
    app.state.known = set()
    errors.install(app)
    install_docs(app)
    for router in ROUTERS:
        app.include_router(router)
    # MCP over streamable HTTP: GET, POST and DELETE as the transport defines them.
    app.router.routes.append(Route(MCP_PATH, mcp, methods=["GET", "POST", "DELETE"]))
    app.add_middleware(BodyLimit, max_bytes=chosen.max_body_bytes)
    app.add_middleware(Utf8Url)
    return app


def with_bridge(lifespan: Lifespan, settings: ServiceSettings) -> Lifespan:
    """``lifespan``, and an event bridge to NATS for its duration when ``settings`` name a
    server (several instances may each run one: duplicates are dropped by event id, and
    each publishes in log order, so the stream stays in log order)."""
    if settings.nats_url is None:
        return lifespan
    url = settings.nats_url

    @asynccontextmanager
    async def bridged(app: FastAPI) -> AsyncIterator[None]:
        from engramdb.bridge.publisher import EventBridge

        async with lifespan(app):
            engine: Engine = app.state.engine
            async with EventBridge(engine.events, url, stream=settings.nats_stream) as bridge:
                app.state.bridge = bridge
                yield

    return bridged
