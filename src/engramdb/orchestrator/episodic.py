"""``EpisodicMemory``: the chronological log of what happened — turns, events — recalled by
content and time.

| operation | here |
|---|---|
| ``memorize`` | appends a new episode (its own id, or a fresh one) with role, speaker, time |
| ``remember`` | hybrid search (BM25 + vectors) across the user's sessions; a time the prompt |
| | names ("last week", "in May", against ``now``) boosts episodes from then; |
| | ``since``/``until`` filter strictly; recency can weigh in (``SearchConfig``) |
| ``forget`` | ``id``, ``oldest``, ``least important``, ``before <time>``, ``older than``, |
| | ``matching``, ``fade``, ``all`` — soft (hidden) or hard (purged) |
| ``summarize`` | extractive, chronological, within the token limit |
| ``get_capacity_info`` | episodes and their tokens; no limit by default (a log) |

Episodes are indexed under a contextual key (speaker, text, tags and date in words), and
partitioned by tenant, user and agent so every session's episodes are remembered together.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from engramdb.core.intent import MemoryItem
from engramdb.core.types import utc_now
from engramdb.index.contextual import episode_key
from engramdb.index.sentences import sentence_keys
from engramdb.index.temporal import resolve_time_range
from engramdb.orchestrator.plugin import StoredMemoryType
from engramdb.providers.projection import ProjectionSpec

NAMESPACE = "episodic"


def _fields(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {"text": str(value)}


def episode_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The full-text key of a stored episode (see ``index.contextual.episode_key``)."""
    fields = _fields(value)
    tags = fields.get("tags")
    return episode_key(
        str(fields.get("text", "")),
        speaker=fields.get("speaker"),
        role=fields.get("role"),
        occurred_at=occurred_at,
        tags=[str(tag) for tag in tags] if isinstance(tags, list) else None,
    )


def episode_embed_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The text an episode's vector is computed from: who said what."""
    fields = _fields(value)
    return episode_key(
        str(fields.get("text", "")), speaker=fields.get("speaker"), role=fields.get("role")
    )


def episode_embed_parts(key: str, value: Any, occurred_at: datetime | None) -> list[str]:
    """The texts of an episode's sentence vectors: each sentence, said by the same speaker
    (none for a one-sentence episode)."""
    fields = _fields(value)
    return [
        episode_key(sentence, speaker=fields.get("speaker"), role=fields.get("role"))
        for sentence in sentence_keys(str(fields.get("text", "")))
    ]


EPISODIC_SPEC = ProjectionSpec(
    NAMESPACE,
    key_text=episode_key_text,
    vectors=True,
    embed_text=episode_embed_text,
    embed_parts=episode_embed_parts,
)


def named_time_range(prompt: str, now: datetime | None) -> tuple[datetime, datetime] | None:
    """The time span the prompt names, resolved against ``now`` (``None`` if it names none)."""
    found = resolve_time_range(prompt, now or utc_now())
    return None if found is None else (found.start, found.end)


class EpisodicMemory(StoredMemoryType):
    """Episodic memory of one scope (see the module docstring for its semantics)."""

    name: ClassVar[str] = NAMESPACE
    supported_forget: ClassVar[frozenset[str]] = frozenset(
        {
            "id",
            "oldest",
            "least important",
            "before",
            "older than",
            "matching",
            "fade",
            "all",
        }
    )
    eviction_policy: ClassVar[str] = "oldest first"

    def content_type(self, item: MemoryItem) -> str:
        """Turns are ``conversation``, anything else an ``event``."""
        return "conversation" if item.role is not None else "event"

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        now: datetime | None = None,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Episodes relevant to ``prompt``, best first, each with ``score``.

        Args:
            prompt: what to remember, in natural language.
            limit: at most this many items.
            filters: metadata that must match exactly.
            since: only episodes that happened at or after this time.
            until: only episodes that happened before this time.
            now: the time the prompt is asked at, for relative times and recency
                (default: the current time).
            raw: return the episodes as stored, without redaction.
        """
        found = await self._search(
            prompt,
            limit,
            filters,
            since=since,
            until=until,
            now=now,
            time_range=named_time_range(prompt, now),
        )
        return self.redacted(found, raw)
