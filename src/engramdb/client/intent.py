"""``IntentCalls``: the intent operations of ``MemoryClient`` — ``forget``, ``summarize``,
``get_capacity_info`` of each memory type, ``assemble`` across them, the conversation buffer,
batches of episodes, one memory's delete and restore, a fact's history, and the registry of
memory types (``list_memory_types``, ``memorize`` and ``remember`` of any registered type) —
named as the engine names them, with the memory type as first argument where the engine has
one method per type (``mem.episodic.forget(…)`` is ``client.forget("episodic", …)``,
``mem.memory_type("notes").memorize(…)`` is ``client.memorize("notes", …)``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar, get_args

import httpx
from pydantic import BaseModel

from engramdb.client.fields import given, raw_param, segment
from engramdb.core.intent import CapacityInfo, ForgetResult, MemoryItem, SummaryResult
from engramdb.service.intent_models import (
    AssembledOut,
    ForgetMode,
    ItemChanged,
    ItemTypeName,
    MemoryTypeName,
    MemoryTypeOut,
    MemoryTypes,
    WriteResults,
)
from engramdb.service.models import Items, WriteResult

M = TypeVar("M", bound=BaseModel)
Role = Literal["user", "assistant", "system", "tool"]
_PREFIX = "/v1/memory"
#: The types with endpoints of their own (``/v1/memory/episodic/forget``); any other
#: registered type is reached under ``/v1/memory/types/{name}``.
_OWN_PATHS = frozenset(get_args(MemoryTypeName))


def type_path(memory_type: str, operation: str) -> str:
    """The path of ``operation`` of the registered type ``memory_type``."""
    if memory_type in _OWN_PATHS:
        return f"{_PREFIX}/{memory_type}/{operation}"
    return f"{_PREFIX}/types/{segment(memory_type)}/{operation}"


class IntentCalls:
    """The intent operations of the client (mixed into ``MemoryClient``)."""

    #: ``MemoryClient.request``: one request, retried under one idempotency key.
    request: Callable[..., Awaitable[httpx.Response]]

    async def _call(self, model: type[M], method: str, path: str, **kwargs: Any) -> M:
        response = await self.request(method, path, **kwargs)
        return model.model_validate(response.json())

    # -- every memory type -------------------------------------------------------------------

    async def forget(
        self,
        memory_type: MemoryTypeName | str,
        instruction: str,
        *,
        mode: ForgetMode = "soft",
        plan_id: str | None = None,
    ) -> ForgetResult:
        """Forget the memories of ``memory_type`` that ``instruction`` selects, in the forget
        grammar (``id:<id>``, ``oldest 3``, ``before 2026-01-01``, ``matching "x"``, ``all``,
        …): ``soft`` hides them (restorable), ``hard`` erases them. Working memory is a
        plan's: name it with ``plan_id``. Any registered type may be named
        (``list_memory_types``).

        Raises:
            InvalidForgetInstructionError: the instruction is not one the type understands.
            NotFoundError: no such type is registered, or the service does not offer it.
        """
        body = given(instruction=instruction, mode=mode, plan_id=plan_id)
        path = type_path(memory_type, "forget")
        return await self._call(ForgetResult, "POST", path, json=body)

    async def summarize(
        self,
        memory_type: MemoryTypeName | str,
        *,
        scope: str = "all",
        token_limit: int = 500,
        plan_id: str | None = None,
        raw: bool = False,
    ) -> SummaryResult:
        """A summary of the memories of ``memory_type`` that ``scope`` selects (``all``,
        ``recent``, ``important``, ``by_tag:<tag>``, ``since <date>``, …), at most
        ``token_limit`` tokens, redacted unless ``raw``."""
        body = given(scope=scope, token_limit=token_limit, plan_id=plan_id)
        path = type_path(memory_type, "summarize")
        return await self._call(SummaryResult, "POST", path, json=body, params=raw_param(raw))

    async def get_capacity_info(
        self, memory_type: MemoryTypeName | str, *, plan_id: str | None = None
    ) -> CapacityInfo:
        """Items and tokens stored in ``memory_type`` against its limits."""
        path = type_path(memory_type, "capacity")
        return await self._call(CapacityInfo, "GET", path, params={"plan_id": plan_id})

    async def assemble(self, prompt: str, *, token_limit: int = 2000) -> AssembledOut:
        """The context for ``prompt`` from every memory type, within ``token_limit``,
        redacted (``incomplete`` names the types that did not answer in time)."""
        body = {"prompt": prompt, "token_limit": token_limit}
        return await self._call(AssembledOut, "POST", f"{_PREFIX}/assemble", json=body)

    # -- the registry of memory types -------------------------------------------------------

    async def list_memory_types(self) -> list[MemoryTypeOut]:
        """Every memory type the service has registered (built-ins, memory-file categories,
        installed types), and whether it offers each."""
        return (await self._call(MemoryTypes, "GET", f"{_PREFIX}/types")).items

    async def memorize(
        self,
        memory_type: str,
        content: str,
        *,
        key: str | None = None,
        role: Role | None = None,
        speaker: str | None = None,
        occurred_at: datetime | None = None,
        importance: float = 0.5,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        plan_id: str | None = None,
    ) -> WriteResult:
        """Store ``content`` in the registered type ``memory_type``, the way that type stores
        things (``mem.memory_type(name).memorize(item)`` in process).

        Raises:
            NotFoundError: no such type is registered, or the service does not offer it.
        """
        body = given(
            content=content,
            key=key,
            role=role,
            speaker=speaker,
            occurred_at=occurred_at,
            tags=tags,
            metadata=metadata,
            plan_id=plan_id,
        )
        body["importance"] = importance
        path = f"{_PREFIX}/types/{segment(memory_type)}/memorize"
        return await self._call(WriteResult, "POST", path, json=body)

    async def remember(
        self,
        memory_type: str,
        query: str,
        *,
        limit: int = 10,
        plan_id: str | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Memories of the registered type ``memory_type`` relevant to ``query``, best first.

        Raises:
            NotFoundError: no such type is registered, or the service does not offer it.
        """
        params = {"q": query, "limit": limit, "plan_id": plan_id, **raw_param(raw)}
        path = f"{_PREFIX}/types/{segment(memory_type)}/remember"
        return (await self._call(Items, "GET", path, params=params)).items

    # -- conversation ------------------------------------------------------------------------

    async def memorize_turn(
        self,
        role: Role,
        content: str,
        *,
        speaker: str | None = None,
        metadata: dict[str, Any] | None = None,
        importance: float = 0.5,
    ) -> WriteResult:
        """Append a turn to the conversation of the client's session; ``evicted`` names the
        oldest turns dropped past the buffer's limits."""
        body = given(role=role, content=content, speaker=speaker, metadata=metadata)
        body["importance"] = importance
        return await self._call(WriteResult, "POST", f"{_PREFIX}/conversation", json=body)

    async def remember_turns(
        self, query: str, *, limit: int = 10, raw: bool = False
    ) -> list[MemoryItem]:
        """Turns of the conversation matching ``query``, best first."""
        params = {"q": query, "limit": limit, **raw_param(raw)}
        path = f"{_PREFIX}/conversation/search"
        return (await self._call(Items, "GET", path, params=params)).items

    async def recent_turns(self, limit: int = 10, *, raw: bool = False) -> list[MemoryItem]:
        """The last ``limit`` turns of the conversation, oldest first."""
        params = {"limit": limit, **raw_param(raw)}
        path = f"{_PREFIX}/conversation/recent"
        return (await self._call(Items, "GET", path, params=params)).items

    # -- episodes in bulk, one memory at a time ----------------------------------------------

    async def log_interactions(
        self,
        interactions: Sequence[Mapping[str, Any]],
        *,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> list[WriteResult]:
        """Append interactions (``{"role", "content"}``, optionally ``metadata``,
        ``occurred_at``, ``speaker``, ``importance``, ``tags``) in one transaction: all are
        stored, or none."""
        body = given(user_id=user_id, agent_id=agent_id)
        body["items"] = [given(**i) for i in interactions]
        path = f"{_PREFIX}/episodic/batch"
        return (await self._call(WriteResults, "POST", path, json=body)).items

    async def delete_memory(
        self, memory_type: ItemTypeName, item_id: str, *, mode: ForgetMode = "soft"
    ) -> ItemChanged:
        """Forget one episode, fact or rule by id: ``soft`` hides it (``restore_memory``
        brings it back), ``hard`` erases it. Raises ``NotFoundError``."""
        path = f"{_PREFIX}/{memory_type}/{segment(item_id)}"
        return await self._call(ItemChanged, "DELETE", path, params={"mode": mode})

    async def restore_memory(self, memory_type: ItemTypeName, item_id: str) -> ItemChanged:
        """Bring back a soft-forgotten episode, fact or rule. Raises ``NotFoundError``."""
        path = f"{_PREFIX}/{memory_type}/{segment(item_id)}/restore"
        return await self._call(ItemChanged, "POST", path)

    async def knowledge_history(
        self, key: str, *, user_id: str | None = None, raw: bool = False
    ) -> list[MemoryItem]:
        """Every version of the fact ``key``, newest first (superseded ones marked). Raises
        ``NotFoundError``."""
        params = {"user_id": user_id, **raw_param(raw)}
        path = f"{_PREFIX}/semantic/{segment(key)}/history"
        return (await self._call(Items, "GET", path, params=params)).items


__all__ = ["IntentCalls"]
