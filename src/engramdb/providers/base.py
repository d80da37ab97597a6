"""``MemoryProvider``: the contract every memory backend implements (rfc-2002 §5).

Scores returned by ``search`` are in [0, 1], higher is more relevant; the manager relies on it
when it merges providers (a provider that cannot keep that promise gets rescaled).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime
from typing import Any

from engramdb.core.types import MemoryEntry, ProviderCapabilities, RecallResult


class MemoryProvider(ABC):
    """Abstract base for all memory providers (rfc-2001 §6.1). Every operation is async."""

    @abstractmethod
    def capabilities(self) -> ProviderCapabilities:
        """What this provider is and can do."""

    @abstractmethod
    async def write(
        self,
        key: str,
        value: Any,
        *,
        content_type: str = "fact",
        metadata: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
    ) -> MemoryEntry:
        """Store ``value`` under ``key``; returns the entry exactly as a later read returns it."""

    @abstractmethod
    async def read(self, key: str) -> MemoryEntry | None:
        """The live entry under ``key``, or ``None`` (missing or expired)."""

    @abstractmethod
    async def delete(self, key: str) -> bool:
        """Remove ``key``; ``True`` if it was there."""

    @abstractmethod
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
        """Entries matching ``query``, best first, scores in [0, 1]; with ``since`` /
        ``until``, only those that happened at or after ``since`` and before ``until``."""

    @abstractmethod
    async def list_keys(
        self,
        *,
        content_types: list[str] | None = None,
        prefix: str | None = None,
    ) -> list[str]:
        """Keys of live entries, sorted."""

    async def rebuild(self) -> None:  # noqa: B027 - a no-op default is the contract
        """Rebuild derived state. No-op by default."""

    async def close(self) -> None:  # noqa: B027 - a no-op default is the contract
        """Release resources. No-op by default."""
