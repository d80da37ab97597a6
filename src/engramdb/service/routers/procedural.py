"""Procedural memory: rules and examples injected when their trigger matches."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engramdb.core.intent import MemoryItem
from engramdb.service.acting import acting_memory
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Items, ProcedureIn, WriteResult
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import area_router

router = area_router("/v1/memory/procedural", "procedural")


@router.post("", status_code=201, summary="Store a rule or example")
async def add_procedure(body: ProcedureIn, caller: WriteCaller, engine: EngineDep) -> WriteResult:
    """Store a system-prompt rule or a few-shot example for the caller's user and agent (or
    the body's ``user_id`` / ``agent_id``, if the caller may act for them); the trigger is
    ``trigger`` or, as the memory-service spec names it, ``trigger_condition``."""
    metadata = dict(body.metadata)
    if body.trigger is not None:
        metadata["trigger"] = body.trigger
    item = MemoryItem(
        text=body.content,
        key=body.key,
        kind="rule" if body.procedure_type == "system_prompt" else "example",
        metadata=metadata,
        importance=body.importance,
    )
    memory = acting_memory(caller, engine, body.user_id, body.agent_id)
    result = await memory.procedural.memorize(item)
    return WriteResult.model_validate(result.model_dump())


@router.get("/context", summary="Fetch relevant rules and prompts")
async def procedural_context(
    caller: ReadCaller,
    engine: EngineDep,
    q: Annotated[str, Query(min_length=1, max_length=10_000)],
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    raw: RawReads = False,
) -> Items:
    """Rules whose trigger fires on ``q`` first, then the closest by meaning."""
    memory = caller.memory(engine)
    return Items(items=await memory.procedural.remember(q, limit=limit, raw=raw))
