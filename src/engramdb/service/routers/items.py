"""One memory at a time: delete (soft, restorable, or hard) and restore an episode, a fact or
a rule by id; read a fact's history.

A semantic id names the caller's private fact, else the tenant's public one of that key.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

from engramdb.core.errors import NotFoundError
from engramdb.engine import Engine
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.service.acting import acting_memory
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.intent_models import ForgetMode, ItemChanged, ItemTypeName
from engramdb.service.models import Items
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import KeyPath, area_router

router = area_router("/v1/memory", "items")
ITEM_TYPES: tuple[ItemTypeName, ...] = ("episodic", "semantic", "procedural")


def _providers(caller: Caller, engine: Engine, name: ItemTypeName) -> list[EventSourcedProvider]:
    memory = caller.memory(engine)
    if name == "semantic":
        return [memory.semantic.provider, memory.semantic.public]
    return [memory.episodic.provider if name == "episodic" else memory.procedural.provider]


def _missing(name: str, item_id: str, what: str) -> NotFoundError:
    return NotFoundError(f"no {what} {name} item {item_id!r}", resource=name, id=item_id)


def _add_routes(name: ItemTypeName) -> None:
    @router.delete(
        f"/{name}/{{item_id}}",
        summary=f"Delete one {name} item",
        operation_id=f"{name}_delete",
        tags=[name],
    )
    async def delete_item(
        item_id: KeyPath,
        caller: WriteCaller,
        engine: EngineDep,
        mode: Annotated[ForgetMode, Query(description="soft: hidden, restorable")] = "soft",
    ) -> ItemChanged:
        """Forget the item ``item_id``: ``soft`` hides it (``/restore`` brings it back),
        ``hard`` erases it and its content from the event log. 404 if there is no such
        live item (or, for ``soft``, if it is already hidden)."""
        for provider in _providers(caller, engine, name):
            if await provider.forget(item_id, mode):
                status = "forgotten" if mode == "soft" else "deleted"
                return ItemChanged(id=item_id, memory_type=name, status=status)
        raise _missing(name, item_id, "live" if mode == "soft" else "stored")

    @router.post(
        f"/{name}/{{item_id}}/restore",
        summary=f"Restore a soft-forgotten {name} item",
        operation_id=f"{name}_restore",
        tags=[name],
    )
    async def restore_item(item_id: KeyPath, caller: WriteCaller, engine: EngineDep) -> ItemChanged:
        """Make a soft-forgotten item visible again; 404 if it is not soft-forgotten (never
        forgotten, or erased by a hard delete)."""
        for provider in _providers(caller, engine, name):
            if await provider.restore(item_id):
                return ItemChanged(id=item_id, memory_type=name, status="restored")
        raise _missing(name, item_id, "soft-forgotten")


for _name in ITEM_TYPES:
    _add_routes(_name)


@router.get(
    "/semantic/{key}/history",
    summary="Every version of a fact",
    operation_id="semantic_history",
    tags=["semantic"],
)
async def fact_history(
    key: KeyPath,
    caller: ReadCaller,
    engine: EngineDep,
    user_id: Annotated[str | None, Query(min_length=1, max_length=128)] = None,
    raw: RawReads = False,
) -> Items:
    """Every version of the fact ``key`` (the caller's, else the tenant's public one), newest
    first, superseded ones marked, with their validity; 404 if the fact was never stored."""
    memory = acting_memory(caller, engine, user_id)
    versions = await memory.semantic.history(key, raw=raw)
    if not versions:
        raise _missing("semantic", key, "stored")
    return Items(items=versions)
