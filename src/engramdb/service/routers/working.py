"""Working memory: the shared key/value state of a plan, seen by every agent of the tenant
working on it."""

from __future__ import annotations

from engramdb.core.errors import NotFoundError
from engramdb.engine import Engine
from engramdb.orchestrator.working import WorkingMemory
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Cleared, Deleted, PlanState, StateIn, StateOut
from engramdb.service.routing import KeyPath, PlanPath, area_router

router = area_router("/v1/memory/working", "working")
_MISSING = object()


def _plan(caller: Caller, engine: Engine, plan_id: str) -> WorkingMemory:
    # The plan's state is the tenant's, not one user's: every agent on the plan shares it.
    return engine.scope(tenant=caller.tenant, plan=plan_id).working


@router.put("/{plan_id}/{key}", summary="Set shared state")
async def set_state(
    plan_id: PlanPath, key: KeyPath, body: StateIn, caller: WriteCaller, engine: EngineDep
) -> StateOut:
    """Set ``key`` of the plan's state to ``value``."""
    await _plan(caller, engine, plan_id).set(key, body.value)
    return StateOut(plan_id=plan_id, key=key, value=body.value)


@router.get("/{plan_id}/{key}", summary="Get shared state")
async def get_state(
    plan_id: PlanPath, key: KeyPath, caller: ReadCaller, engine: EngineDep
) -> StateOut:
    """The value of ``key`` in the plan's state."""
    value = await _plan(caller, engine, plan_id).get(key, _MISSING)
    if value is _MISSING:
        raise NotFoundError(
            f"plan {plan_id!r} has no state {key!r}", resource="state", id=key, plan_id=plan_id
        )
    return StateOut(plan_id=plan_id, key=key, value=value)


@router.get("/{plan_id}", summary="Get all shared state of a plan")
async def get_plan_state(plan_id: PlanPath, caller: ReadCaller, engine: EngineDep) -> PlanState:
    """Every key of the plan's state."""
    return PlanState(plan_id=plan_id, state=await _plan(caller, engine, plan_id).state())


@router.delete("/{plan_id}/{key}", summary="Delete one state key")
async def delete_state(
    plan_id: PlanPath, key: KeyPath, caller: WriteCaller, engine: EngineDep
) -> Deleted:
    """Delete ``key`` of the plan's state; ``deleted`` is false if it was not there."""
    return Deleted(deleted=await _plan(caller, engine, plan_id).delete(key))


@router.delete("/{plan_id}", summary="Delete all state of a plan")
async def clear_plan(plan_id: PlanPath, caller: WriteCaller, engine: EngineDep) -> Cleared:
    """Delete every key of the plan's state; returns how many."""
    return Cleared(deleted=await _plan(caller, engine, plan_id).clear())
