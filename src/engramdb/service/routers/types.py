"""The memory-type registry over REST: ``GET /v1/memory/types`` lists every registered type
(the five built-ins, the memory files' categories, types installed packages declare) and
``/v1/memory/types/{name}/…`` runs the intent operations of any of them — ``memorize``,
``remember``, ``forget``, ``summarize``, ``capacity`` — as ``mem.memory_type(name)`` does in
process and ``engram memorize -t NAME`` on the command line.

A name no type holds is 404 ``not_found`` (its details list the known ones), as is a memory-
file category on a server that keeps no memory files; a name that cannot be a type's (not a
lowercase identifier) is 422 before any lookup. That holds for a name with a slash too
(``a%2Fb``, which the server decodes to ``a/b``): the name takes the whole path up to the
operation (``{name:whole}``), so such a name is refused by its pattern, not by routing.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

from engramdb.core.intent import CapacityInfo, ForgetResult, SummaryResult
from engramdb.core.validation import CONTENT_TYPE_PATTERN, KEY_PATTERN
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.intent_models import (
    ForgetIn,
    MemoryTypeOut,
    MemoryTypes,
    SummarizeIn,
    TypedItemIn,
)
from engramdb.service.models import Items, WriteResult
from engramdb.service.raw_reads import RawReads
from engramdb.service.routers.intent import memory_type
from engramdb.service.routing import area_router  # also registers ``{name:whole}``

router = area_router("/v1/memory/types", "types")
TypeName = Annotated[
    str,
    Path(
        min_length=1,
        max_length=64,
        pattern=CONTENT_TYPE_PATTERN,
        description="A registered memory type (GET /v1/memory/types lists them)",
    ),
]
PlanQuery = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=128,
        pattern=KEY_PATTERN,
        description="The plan whose working memory is meant (working memory only)",
    ),
]


@router.get("", summary="List the registered memory types", operation_id="types_list")
async def list_types(caller: ReadCaller, engine: EngineDep) -> MemoryTypes:
    """Every registered memory type in registration order, with what it holds and whether
    this server offers it (a memory-file category needs the server's memory files)."""
    memory = caller.memory(engine)
    return MemoryTypes(
        items=[
            MemoryTypeOut(
                name=kind.name,
                heading=kind.title,
                share=kind.share,
                description=kind.description,
                offered=memory.offered(kind.name) is not None,
                namespace=kind.spec.namespace if kind.spec is not None else None,
            )
            for kind in engine.memory_types
        ]
    )


@router.post(
    "/{name:whole}/memorize",
    status_code=201,
    summary="Store a memory of a registered type",
    operation_id="types_memorize",
)
async def memorize(
    name: TypeName, body: TypedItemIn, caller: WriteCaller, engine: EngineDep
) -> WriteResult:
    """Store one memory the way the type ``name`` stores things (a fact under its key, an
    episode, a turn, a note of a type of your own); ``evicted`` names what the type let go
    past its limits."""
    plugin = memory_type(caller, engine, name, body.plan_id)
    result = await plugin.memorize(body.item())
    return WriteResult.model_validate(result.model_dump())


@router.get(
    "/{name:whole}/remember",
    summary="Search the memories of a registered type",
    operation_id="types_remember",
)
async def remember(
    name: TypeName,
    caller: ReadCaller,
    engine: EngineDep,
    q: Annotated[str, Query(min_length=1, max_length=10_000)],
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    plan_id: PlanQuery = None,
    raw: RawReads = False,
) -> Items:
    """The memories of the type ``name`` relevant to ``q``, best first, each with its score;
    redacted unless ``raw``."""
    plugin = memory_type(caller, engine, name, plan_id)
    return Items(items=await plugin.remember(q, limit=limit, raw=raw))


@router.post(
    "/{name:whole}/forget",
    summary="Forget memories of a registered type",
    operation_id="types_forget",
)
async def forget(
    name: TypeName, body: ForgetIn, caller: WriteCaller, engine: EngineDep
) -> ForgetResult:
    """Forget what the instruction selects (the forget grammar, in the forms the type
    supports): ``soft`` hides the items (restorable), ``hard`` erases them."""
    plugin = memory_type(caller, engine, name, body.plan_id)
    return await plugin.forget(body.instruction, mode=body.mode)


@router.post(
    "/{name:whole}/summarize",
    summary="Summarize the memories of a registered type",
    operation_id="types_summarize",
)
async def summarize(
    name: TypeName, body: SummarizeIn, caller: ReadCaller, engine: EngineDep, raw: RawReads = False
) -> SummaryResult:
    """A summary of the items ``scope`` selects, at most ``token_limit`` tokens, with the ids
    it drew on; redacted unless ``raw``."""
    plugin = memory_type(caller, engine, name, body.plan_id)
    return await plugin.summarize(body.scope, body.token_limit, raw=raw)


@router.get(
    "/{name:whole}/capacity",
    summary="Capacity of a registered memory type",
    operation_id="types_capacity",
)
async def capacity(
    name: TypeName, caller: ReadCaller, engine: EngineDep, plan_id: PlanQuery = None
) -> CapacityInfo:
    """Items and tokens stored against the type's limits, and its eviction policy."""
    return await memory_type(caller, engine, name, plan_id).get_capacity_info()
