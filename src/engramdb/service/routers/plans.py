"""Plans: the goals a tenant's agents pursue, listed by status."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from engramdb.engine import Engine
from engramdb.orchestrator.plans import Plan, Plans
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Deleted, Page, PlanIn, PlanUpdate
from engramdb.service.routing import KeyPath, Offset, area_router
from engramdb.service.versions import IfMatch, expected_version, set_etag

router = area_router("/v1/memory/plans", "plans")


async def _owned(caller: Caller, engine: Engine, plan_id: str) -> tuple[Plans, Plan]:
    plans = caller.memory(engine).plans
    found = await plans.get(plan_id)
    caller.check_owner(found.user_id, "plan", plan_id)
    return plans, found


@router.post("", status_code=201, summary="Create a plan")
async def create_plan(body: PlanIn, caller: WriteCaller, engine: EngineDep) -> Plan:
    """Store a new plan of the caller's user; 409 if ``plan_id`` is taken in the tenant."""
    plan = Plan.model_validate({**body.model_dump(), "user_id": caller.user})
    return await caller.memory(engine).plans.create(plan)


@router.get("", summary="List plans")
async def list_plans(
    caller: ReadCaller,
    engine: EngineDep,
    status: Annotated[str | None, Query(min_length=1, max_length=50)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Offset = 0,
) -> Page[Plan]:
    """The caller's plans (every plan of the tenant for a caller without a user), by id,
    with ``status`` only if given."""
    found = await caller.memory(engine).plans.list(
        filters={"status": status, "user_id": caller.user}, limit=limit, offset=offset
    )
    return Page(items=found.items, next_offset=found.next_offset)


@router.get("/{plan_id}", summary="Retrieve a plan")
async def get_plan(
    plan_id: KeyPath, caller: ReadCaller, engine: EngineDep, response: Response
) -> Plan:
    """The plan ``plan_id``; its version is the ``ETag``."""
    plan = (await _owned(caller, engine, plan_id))[1]
    set_etag(response, plan.version)
    return plan


@router.put("/{plan_id}", summary="Update a plan")
async def update_plan(
    plan_id: KeyPath,
    body: PlanUpdate,
    caller: WriteCaller,
    engine: EngineDep,
    response: Response,
    if_match: IfMatch = None,
) -> Plan:
    """Replace the fields the body sets (status, state, …); the others are kept. With
    ``If-Match``, only over that version (409 if the plan changed since)."""
    expected = expected_version(if_match)
    plans, _ = await _owned(caller, engine, plan_id)
    plan = await plans.update(
        plan_id, body.model_dump(exclude_unset=True), expected_version=expected
    )
    set_etag(response, plan.version)
    return plan


@router.delete("/{plan_id}", summary="Delete a plan")
async def delete_plan(
    plan_id: KeyPath, caller: WriteCaller, engine: EngineDep, if_match: IfMatch = None
) -> Deleted:
    """Delete the plan ``plan_id`` (its working state is kept until deleted itself); with
    ``If-Match``, only that version."""
    expected = expected_version(if_match)
    plans, _ = await _owned(caller, engine, plan_id)
    await plans.delete(plan_id, expected_version=expected)
    return Deleted(deleted=True)
