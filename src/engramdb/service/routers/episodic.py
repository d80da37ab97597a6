"""Episodic memory: the interactions of a user/agent pair, recalled by recency or content."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import Query

from engramdb.core.intent import MemoryItem
from engramdb.orchestrator.recent import recent_items
from engramdb.service.acting import acting_memory
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.intent_models import EpisodesIn, WriteResults
from engramdb.service.models import EpisodeIn, Items, WriteResult
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import area_router

router = area_router("/v1/memory/episodic", "episodic")
Limit = Annotated[int, Query(ge=1, le=100)]


def episode_item(body: EpisodeIn) -> MemoryItem:
    """The episode a request body describes."""
    return MemoryItem(
        text=body.content,
        role=body.role,
        speaker=body.speaker,
        occurred_at=body.occurred_at,
        metadata=body.metadata,
        importance=body.importance,
        tags=body.tags,
    )


@router.post("", status_code=201, summary="Log an interaction")
async def add_episode(body: EpisodeIn, caller: WriteCaller, engine: EngineDep) -> WriteResult:
    """Append one interaction to the episodic log of the caller (or of the body's
    ``user_id`` / ``agent_id``, if the caller may act for them)."""
    memory = acting_memory(caller, engine, body.user_id, body.agent_id)
    result = await memory.episodic.memorize(episode_item(body))
    return WriteResult.model_validate(result.model_dump())


@router.post(
    "/batch",
    status_code=201,
    summary="Log interactions in one transaction",
    operation_id="episodic_memorize_many",
)
async def add_episodes(body: EpisodesIn, caller: WriteCaller, engine: EngineDep) -> WriteResults:
    """Append every interaction of ``items`` to the caller's episodic log (or that of the
    body's ``user_id`` / ``agent_id``) in one transaction: all are stored, or none."""
    memory = acting_memory(caller, engine, body.user_id, body.agent_id)
    results = await memory.episodic.memorize_many([episode_item(e) for e in body.items])
    return WriteResults(items=[WriteResult.model_validate(r.model_dump()) for r in results])


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
