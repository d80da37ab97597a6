"""Liveness: answers without credentials once the database answers."""

from __future__ import annotations

from fastapi import APIRouter, Request

from engramdb.service.deps import EngineDep
from engramdb.service.errors import ERROR_RESPONSES
from engramdb.service.models import Health

router = APIRouter(tags=["health"], responses={503: ERROR_RESPONSES[503]})


@router.get("/healthz", summary="Liveness and readiness")
async def health(request: Request, engine: EngineDep) -> Health:
    """``ok`` when the service runs and its database answers."""
    from engramdb import __version__

    # Reads the provider registrations: a query any login may run (a service login may not
    # read across tenants), and it keeps this instance's registry fresh.
    await engine.registry.refresh()
    bridge = getattr(request.app.state, "bridge", None)
    return Health(
        version=__version__,
        auth=request.app.state.settings.auth,
        bridge=(await bridge.health()).to_dict() if bridge is not None else None,
    )
