"""The intent-level types of the memory-plugin interface (memorize, remember, forget,
summarize, get_capacity_info). The memory types that use them build on the provider layer."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from engramdb.core.model import EngramModel


class MemoryItem(EngramModel):
    """One thing to memorize or one remembered thing.

    ``metadata`` round-trips unchanged, so callers can map results back to their own ids.
    ``score`` (with its parts in ``score_breakdown``: bm25, vector, fused, recency, …) is
    set on items returned by ``remember``; ``version`` and ``superseded`` on versioned facts.
    ``valid_from`` / ``valid_to`` bound when a fact held in the world (``valid_to`` exclusive;
    ``None``: since ever / still holds); a superseded version's ``valid_to`` is when the next
    one began.
    """

    text: str = Field(min_length=1, max_length=1_000_000)
    id: str | None = None
    key: str | None = None
    role: str | None = None
    speaker: str | None = None
    kind: str = "fact"
    tags: list[str] = Field(default_factory=list)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    occurred_at: datetime | None = None
    ttl_ms: int | None = Field(default=None, gt=0)
    metadata: dict[str, Any] = Field(default_factory=dict)
    score: float | None = None
    score_breakdown: dict[str, float] = Field(default_factory=dict)
    version: int | None = None
    superseded: bool = False
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class MemorizeResult(EngramModel):
    """What ``memorize`` did: the stored id, whether it created or updated, what it evicted."""

    id: str
    status: Literal["created", "updated"] = "created"
    evicted: list[str] = Field(default_factory=list)


class ForgetResult(EngramModel):
    """What ``forget`` did, per item id."""

    mode: Literal["soft", "hard"]
    forgotten: list[str] = Field(default_factory=list)
    faded: list[str] = Field(default_factory=list)
    instruction: str


class SummaryResult(EngramModel):
    """A summary no longer than the token limit, with the ids it drew on."""

    text: str
    tokens: int = Field(ge=0)
    source_ids: list[str] = Field(default_factory=list)


class CapacityInfo(EngramModel):
    """Current usage and limits of one memory type."""

    item_count: int = Field(ge=0)
    token_usage: int = Field(ge=0)
    max_items: int | None = None
    max_tokens: int | None = None
    available_items: int | None = None
    eviction_policy: str = "none"
