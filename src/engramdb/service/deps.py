"""The dependencies routers share: the engine of the application."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request

from engramdb.engine import Engine


def get_engine(request: Request) -> Engine:
    """The engine the application serves."""
    engine: Engine = request.app.state.engine
    return engine


EngineDep = Annotated[Engine, Depends(get_engine)]
