"""``area_router``: how every area of the API gets its router — idempotent writes and the
error answers documented on every operation."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Query

from engramdb.core.validation import KEY_PATTERN
from engramdb.orchestrator.resources import MAX_OFFSET
from engramdb.service.errors import ERROR_RESPONSES
from engramdb.service.idempotency import IdempotentRoute

#: A key or resource id in a path, documented as the engine checks it.
KeyPath = Annotated[str, Path(min_length=1, max_length=512, pattern=KEY_PATTERN)]
#: A plan id in a path: a scope level.
PlanPath = Annotated[str, Path(min_length=1, max_length=128, pattern=KEY_PATTERN)]

#: Where a page of a list starts.
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
#: A position in the event log (positions are 64-bit integers in every backend).
Position = Annotated[int, Query(ge=0, le=2**62, description="Only events after this position")]


def area_router(prefix: str, tag: str) -> APIRouter:
    """The router of one area of the API, under ``prefix``."""
    return APIRouter(
        prefix=prefix, tags=[tag], route_class=IdempotentRoute, responses=ERROR_RESPONSES
    )
