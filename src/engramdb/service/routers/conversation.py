"""Conversation memory: the rolling buffer of the current session's turns (the session of
``X-Session-ID``), remembered by content or read back in order."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engramdb.core.intent import MemoryItem
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.intent_models import TurnIn
from engramdb.service.models import Items, WriteResult
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import area_router

router = area_router("/v1/memory/conversation", "conversation")
Limit = Annotated[int, Query(ge=1, le=100)]


@router.post(
    "", status_code=201, summary="Add a conversation turn", operation_id="conversation_memorize"
)
async def add_turn(body: TurnIn, caller: WriteCaller, engine: EngineDep) -> WriteResult:
    """Append a turn, numbered after the last one; past the buffer's limits the oldest turns
    are evicted and named in ``evicted``."""
    item = MemoryItem(
        text=body.content,
        role=body.role,
        speaker=body.speaker,
        metadata=body.metadata,
        importance=body.importance,
    )
    result = await caller.memory(engine).conversation.memorize(item)
    return WriteResult.model_validate(result.model_dump())


@router.get("/search", summary="Search the conversation", operation_id="conversation_search")
async def search_turns(
    caller: ReadCaller,
    engine: EngineDep,
    q: Annotated[str, Query(min_length=1, max_length=10_000)],
    limit: Limit = 10,
    raw: RawReads = False,
) -> Items:
    """The turns matching ``q`` by keywords and meaning, best first."""
    memory = caller.memory(engine)
    return Items(items=await memory.conversation.remember(q, limit=limit, raw=raw))


@router.get("/recent", summary="The last turns", operation_id="conversation_recent")
async def recent_turns(
    caller: ReadCaller, engine: EngineDep, limit: Limit = 10, raw: RawReads = False
) -> Items:
    """The last ``limit`` turns, oldest first (as a prompt window wants them)."""
    memory = caller.memory(engine)
    return Items(items=await memory.conversation.recent(limit, raw=raw))
