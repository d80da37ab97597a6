"""The event log, as the caller may see it: its tenant's events (its user's only, for
credentials bound to a user)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engramdb.core.scope import Level, Scope, ScopeFilter
from engramdb.orchestrator.idempotency import IDEMPOTENCY_SPEC
from engramdb.orchestrator.tenancy import TENANCY_SPECS
from engramdb.service.auth import ReadCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import EventPage
from engramdb.service.routing import Position, area_router
from engramdb.storage.backend import EventQuery

router = area_router("/v1/events", "events")
#: Bookkeeping of the service itself (credentials, stored answers), not the tenant's history.
HIDDEN = frozenset(spec.namespace for spec in (*TENANCY_SPECS, IDEMPOTENCY_SPEC))


@router.get("", summary="Read the event log")
async def read_events(
    caller: ReadCaller,
    engine: EngineDep,
    after: Position = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    event_type: Annotated[list[str] | None, Query(max_length=32)] = None,
) -> EventPage:
    """Events in log order from ``after``; page on with ``after=next_cursor`` (a page may
    hold fewer than ``limit`` events: those of credentials and stored answers are left
    out)."""
    bound = caller.principal.user
    levels: tuple[Level, ...] = ("tenant", "user") if bound else ("tenant",)
    found = await engine.events.read(
        EventQuery(
            event_types=tuple(event_type) if event_type else None,
            scope=ScopeFilter(Scope(tenant=caller.tenant, user=bound), levels),
            after=after,
            limit=limit,
        )
    )
    full = len(found) == limit and found[-1].position is not None
    shown = [e for e in found if e.provider_id not in HIDDEN]
    return EventPage(events=shown, next_cursor=found[-1].position if full else None)
