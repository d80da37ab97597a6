"""Working memory: the shared key/value state of a plan, seen by every agent of the tenant
working on it."""

from __future__ import annotations

from fastapi import Response

from engramdb.core.errors import NotFoundError
from engramdb.engine import Engine
from engramdb.orchestrator.working import WorkingMemory
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Cleared, Deleted, PlanState, StateIn, StateOut
from engramdb.service.routing import KeyPath, PlanPath, area_router
from engramdb.service.versions import IfMatch, IfNoneMatch, expected_version, set_etag

router = area_router("/v1/memory/working", "working")


def _plan(caller: Caller, engine: Engine, plan_id: str) -> WorkingMemory:
    # The plan's state is the tenant's, not one user's: every agent on the plan shares it.
    return engine.scope(tenant=caller.tenant, plan=plan_id).working


@router.put("/{plan_id}/{key}", summary="Set shared state")
async def set_state(
    plan_id: PlanPath,
    key: KeyPath,
    body: StateIn,
    caller: WriteCaller,
    engine: EngineDep,
    response: Response,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> StateOut:
    """Set ``key`` of the plan's state to ``value``. With ``If-Match``, only over that version
    (409 if it changed since, 404 if unset); with ``If-None-Match: *``, only if unset (409)."""
    version = await _plan(caller, engine, plan_id).set(
        key,
        body.value,
        expected_version=expected_version(if_match),
        create=if_none_match is not None,
    )
    set_etag(response, version)
    return StateOut(plan_id=plan_id, key=key, value=body.value, version=version)


@router.get("/{plan_id}/{key}", summary="Get shared state")
async def get_state(
    plan_id: PlanPath, key: KeyPath, caller: ReadCaller, engine: EngineDep, response: Response
) -> StateOut:
    """The value of ``key`` in the plan's state; its version is the ``ETag``."""
    found = await _plan(caller, engine, plan_id).versioned(key)
    if found is None:
        raise NotFoundError(
            f"plan {plan_id!r} has no state {key!r}", resource="state", id=key, plan_id=plan_id
        )
    set_etag(response, found[1])
    return StateOut(plan_id=plan_id, key=key, value=found[0], version=found[1])


@router.get("/{plan_id}", summary="Get all shared state of a plan")
async def get_plan_state(plan_id: PlanPath, caller: ReadCaller, engine: EngineDep) -> PlanState:
    """Every key of the plan's state."""
    return PlanState(plan_id=plan_id, state=await _plan(caller, engine, plan_id).state())


@router.delete("/{plan_id}/{key}", summary="Delete one state key")
async def delete_state(
    plan_id: PlanPath,
    key: KeyPath,
    caller: WriteCaller,
    engine: EngineDep,
    if_match: IfMatch = None,
) -> Deleted:
    """Delete ``key`` of the plan's state; ``deleted`` is false if it was not there. With
    ``If-Match``, only that version (409 if it changed since, 404 if unset)."""
    deleted = await _plan(caller, engine, plan_id).delete(
        key, expected_version=expected_version(if_match)
    )
    return Deleted(deleted=deleted)


@router.delete("/{plan_id}", summary="Delete all state of a plan")
async def clear_plan(plan_id: PlanPath, caller: WriteCaller, engine: EngineDep) -> Cleared:
    """Delete every key of the plan's state; returns how many."""
    return Cleared(deleted=await _plan(caller, engine, plan_id).clear())
