"""The request and response bodies of the intent operations over REST: ``forget``,
``summarize``, capacity and ``assemble`` (the memory-plugin interface), conversation turns,
batches of episodes and per-item deletes. The engine's own ``ForgetResult``,
``SummaryResult`` and ``CapacityInfo`` are returned as they are."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, BaseModel, Field, JsonValue, field_validator

from engramdb.core.intent import MemoryItem
from engramdb.core.validation import KEY_PATTERN
from engramdb.service.models import (
    AgentId,
    Body,
    EpisodeIn,
    OptionalKey,
    Text,
    UserId,
    WriteResult,
)

#: The memory types of the memory-plugin interface, as named in paths.
MemoryTypeName = Literal["working", "episodic", "semantic", "procedural", "conversation"]
#: The types whose items can be deleted and restored one by one over REST.
ItemTypeName = Literal["episodic", "semantic", "procedural"]
ForgetMode = Literal["soft", "hard"]
PlanId = Field(default=None, min_length=1, max_length=128, pattern=KEY_PATTERN)


class ForgetIn(Body):
    """What to forget, in the forget grammar (``id:<id>``, ``key:<key>``, ``oldest [N]``,
    ``least important [N]``, ``before <ISO date>``, ``before turn <N>``, ``older than <N>
    days``, ``matching "<text>"``, ``fade "<text>" [by <0..1>]``, ``all``; each type takes the
    forms its docstring lists). ``soft`` hides (restorable), ``hard`` erases. Working memory
    is a plan's: ``plan_id`` names it."""

    instruction: str = Field(min_length=1, max_length=10_000)
    mode: ForgetMode = "soft"
    plan_id: str | None = PlanId


class SummarizeIn(Body):
    """Which items to summarize (``all``, ``recent``, ``important``, ``by_tag:<tag>``,
    ``since <ISO date>``, ``between <ISO date> and <ISO date>``), within ``token_limit``.
    Working memory is a plan's: ``plan_id`` names it."""

    scope: str = Field(default="all", min_length=1, max_length=1000)
    token_limit: int = Field(default=500, ge=1, le=100_000)
    plan_id: str | None = PlanId


class AssembleIn(Body):
    """The prompt of the next turn and the token budget of its context."""

    prompt: str = Field(min_length=1, max_length=10_000)
    token_limit: int = Field(default=2000, ge=1, le=100_000)


class AssembledItem(BaseModel):
    """One item placed in an assembled context (redacted), its type and token cost."""

    memory_type: str
    item: MemoryItem
    tokens: int


class AssembledOut(BaseModel):
    """The context for a turn: the text (never over the token limit, redacted), the items
    it holds, and the memory types that did not answer in time (``incomplete``)."""

    text: str
    tokens: int
    items: list[AssembledItem]
    incomplete: list[str] = Field(default_factory=list)


class TurnIn(Body):
    """One turn of the current conversation (the session of ``X-Session-ID``)."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str = Field(min_length=1, max_length=1_000_000)
    speaker: str | None = Field(default=None, max_length=128)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)


class EpisodesIn(Body):
    """Interactions to log together: all of them stored in one transaction, or none. The
    user and agent are named once, for the whole batch."""

    items: list[EpisodeIn] = Field(min_length=1, max_length=1000)
    user_id: str | None = UserId
    agent_id: str | None = AgentId

    @field_validator("items")
    @classmethod
    def _scope_named_once(cls, items: list[EpisodeIn]) -> list[EpisodeIn]:
        if any(e.user_id is not None or e.agent_id is not None for e in items):
            raise ValueError("name user_id and agent_id on the batch, not on its items")
        return items


class TypedItemIn(Body):
    """One memory for a registered memory type, stored the way that type stores things
    (``memorize`` of its plugin). Working memory is a plan's: ``plan_id`` names it."""

    content: str = Text
    key: str | None = OptionalKey
    role: Literal["user", "assistant", "system", "tool"] | None = None
    speaker: str | None = Field(default=None, max_length=128)
    occurred_at: AwareDatetime | None = None
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list, max_length=64)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    plan_id: str | None = PlanId

    def item(self) -> MemoryItem:
        """The engine's item of this body."""
        return MemoryItem(
            text=self.content,
            key=self.key,
            role=self.role,
            speaker=self.speaker,
            occurred_at=self.occurred_at,
            importance=self.importance,
            tags=self.tags,
            metadata=self.metadata,
        )


class MemoryTypeOut(BaseModel):
    """One registered memory type: its name (what the ``/types/{name}`` paths take), its
    section heading and default share of an assembled context, a line saying what it holds,
    and whether this server offers it (a memory-file category needs memory files)."""

    name: str
    heading: str
    share: float
    description: str
    offered: bool
    namespace: str | None = Field(
        default=None, description="The namespace it stores in, when it has one of its own"
    )


class MemoryTypes(BaseModel):
    """Every registered memory type, in registration order."""

    items: list[MemoryTypeOut]


class WriteResults(BaseModel):
    """What a batch write stored, in the order given."""

    items: list[WriteResult]


class ItemChanged(BaseModel):
    """What a per-item delete or restore did to the item ``id`` of ``memory_type``."""

    id: str
    memory_type: str
    status: Literal["forgotten", "deleted", "restored"]


__all__ = [
    "AssembleIn",
    "AssembledItem",
    "AssembledOut",
    "EpisodesIn",
    "ForgetIn",
    "ForgetMode",
    "ItemChanged",
    "ItemTypeName",
    "MemoryTypeName",
    "MemoryTypeOut",
    "MemoryTypes",
    "SummarizeIn",
    "TurnIn",
    "TypedItemIn",
    "WriteResults",
]
