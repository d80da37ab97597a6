"""``WorkingMemory``: the state of the current plan or session — importance-scored items and
key/value state (the service's plan state and ``WorkflowState`` build on it).

| operation | here |
|---|---|
| ``memorize`` | adds an item with its importance; at capacity (``max_items``, default 100) |
| | the least important (then oldest) items are evicted and reported |
| ``remember`` | items ranked by meaning (the engine's embedder and keywords), importance and |
| | recency together (``RANKING``); without an embedder, keyword matches only |
| ``set`` / ``get`` / ``delete`` / ``clear`` | key/value state of the plan or session |
| ``forget`` | ``id``, ``key``, ``oldest``, ``least important``, ``before``, ``older than``, |
| | ``matching``, ``fade``, ``all`` |
| ``summarize`` | the most important items first, within the token limit |
| ``get_capacity_info`` | items and tokens against ``max_items`` |

It is partitioned by every scope level, plan included, and kept in the store, so several
service instances share it. Items and state carry embedding vectors, so "what should I cook
tonight?" finds the item "current task: plan dinner" though no word is shared.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar

from engramdb.core.intent import MemoryItem
from engramdb.core.scope import LEVELS
from engramdb.core.types import utc_now
from engramdb.core.validation import validate_key
from engramdb.index.fusion import recency
from engramdb.orchestrator.plugin import StoredMemoryType, TypeLimits, importance, moment
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.projection import ProjectionSpec
from engramdb.providers.text_match import flatten_text
from engramdb.storage.records import Record

NAMESPACE = "workspace"
DEFAULT_LIMITS = TypeLimits(max_items=100)
_STATE = "state"


def working_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """What an item or a piece of state is found by, in words and in meaning: an item's text;
    a state's key and value ("current task plan dinner")."""
    text = value.get("text") if isinstance(value, dict) else None
    if isinstance(text, str):
        return text
    if isinstance(value, dict) and _STATE in value:
        value = value[_STATE]
    return f"{key.replace('_', ' ').replace('.', ' ')} {flatten_text(value)}"


WORKING_SPEC = ProjectionSpec(
    NAMESPACE, levels=LEVELS, key_text=working_text, vectors=True, embed_text=working_text
)


@dataclass(frozen=True)
class WorkingRanking:
    """How working memory ranks what it remembers: the shares of relevance (hybrid search:
    meaning and keywords), importance and recency in an item's score, and the age at which
    recency halves (working memory is about the last hours, not months)."""

    relevance: float = 0.6
    importance: float = 0.25
    recency: float = 0.15
    recency_half_life_days: float = 1.0

    def score(self, item: MemoryItem, now: datetime) -> dict[str, float]:
        """``item``'s score parts (its ``score`` is the relevance) and the score, ``"score"``."""
        moment = item.occurred_at or now
        parts = {
            "relevance": item.score or 0.0,
            "importance": item.importance,
            "recency": recency(
                (now - moment).total_seconds() / 86_400, self.recency_half_life_days
            ),
        }
        total = (
            self.relevance * parts["relevance"]
            + self.importance * parts["importance"]
            + self.recency * parts["recency"]
        )
        return {**parts, "score": round(total, 6)}


RANKING = WorkingRanking()
#: How many hybrid hits are ranked again: all of a default-sized working memory.
_CANDIDATES = 100


class WorkingMemory(StoredMemoryType):
    """Working memory of one plan or session (see the module docstring)."""

    name: ClassVar[str] = "working"
    supported_forget: ClassVar[frozenset[str]] = frozenset(
        {
            "id",
            "key",
            "oldest",
            "least important",
            "before",
            "older than",
            "matching",
            "fade",
            "all",
        }
    )
    eviction_policy: ClassVar[str] = "least important first"

    def __init__(self, provider: EventSourcedProvider, limits: TypeLimits | None = None) -> None:
        super().__init__(provider, limits or DEFAULT_LIMITS)

    def content_type(self, item: MemoryItem) -> str:
        """Items are ``reasoning`` (scratch state of a plan)."""
        return "reasoning"

    def eviction_order(self, records: list[Record]) -> list[Record]:
        """Least important first, then oldest; key/value state is never evicted."""
        items = [r for r in records if r.content_type != _STATE]
        return sorted(items, key=lambda r: (importance(r), moment(r), r.key))

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Items for ``prompt``, ranked by relevance, importance and recency (``RANKING``),
        redacted unless ``raw``."""
        found = await self._search(prompt, limit, filters, candidates=_CANDIDATES)
        now = utc_now()
        for item in found:
            parts = RANKING.score(item, now)
            item.score = parts.pop("score")
            item.score_breakdown = {**item.score_breakdown, **parts}
        ranked = sorted(found, key=lambda i: (-(i.score or 0.0), i.id or ""))
        return self.redacted(ranked[:limit], raw)

    async def set(
        self,
        key: str,
        value: Any,
        *,
        expected_version: int | None = None,
        create: bool = False,
    ) -> int:
        """Set plan/session state ``key`` to ``value`` (any JSON value); returns its version.
        With ``expected_version``, only over that version (``VersionConflictError``, or
        ``NotFoundError`` if unset); with ``create``, only if unset (``ConflictError``)."""
        validate_key(key)
        request = WriteRequest(
            key, {"state": value}, _STATE, create=create, expected_version=expected_version
        )
        (entry,) = await self.provider.write_many([request])
        assert entry.version is not None
        return entry.version

    async def get(self, key: str, default: Any = None) -> Any:
        """The state under ``key``, or ``default``."""
        found = await self.versioned(key)
        return default if found is None else found[0]

    async def versioned(self, key: str) -> tuple[Any, int] | None:
        """The state under ``key`` and its version, or ``None`` if unset."""
        entry = await self.provider.read(key)
        if entry is None or entry.content_type != _STATE or entry.version is None:
            return None
        value = entry.value["state"] if isinstance(entry.value, dict) else entry.value
        return value, entry.version

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        """Delete state ``key``; ``True`` if it was there (with ``expected_version``, only
        that version: ``VersionConflictError`` otherwise)."""
        return await self.provider.forget(
            key, "hard", purge=False, expected_version=expected_version
        )

    async def clear(self) -> int:
        """Delete every item and all state of this plan or session; returns how many."""
        keys = [r.key for r in await self.records()]
        for key in keys:
            await self.provider.forget(key, "hard", purge=False)
        return len(keys)

    async def state(self) -> dict[str, Any]:
        """All key/value state of this plan or session."""
        return {
            r.key: r.value.get("state") if isinstance(r.value, dict) else r.value
            for r in await self.records(content_types=(_STATE,))
        }
