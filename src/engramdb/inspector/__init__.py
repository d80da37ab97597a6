"""The web inspector: a read-only look into an Engram database in the browser (``engram
inspect``): counts, the scopes active lately, each scope's memories, a recall with every hit's
score parts drawn as bars, its graph as a picture, its context-assembly traces, and the event
log.

It reads every tenant, so it listens on the loopback interface unless told otherwise and is
never part of the REST service.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse

from engramdb.asgi import engine_lifespan
from engramdb.core.errors import InvalidScopeError
from engramdb.core.scope import DEFAULT_TENANT, Scope
from engramdb.engine import Engine, EngineConfig
from engramdb.inspector.html import esc, page, section
from engramdb.inspector.views import event_log, overview, scope_page

__all__ = ["create_inspector"]

Level = Annotated[str | None, Query(max_length=128)]


def create_inspector(
    *,
    engine: Engine | None = None,
    db: str | Path | None = None,
    config: EngineConfig | None = None,
) -> FastAPI:
    """The inspector of ``engine``, or of the database ``db`` (opened at start-up)."""
    lifespan = engine_lifespan(engine, db, config, warm=False)
    app = FastAPI(title="Engram inspector", lifespan=lifespan, docs_url=None, redoc_url=None)
    app.state.engine = engine

    @app.exception_handler(InvalidScopeError)
    async def bad_scope(request: Request, exc: InvalidScopeError) -> HTMLResponse:
        body = section("Not a scope", f"<p>{esc(exc.message)}</p>")
        return HTMLResponse(page("Not a scope", body), status_code=422)

    @app.get("/", response_class=HTMLResponse)
    async def home(request: Request) -> str:
        return await overview(request.app.state.engine)

    @app.get("/scope", response_class=HTMLResponse)
    async def scope(
        request: Request,
        tenant: Level = None,
        user: Level = None,
        agent: Level = None,
        session: Level = None,
        plan: Level = None,
        q: Annotated[str, Query(max_length=2000)] = "",
    ) -> str:
        chosen = Scope(
            tenant=tenant or DEFAULT_TENANT, user=user, agent=agent, session=session, plan=plan
        )
        return await scope_page(request.app.state.engine, chosen, q.strip())

    @app.get("/events", response_class=HTMLResponse)
    async def events(request: Request, after: Annotated[int, Query(ge=0)] = 0) -> str:
        return await event_log(request.app.state.engine, after)

    return app
