"""Semantic memory: facts and knowledge, private to a user unless public, deduplicated on
request (``/upsert``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engramdb.core.intent import MemoryItem
from engramdb.engine import ScopedMemory
from engramdb.service.acting import acting_memory
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import Items, KnowledgeIn, KnowledgeUpsertIn, WriteResult
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import area_router

router = area_router("/v1/memory/semantic", "semantic")
Limit = Annotated[int, Query(ge=1, le=100)]


def _item(body: KnowledgeIn) -> MemoryItem:
    return MemoryItem(
        text=body.content, key=body.key, metadata=body.metadata, importance=body.importance
    )


def _shared(body: KnowledgeIn, memory: ScopedMemory) -> bool:
    # Knowledge is the tenant's unless a user restricts it: a fact stored for no user
    # would otherwise sit in a partition no user of the tenant ever searches.
    return body.public or memory.scope.user is None


@router.post("", status_code=201, summary="Ingest knowledge")
async def add_knowledge(body: KnowledgeIn, caller: WriteCaller, engine: EngineDep) -> WriteResult:
    """Store a fact: private to ``user_id`` (default: the caller's user), or shared with the
    whole tenant when ``public`` or stored for no user at all. A new value for an existing
    ``key`` becomes its next version."""
    memory = acting_memory(caller, engine, body.user_id, body.agent_id)
    result = await memory.semantic.memorize(_item(body), public=_shared(body, memory))
    return WriteResult.model_validate(result.model_dump())


@router.post("/upsert", summary="Ingest knowledge without duplicates")
async def upsert_knowledge(
    body: KnowledgeUpsertIn, caller: WriteCaller, engine: EngineDep
) -> WriteResult:
    """Store a fact unless a near-identical one (similarity ≥ ``dedupe_threshold``) is
    stored, in which case that one is updated: ``status`` says which."""
    memory = acting_memory(caller, engine, body.user_id, body.agent_id)
    result = await memory.semantic.memorize(
        _item(body), public=_shared(body, memory), dedupe_threshold=body.dedupe_threshold
    )
    return WriteResult.model_validate(result.model_dump())


@router.get("/search", summary="Semantic retrieval")
async def search_knowledge(
    caller: ReadCaller,
    engine: EngineDep,
    q: Annotated[str, Query(min_length=1, max_length=10_000)],
    limit: Limit = 10,
    user_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    raw: RawReads = False,
) -> Items:
    """The facts most relevant to ``q``: the user's private ones and the tenant's public
    ones, best first."""
    memory = caller.memory(engine, user=caller.acting_as(user_id))
    return Items(items=await memory.semantic.remember(q, limit=limit, raw=raw))
