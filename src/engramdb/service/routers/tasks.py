"""Task context: the state a worker keeps while sub-agents work on its sub-tasks."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from engramdb.core.errors import NotFoundError
from engramdb.orchestrator.tasks import TaskContext
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Deleted, Page, TaskContextIn, TaskContextUpdate
from engramdb.service.routing import KeyPath, Offset, area_router
from engramdb.service.versions import IfMatch, expected_version, set_etag

router = area_router("/v1/memory/task-context", "task context")


@router.post("", status_code=201, summary="Store a task context")
async def create_task(body: TaskContextIn, caller: WriteCaller, engine: EngineDep) -> TaskContext:
    """Store a new task context; 409 if ``task_id`` is taken in the tenant."""
    task = TaskContext.model_validate(body.model_dump())
    return await caller.memory(engine).tasks.create(task)


@router.get("", summary="List task contexts")
async def list_tasks(
    caller: ReadCaller,
    engine: EngineDep,
    plan_id: Annotated[str | None, Query(min_length=1, max_length=100)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 50,
    offset: Offset = 0,
) -> Page[TaskContext]:
    """Task contexts by id, those of ``plan_id`` only if given."""
    found = await caller.memory(engine).tasks.list(
        filters={"plan_id": plan_id}, limit=limit, offset=offset
    )
    return Page(items=found.items, next_offset=found.next_offset)


@router.get("/by-subtask/{subtask_id}", summary="Find the parent task of a sub-task")
async def task_by_subtask(
    subtask_id: KeyPath, caller: ReadCaller, engine: EngineDep
) -> TaskContext:
    """The task context that lists ``subtask_id`` among its sub-tasks."""
    found = await caller.memory(engine).tasks.by_subtask(subtask_id)
    if found is None:
        raise NotFoundError(
            f"no task context has sub-task {subtask_id!r}", resource="task context", id=subtask_id
        )
    return found


@router.get("/{task_id}", summary="Retrieve a task context")
async def get_task(
    task_id: KeyPath, caller: ReadCaller, engine: EngineDep, response: Response
) -> TaskContext:
    """The task context ``task_id``; its version is the ``ETag``."""
    task = await caller.memory(engine).tasks.get(task_id)
    set_etag(response, task.version)
    return task


@router.put("/{task_id}", summary="Update a task context")
async def update_task(
    task_id: KeyPath,
    body: TaskContextUpdate,
    caller: WriteCaller,
    engine: EngineDep,
    response: Response,
    if_match: IfMatch = None,
) -> TaskContext:
    """Replace the fields the body sets; the others are kept. With ``If-Match``, only over
    that version (409 if the task context changed since)."""
    task = await caller.memory(engine).tasks.update(
        task_id, body.model_dump(exclude_unset=True), expected_version=expected_version(if_match)
    )
    set_etag(response, task.version)
    return task


@router.delete("/{task_id}", summary="Delete a task context")
async def delete_task(
    task_id: KeyPath, caller: WriteCaller, engine: EngineDep, if_match: IfMatch = None
) -> Deleted:
    """Delete the task context ``task_id`` (404 if there is none); with ``If-Match``, only
    that version."""
    await caller.memory(engine).tasks.delete(task_id, expected_version=expected_version(if_match))
    return Deleted(deleted=True)
