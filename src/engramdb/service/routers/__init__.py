"""The routers of the API, one per area, registered by the app in this order.

An area joins the API by adding its router here.
"""

from __future__ import annotations

from fastapi import APIRouter

from engramdb.service.routers import (
    conversation,
    entries,
    episodic,
    events,
    formation,
    graph,
    health,
    intent,
    items,
    plans,
    procedural,
    semantic,
    sessions,
    tasks,
    types,
    working,
)

ROUTERS: list[APIRouter] = [
    health.router,
    semantic.router,
    episodic.router,
    procedural.router,
    conversation.router,
    items.router,
    # Before working: /v1/memory/working/capacity is not a plan's state (see intent).
    intent.router,
    types.router,
    working.router,
    tasks.router,
    plans.router,
    sessions.router,
    entries.router,
    graph.router,
    events.router,
    formation.router,
]
