"""``area_router``: how every area of the API gets its router — idempotent writes and the
error answers documented on every operation."""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.routing import APIRoute
from starlette.convertors import Convertor, register_url_convertor

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


class WholeNameConvertor(Convertor[str]):
    """A path parameter (``{name:whole}``) that takes every character up to the route's next
    literal part, slashes (``%2F``) and line breaks included: a name holding them reaches its
    route and is refused there by its pattern, with the answer any other bad name gets,
    instead of missing every route (a bare 404)."""

    regex = "(?s:.+)"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("whole", WholeNameConvertor())


def area_router(prefix: str, tag: str) -> APIRouter:
    """The router of one area of the API, under ``prefix``."""
    return APIRouter(
        prefix=prefix, tags=[tag], route_class=IdempotentRoute, responses=ERROR_RESPONSES
    )


#: Operation names of the memory-service spec's routes that read better than their handlers'.
_READABLE: dict[tuple[str, str], str] = {
    ("semantic", "add_knowledge"): "memorize",
    ("semantic", "upsert_knowledge"): "upsert",
    ("semantic", "search_knowledge"): "search",
    ("episodic", "add_episode"): "memorize",
    ("episodic", "recent_episodes"): "recent",
    ("episodic", "search_episodes"): "search",
    ("procedural", "add_procedure"): "memorize",
    ("procedural", "procedural_context"): "context",
    ("working", "set_state"): "set",
    ("working", "get_state"): "get",
    ("working", "get_plan_state"): "get_plan",
    ("working", "delete_state"): "delete",
    ("working", "clear_plan"): "clear",
}


def operation_id(route: APIRoute) -> str:
    """The OpenAPI ``operationId`` of ``route``: ``<area>_<operation>`` (``episodic_search``,
    ``graph_add_entity``), stable across releases since generated clients name their
    methods after it. A route's own ``operation_id`` wins."""
    tag = re.sub(r"\W+", "_", str(route.tags[0]).lower()) if route.tags else "engram"
    name = _READABLE.get((tag, route.name), route.name)
    return name if name == tag or name.startswith(f"{tag}_") else f"{tag}_{name}"
