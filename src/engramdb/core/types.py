"""The provider-level data types of rfc-2002 §4.

``MemoryEntry`` is one stored memory; ``ProviderCapabilities`` is what a provider declares about
itself; ``RecallQuery`` and ``RecallResult`` are the unified recall protocol of rfc-2001 §9.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import AwareDatetime, ConfigDict, Field, field_validator, model_validator

from engramdb.core.errors import InvalidValueError
from engramdb.core.model import EngramModel
from engramdb.core.scope import Scope
from engramdb.core.validation import to_json

_last_now: list[datetime] = [datetime.min.replace(tzinfo=UTC)]
_now_lock = threading.Lock()


def utc_now() -> datetime:
    """The current time, timezone-aware in UTC, strictly increasing within the process.

    Two calls never return the same microsecond, so creation times order the writes of one
    process (the order of turns in a session, for instance) even when the clock is coarse.
    """
    with _now_lock:
        now = max(datetime.now(tz=UTC), _last_now[0] + timedelta(microseconds=1))
        _last_now[0] = now
        return now


class MemoryTier(StrEnum):
    """The three tiers of rfc-2001 §5."""

    WORKING = "working"
    PERSISTENT = "persistent"
    INDEXED = "indexed"

    @property
    def rank(self) -> int:
        """Preference when the same key comes from several tiers: working wins."""
        return _TIER_RANK[self]


_TIER_RANK = {MemoryTier.WORKING: 3, MemoryTier.PERSISTENT: 2, MemoryTier.INDEXED: 1}

#: The content types of rfc-2001 §7. The set is open: providers may accept others.
CONTENT_TYPES: tuple[str, ...] = (
    "activity",
    "profile",
    "event",
    "fact",
    "conversation",
    "reasoning",
    "research",
    "entity",
)


class MemoryEntry(EngramModel):
    """One memory as a provider stores and returns it.

    ``value`` is any JSON-representable value and comes back exactly as stored. ``scope`` is the
    partition the entry lives in; ``expires_at`` is derived from ``ttl_ms`` at write time.
    ``version`` counts the writes of a stored entry (1 when new; ``None`` where the provider
    keeps no versions): pass it back as ``expected_version`` to write only over what was read.
    """

    model_config = ConfigDict(frozen=True)

    key: str
    value: Any
    content_type: str = "fact"
    metadata: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime | None = None
    ttl_ms: int | None = Field(default=None, gt=0)
    expires_at: datetime | None = None
    provider_id: str | None = None
    scope: Scope | None = None
    version: int | None = None

    def is_expired(self, now: datetime | None = None) -> bool:
        """Whether the entry's TTL has run out at ``now`` (default: the current time)."""
        return self.expires_at is not None and self.expires_at <= (now or utc_now())


class ProviderCapabilities(EngramModel):
    """What a provider declares about itself (rfc-2001 §6.3)."""

    model_config = ConfigDict(frozen=True)

    provider_id: str = Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9_.-]*$")
    tier: MemoryTier
    supports_search: bool = False
    supports_graph: bool = False
    content_types: list[str] = Field(default_factory=lambda: ["*"])
    read_only: bool = False

    def accepts(self, content_type: str) -> bool:
        """Whether this provider handles ``content_type``."""
        return "*" in self.content_types or content_type in self.content_types


class RecallScope(StrEnum):
    """Which tiers a recall asks (rfc-2001 §9.1)."""

    WORKING = "working"
    PERSISTENT = "persistent"
    INDEXED = "indexed"
    ALL = "all"


class RecallQuery(EngramModel):
    """One unified recall request.

    ``metadata_filters`` are checked here, before any provider is asked, so that every
    backend refuses the same filters: each value must be JSON (no NaN or infinity), each
    name free of quotes and backslashes.
    """

    model_config = ConfigDict(allow_inf_nan=False)

    query: str = Field(min_length=1, max_length=10_000)
    scope: RecallScope = RecallScope.ALL
    content_types: list[str] | None = None
    provider_ids: list[str] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    metadata_filters: dict[str, Any] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, gt=0, le=300)
    #: Only memories that happened at or after ``since`` and before ``until`` (rfc-2001's
    #: date-range filter).
    since: AwareDatetime | None = None
    until: AwareDatetime | None = None

    @model_validator(mode="after")
    def _range_in_order(self) -> RecallQuery:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self

    @field_validator("metadata_filters")
    @classmethod
    def _json_filters(cls, filters: dict[str, Any]) -> dict[str, Any]:
        for name in filters:
            if '"' in name or "\\" in name:
                raise ValueError(f"filter name {name!r} may not contain quotes or backslashes")
        try:  # the check every stored value passes, so filters accept what values may hold
            to_json(filters, what="metadata_filters")
        except InvalidValueError as exc:
            raise ValueError(exc.message) from exc
        return filters


class RecallResult(EngramModel):
    """One scored hit of a recall; ``score`` is in [0, 1] once merged by the manager."""

    entry: MemoryEntry
    score: float = 1.0
    provider_id: str
    tier: MemoryTier
    breakdown: dict[str, float] = Field(default_factory=dict)
