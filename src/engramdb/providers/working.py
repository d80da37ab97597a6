"""``WorkingMemoryProvider``: the in-process tier 1 of rfc-2001 §5.1.

Entries live in a ``WorkingStore`` shared by every scope of one engine and are partitioned by
the full scope (session and plan included). Nothing is written to disk and no events are
emitted: working memory is lost on restart by design.

rfc-2001 leaves the eviction policy open; Engram answers it with three documented limits per
partition:

* ``max_entries`` (default 1024): writing a new key into a full partition evicts one entry;
* ``eviction``: ``"lru"`` (default) evicts the least recently read or written entry,
  ``"fifo"`` the one written first;
* ``default_ttl_ms`` (default none): entries expire after it unless the write gives its own
  ``ttl_ms``; expired entries are never returned and are dropped when next touched.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from engramdb.core.scope import Scope
from engramdb.core.types import (
    MemoryEntry,
    MemoryTier,
    ProviderCapabilities,
    RecallResult,
    utc_now,
)
from engramdb.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    normalize_metadata,
    normalize_value,
    validate_content_type,
    validate_key,
    validate_ttl,
)
from engramdb.providers.base import MemoryProvider
from engramdb.providers.filters import metadata_matches
from engramdb.providers.text_match import keyword_score, searchable_text

Eviction = Literal["lru", "fifo"]


@dataclass(frozen=True)
class WorkingMemoryLimits:
    """Size, eviction and TTL limits of working memory, per partition."""

    max_entries: int = 1024
    eviction: Eviction = "lru"
    default_ttl_ms: int | None = None
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES

    def __post_init__(self) -> None:
        if self.max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        if self.eviction not in ("lru", "fifo"):
            raise ValueError("eviction must be 'lru' or 'fifo'")


@dataclass
class WorkingStore:
    """The in-process home of working memory, one ordered partition per scope."""

    limits: WorkingMemoryLimits = field(default_factory=WorkingMemoryLimits)
    partitions: dict[Scope, OrderedDict[str, MemoryEntry]] = field(default_factory=dict)
    evictions: int = 0
    expirations: int = 0

    def partition(self, scope: Scope) -> OrderedDict[str, MemoryEntry]:
        """The entries of ``scope``, oldest (or least recently used) first."""
        return self.partitions.setdefault(scope, OrderedDict())

    def purge_expired(self, scope: Scope) -> list[str]:
        """Drop expired entries of ``scope``; returns their keys."""
        entries = self.partition(scope)
        now = utc_now()
        gone = [key for key, entry in entries.items() if entry.is_expired(now)]
        for key in gone:
            del entries[key]
        self.expirations += len(gone)
        return gone

    def entry_count(self) -> int:
        """Entries across every partition (expired ones not yet dropped included)."""
        return sum(len(entries) for entries in self.partitions.values())


class WorkingMemoryProvider(MemoryProvider):
    """Dict-backed working memory for one scope; see the module docstring for its limits."""

    def __init__(
        self,
        store: WorkingStore | None = None,
        scope: Scope | None = None,
        *,
        provider_id: str = "working",
    ) -> None:
        self.store = store or WorkingStore()
        self.scope = scope or Scope()
        self.provider_id = provider_id
        self.last_evicted: list[str] = []

    def capabilities(self) -> ProviderCapabilities:
        """Working tier, with simple keyword search."""
        return ProviderCapabilities(
            provider_id=self.provider_id, tier=MemoryTier.WORKING, supports_search=True
        )

    @property
    def _entries(self) -> OrderedDict[str, MemoryEntry]:
        return self.store.partition(self.scope)

    async def write(
        self,
        key: str,
        value: Any,
        *,
        content_type: str = "fact",
        metadata: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
    ) -> MemoryEntry:
        """Store ``value``; a new key in a full partition evicts one entry first."""
        limits = self.store.limits
        validate_key(key)
        validate_content_type(content_type)
        validate_ttl(ttl_ms)
        stored_value, _ = normalize_value(value, max_bytes=limits.max_value_bytes)
        stored_metadata = normalize_metadata(metadata)
        ttl = ttl_ms if ttl_ms is not None else limits.default_ttl_ms
        now = utc_now()
        entries = self._entries
        self.store.purge_expired(self.scope)
        previous = entries.get(key)
        entry = MemoryEntry(
            key=key,
            value=stored_value,
            content_type=content_type,
            metadata=stored_metadata,
            created_at=previous.created_at if previous else now,
            updated_at=now if previous else None,
            ttl_ms=ttl,
            expires_at=now + timedelta(milliseconds=ttl) if ttl else None,
            provider_id=self.provider_id,
            scope=self.scope,
        )
        self.last_evicted = []
        if previous is None:
            while len(entries) >= limits.max_entries:
                evicted, _ = entries.popitem(last=False)
                self.last_evicted.append(evicted)
                self.store.evictions += 1
        entries[key] = entry
        entries.move_to_end(key)
        return entry

    def _live(self, key: str) -> MemoryEntry | None:
        entries = self._entries
        entry = entries.get(key)
        if entry is None:
            return None
        if entry.is_expired():
            del entries[key]
            self.store.expirations += 1
            return None
        return entry

    async def read(self, key: str) -> MemoryEntry | None:
        """The live entry under ``key``; under LRU a read counts as a use."""
        entry = self._live(key)
        if entry is not None and self.store.limits.eviction == "lru":
            self._entries.move_to_end(key)
        return entry

    async def delete(self, key: str) -> bool:
        """Remove ``key``."""
        return self._entries.pop(key, None) is not None

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        content_types: list[str] | None = None,
        metadata_filters: dict[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[RecallResult]:
        """Keyword match over keys and values, best first (written within ``since`` /
        ``until``, if given)."""
        self.store.purge_expired(self.scope)
        hits = []
        for entry in self._entries.values():
            if content_types is not None and entry.content_type not in content_types:
                continue
            if (since is not None and entry.created_at < since) or (
                until is not None and entry.created_at >= until
            ):
                continue
            if not metadata_matches(entry.metadata, metadata_filters):
                continue
            score = keyword_score(query, searchable_text(entry.key, entry.value))
            if score > 0:
                hits.append(
                    RecallResult(
                        entry=entry,
                        score=score,
                        provider_id=self.provider_id,
                        tier=MemoryTier.WORKING,
                    )
                )
        hits.sort(key=lambda hit: (-hit.score, hit.entry.key))
        return hits[:limit]

    async def list_keys(
        self, *, content_types: list[str] | None = None, prefix: str | None = None
    ) -> list[str]:
        """Keys of live entries, sorted."""
        self.store.purge_expired(self.scope)
        return sorted(
            key
            for key, entry in self._entries.items()
            if (prefix is None or key.startswith(prefix))
            and (content_types is None or entry.content_type in content_types)
        )

    async def clear(self) -> int:
        """Drop every entry of this scope; returns how many there were."""
        entries = self._entries
        count = len(entries)
        entries.clear()
        return count
