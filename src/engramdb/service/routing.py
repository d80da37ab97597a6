"""``area_router``: how every area of the API gets its router — idempotent writes and the
error answers documented on every operation."""

from __future__ import annotations

from fastapi import APIRouter

from engramdb.service.errors import ERROR_RESPONSES
from engramdb.service.idempotency import IdempotentRoute


def area_router(prefix: str, tag: str) -> APIRouter:
    """The router of one area of the API, under ``prefix``."""
    return APIRouter(
        prefix=prefix, tags=[tag], route_class=IdempotentRoute, responses=ERROR_RESPONSES
    )
