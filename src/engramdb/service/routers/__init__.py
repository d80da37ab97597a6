"""The routers of the API, one per area, registered by the app in this order.

An area joins the API by adding its router here.
"""

from __future__ import annotations

from fastapi import APIRouter

from engramdb.service.routers import (
    entries,
    episodic,
    events,
    formation,
    graph,
    health,
    plans,
    procedural,
    semantic,
    sessions,
    tasks,
    working,
)

ROUTERS: list[APIRouter] = [
    health.router,
    semantic.router,
    episodic.router,
    procedural.router,
    working.router,
    tasks.router,
    plans.router,
    sessions.router,
    entries.router,
    graph.router,
    events.router,
    formation.router,
]
