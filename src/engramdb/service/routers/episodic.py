"""Episodic memory: the interactions of a user/agent pair, recalled by recency or content."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Query

from engramdb.core.intent import MemoryItem
from engramdb.orchestrator.recent import recent_items
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import EpisodeIn, Items, WriteResult
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import area_router

router = area_router("/v1/memory/episodic", "episodic")
Limit = Annotated[int, Query(ge=1, le=100)]


@router.post("", status_code=201, summary="Log an interaction")
async def add_episode(body: EpisodeIn, caller: WriteCaller, engine: EngineDep) -> WriteResult:
    """Append one interaction to the caller's episodic log."""
    item = MemoryItem(
        text=body.content,
        role=body.role,
        speaker=body.speaker,
        occurred_at=body.occurred_at,
        metadata=body.metadata,
        importance=body.importance,
        tags=body.tags,
    )
    result = await caller.memory(engine).episodic.memorize(item)
    return WriteResult.model_validate(result.model_dump())


@router.get("/recent", summary="Fetch recent history")
async def recent_episodes(
    caller: ReadCaller, engine: EngineDep, limit: Limit = 20, raw: RawReads = False
) -> Items:
    """The latest interactions, newest first."""
    episodic = caller.memory(engine).episodic
    return Items(items=episodic.redacted(await recent_items(episodic, limit), raw))


@router.get("/search", summary="Long-term recall")
async def search_episodes(
    caller: ReadCaller,
    engine: EngineDep,
    q: Annotated[str, Query(min_length=1, max_length=10_000)],
    limit: Limit = 10,
    since: datetime | None = None,
    until: datetime | None = None,
    raw: RawReads = False,
) -> Items:
    """The interactions most relevant to ``q``, best first; a time ``q`` names ("last
    week") boosts interactions from then, ``since``/``until`` filter strictly."""
    memory = caller.memory(engine)
    found = await memory.episodic.remember(q, limit=limit, since=since, until=until, raw=raw)
    return Items(items=found)
