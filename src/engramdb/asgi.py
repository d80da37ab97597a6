"""What the web applications serving an engine share: an engine given, or a database opened
for the application's lifetime (``app.state.engine``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from fastapi import FastAPI

import engramdb
from engramdb.engine import Engine, EngineConfig

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]


def engine_lifespan(
    engine: Engine | None, db: str | Path | None, config: EngineConfig | None, *, warm: bool
) -> Lifespan:
    """The lifespan of an application serving ``engine``, or the database ``db`` opened at
    start-up with ``config`` (and its embedding model loaded first if ``warm``).

    Raises:
        ValueError: neither or both of ``engine`` and ``db`` are given.
    """
    if (engine is None) == (db is None):
        raise ValueError("give exactly one of engine and db")

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if db is None:  # the application was made with the engine in its state
            yield
            return
        async with engramdb.open(db, config=config) as opened:
            app.state.engine = opened
            if warm:
                await opened.indexer.warm()  # the model loads now, not in the first request
            yield

    return lifespan
