"""The intent operations of every memory type (the memory-plugin interface) over REST:
``POST /v1/memory/{type}/forget``, ``POST /v1/memory/{type}/summarize`` and
``GET /v1/memory/{type}/capacity`` for ``working``, ``episodic``, ``semantic``,
``procedural`` and ``conversation``, and ``POST /v1/memory/assemble`` across them.

Working memory over REST is a plan's (as ``/v1/memory/working/{plan_id}/…``), so its
operations name the plan (``plan_id``). This router is registered before the working one:
``GET /v1/memory/working/capacity`` is the capacity of a plan's state, not the state of a
plan called ``capacity`` (whose keys stay readable one by one).
"""

from __future__ import annotations

from typing import Annotated, get_args

from fastapi import APIRouter, Query

from engramdb.core.errors import ValidationError
from engramdb.core.intent import CapacityInfo, ForgetResult, SummaryResult
from engramdb.core.validation import KEY_PATTERN
from engramdb.engine import Engine
from engramdb.orchestrator.budget import Budget
from engramdb.orchestrator.plugin import MemoryPlugin
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.intent_models import (
    AssembledItem,
    AssembledOut,
    AssembleIn,
    ForgetIn,
    MemoryTypeName,
    SummarizeIn,
)
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import area_router

router = area_router("/v1/memory", "assemble")
PlanQuery = Annotated[str | None, Query(min_length=1, max_length=128, pattern=KEY_PATTERN)]
#: How long each memory type may take to answer an assembly over HTTP: a client waits on
#: the network anyway, so a memory missed for a few hundred milliseconds costs more than the
#: wait (within a turn in process the default is 500 ms); still bounded.
ASSEMBLE_TIME_LIMIT_MS = 5000.0


def memory_type(caller: Caller, engine: Engine, name: str, plan_id: str | None) -> MemoryPlugin:
    """The registered memory type ``name`` of the caller (working memory: of the plan
    ``plan_id``).

    Raises:
        ValidationError: working memory without ``plan_id``, or ``plan_id`` on another type.
        NotFoundError: no such type is registered, or this server does not offer it.
    """
    if name == "working":
        if plan_id is None:
            raise ValidationError("working memory is a plan's: name it with plan_id")
        return engine.scope(tenant=caller.tenant, plan=plan_id).memory_type(name)
    if plan_id is not None:
        raise ValidationError(f"plan_id names a plan's working memory, not {name}")
    return caller.memory(engine).memory_type(name)


def _add_routes(target: APIRouter, name: MemoryTypeName) -> None:
    @target.post(
        f"/{name}/forget",
        summary=f"Forget {name} memories",
        operation_id=f"{name}_forget",
        tags=[name],
    )
    async def forget(body: ForgetIn, caller: WriteCaller, engine: EngineDep) -> ForgetResult:
        """Forget what the instruction selects (the forget grammar): ``soft`` hides the
        items (restorable), ``hard`` erases them; the answer names them."""
        plugin = memory_type(caller, engine, name, body.plan_id)
        return await plugin.forget(body.instruction, mode=body.mode)

    @target.post(
        f"/{name}/summarize",
        summary=f"Summarize {name} memory",
        operation_id=f"{name}_summarize",
        tags=[name],
    )
    async def summarize(
        body: SummarizeIn, caller: ReadCaller, engine: EngineDep, raw: RawReads = False
    ) -> SummaryResult:
        """A summary of the items ``scope`` selects, at most ``token_limit`` tokens, with the
        ids it drew on; redacted unless ``raw``."""
        plugin = memory_type(caller, engine, name, body.plan_id)
        return await plugin.summarize(body.scope, body.token_limit, raw=raw)

    @target.get(
        f"/{name}/capacity",
        summary=f"Capacity of {name} memory",
        operation_id=f"{name}_capacity",
        tags=[name],
    )
    async def capacity(
        caller: ReadCaller, engine: EngineDep, plan_id: PlanQuery = None
    ) -> CapacityInfo:
        """Items and tokens stored against the type's limits, and its eviction policy."""
        return await memory_type(caller, engine, name, plan_id).get_capacity_info()


for _name in get_args(MemoryTypeName):
    _add_routes(router, _name)


@router.post("/assemble", summary="Assemble the context of a turn", operation_id="assemble")
async def assemble(body: AssembleIn, caller: ReadCaller, engine: EngineDep) -> AssembledOut:
    """The context for ``prompt`` from every memory type at once — rules that apply, facts,
    past episodes, the recent conversation, working notes — within ``token_limit``, always
    redacted, and traced in the event log. ``incomplete`` names the types that did not
    answer in time."""
    budget = Budget(token_limit=body.token_limit, time_limit_ms=ASSEMBLE_TIME_LIMIT_MS)
    context = await caller.memory(engine).assemble(body.prompt, budget=budget)
    operations = context.trace.operations if context.trace is not None else []
    return AssembledOut(
        text=context.text,
        tokens=context.tokens,
        items=[
            AssembledItem(memory_type=c.memory_type, item=c.item, tokens=c.tokens)
            for c in context.items
        ],
        incomplete=sorted({op.memory_type for op in operations if op.status != "ok"}),
    )
