"""``ConversationMemory``: a rolling buffer of the current session's turns.

| operation | here |
|---|---|
| ``memorize`` | appends a turn numbered after the last one; past ``max_turns`` (default 50) |
| | or ``max_tokens`` (default 4000) the oldest turns are evicted and reported |
| ``remember`` | the turns matching the prompt by keywords and meaning, best first |
| ``recent(n)`` | the last ``n`` turns in order (what a prompt window usually wants) |
| ``forget`` | ``id``, ``before turn <N>``, ``oldest``, ``before``, ``older than``, |
| | ``matching``, ``all`` |
| ``summarize`` | the turns, extractive within the token limit |
| ``get_capacity_info`` | turns and tokens against the buffer limits |

The buffer is per session (partitioned by every scope level).
"""

from __future__ import annotations

from typing import Any, ClassVar

from engramdb.core.intent import MemorizeResult, MemoryItem
from engramdb.core.scope import LEVELS
from engramdb.orchestrator.episodic import (
    episode_embed_parts,
    episode_embed_text,
    episode_key_text,
)
from engramdb.orchestrator.plugin import StoredMemoryType, TypeLimits, record_item, turn_of
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.records import Record

NAMESPACE = "conversation"
CONVERSATION_SPEC = ProjectionSpec(
    NAMESPACE,
    levels=LEVELS,
    key_text=episode_key_text,
    vectors=True,
    embed_text=episode_embed_text,
    embed_parts=episode_embed_parts,
)
DEFAULT_LIMITS = TypeLimits(max_items=50, max_tokens=4000)


class ConversationMemory(StoredMemoryType):
    """Conversation buffer of one session (see the module docstring)."""

    name: ClassVar[str] = NAMESPACE
    supported_forget: ClassVar[frozenset[str]] = frozenset(
        {
            "id",
            "before turn",
            "oldest",
            "before",
            "older than",
            "matching",
            "all",
        }
    )
    eviction_policy: ClassVar[str] = "oldest turn first"

    def __init__(self, provider: EventSourcedProvider, limits: TypeLimits | None = None) -> None:
        super().__init__(provider, limits or DEFAULT_LIMITS)

    def content_type(self, item: MemoryItem) -> str:
        """Turns are ``conversation``."""
        return "conversation"

    def eviction_order(self, records: list[Record]) -> list[Record]:
        """Oldest turn first."""
        return sorted(records, key=lambda r: (turn_of(r) or 0, r.created_at))

    async def memorize_many(self, items: list[MemoryItem]) -> list[MemorizeResult]:  # type: ignore[override]
        """Append turns in order, numbering them after the last stored turn."""
        last = max((turn_of(r) or 0 for r in await self.records()), default=0)
        requests = [self._request(item, turn=last + n) for n, item in enumerate(items, 1)]
        entries = await self.provider.write_many(requests)
        results = [MemorizeResult(id=entry.key) for entry in entries]
        evicted = await self._evict()
        if evicted and results:
            results[-1] = results[-1].model_copy(update={"evicted": evicted})
        return results

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Turns matching ``prompt``, best first, redacted unless ``raw``."""
        return self.redacted(await self._search(prompt, limit, filters), raw)

    async def recent(self, count: int = 10, *, raw: bool = False) -> list[MemoryItem]:
        """The last ``count`` turns, oldest first, redacted unless ``raw``."""
        turns = self.eviction_order(await self.records())
        return self.redacted([record_item(r) for r in turns[-count:]] if count > 0 else [], raw)
