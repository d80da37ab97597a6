"""``SemanticMemory``: facts and knowledge, one current version per semantic key.

| operation | here |
|---|---|
| ``memorize`` | stores the fact under ``item.key`` (derived from the text when absent); a new |
| | value for a key becomes version n+1 and supersedes the old one; with |
| | ``dedupe_threshold``, a near-identical fact updates the existing one instead |
| | (``created`` / ``updated``); ``public=True`` shares it with the whole tenant |
| ``remember`` | hybrid search over the user's private facts and the tenant's public ones; |
| | current versions only, unless ``history=True`` adds the superseded ones |
| ``forget`` | ``id``, ``key``, ``oldest``, ``least important``, ``before``, ``older than``, |
| | ``matching``, ``fade``, ``all`` |
| ``summarize`` | extractive over current facts |
| ``get_capacity_info`` | private facts and their tokens |

Old versions are not kept as records: the event log holds every version, and ``history``
reads them from it.
"""

from __future__ import annotations

import hashlib
import re
from datetime import datetime
from typing import Any, ClassVar

from engramdb.core.events import MemoryWritten
from engramdb.core.intent import MemorizeResult, MemoryItem
from engramdb.core.scope import ScopeFilter
from engramdb.index.query_terms import query_terms
from engramdb.orchestrator.plugin import StoredMemoryType, TypeLimits, require_item
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.backend import EventQuery

NAMESPACE = "semantic"
PUBLIC_NAMESPACE = "semantic_public"
_SLUG = re.compile(r"[^a-z0-9]+")


def fact_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """Full-text key of a fact: its semantic key and its text."""
    text = value.get("text", "") if isinstance(value, dict) else str(value)
    return f"{key.replace('.', ' ').replace('_', ' ')} {text}"


def fact_embed_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """A fact's vector comes from its text alone, so near-duplicates compare equal."""
    return str(value.get("text", "")) if isinstance(value, dict) else str(value)


SEMANTIC_SPEC = ProjectionSpec(
    NAMESPACE, key_text=fact_key_text, vectors=True, embed_text=fact_embed_text
)
PUBLIC_SPEC = ProjectionSpec(
    PUBLIC_NAMESPACE,
    levels=("tenant",),
    key_text=fact_key_text,
    vectors=True,
    embed_text=fact_embed_text,
)


def derive_key(text: str) -> str:
    """A semantic key for a fact given without one: its first content words, slugged, and a
    short hash of the whole text so different facts do not collide."""
    words = [_SLUG.sub("", w) for w in query_terms(text)[:5]]
    slug = ".".join(w for w in words if w) or "fact"
    digest = hashlib.sha256(" ".join(text.lower().split()).encode()).hexdigest()[:8]
    return f"{slug[:64]}.{digest}"


class SemanticMemory(StoredMemoryType):
    """Semantic memory of one scope (see the module docstring)."""

    name: ClassVar[str] = NAMESPACE
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

    def __init__(
        self,
        provider: EventSourcedProvider,
        public: EventSourcedProvider,
        limits: TypeLimits | None = None,
    ) -> None:
        super().__init__(provider, limits)
        self.public = public

    async def memorize(
        self, item: MemoryItem, *, public: bool = False, dedupe_threshold: float | None = None
    ) -> MemorizeResult:
        """Store a fact; see the module docstring for versions and dedupe."""
        require_item(item)
        target = self.public if public else self.provider
        key = item.key or item.id or derive_key(item.text)
        current = await target.read_record(key)
        version = 1
        if current is not None and isinstance(current.value, dict):
            version = int(current.value.get("version", 1)) + 1
        request = self._request(item, key=key, version=version)
        if dedupe_threshold is not None:
            entry, status = await target.upsert_similar(request, dedupe_threshold)
            # The same fact (or key) written again is an update even when nothing scores
            # similarity: without an embedder only an identical value counts as a twin, and a
            # new version's value differs from the old one by its version number.
            if current is not None and entry.key == key:
                status = "updated"
            return MemorizeResult(id=entry.key, status=status)
        entry = (await target.write_many([request]))[0]
        evicted = await self._evict() if not public else []
        status = "updated" if current is not None else "created"
        return MemorizeResult(id=entry.key, status=status, evicted=evicted)

    async def remember(
        self,
        prompt: str,
        *,
        limit: int = 10,
        filters: dict[str, Any] | None = None,
        history: bool = False,
        raw: bool = False,
    ) -> list[MemoryItem]:
        """Current facts relevant to ``prompt`` (private and public), best first; with
        ``history``, each is followed by its superseded versions, newest first. Redacted
        unless ``raw``."""
        found = await self._search(prompt, limit, filters)
        public = (
            await self._search(prompt, limit, filters, provider=self.public)
            if await self.public.count()
            else []
        )
        merged = sorted(found + public, key=lambda i: -(i.score or 0.0))[:limit]
        if not history:
            return self.redacted(merged, raw)
        with_history: list[MemoryItem] = []
        for item in merged:
            with_history.append(item)
            with_history += await self.history(item.id or "", skip_current=True, raw=True)
        return self.redacted(with_history, raw)

    async def history(
        self, key: str, *, skip_current: bool = False, raw: bool = False
    ) -> list[MemoryItem]:
        """Every version of ``key`` (private, else public) from the log, newest first;
        superseded ones have ``superseded`` set. Redacted unless ``raw``."""
        for provider in (self.provider, self.public):
            events = await provider.backend.events.read(
                EventQuery(
                    event_types=(MemoryWritten.event_type,),
                    provider_id=provider.provider_id,
                    scope=ScopeFilter(provider.partition, provider.spec.levels),
                    key=key,
                )
            )
            versions = [e for e in events if e.payload.get("redacted") != 1]
            if versions:
                break
        else:
            return []
        items = []
        for n, event in enumerate(reversed(versions)):
            if skip_current and n == 0:
                continue
            written = MemoryWritten.from_envelope(event)
            value = written.value if isinstance(written.value, dict) else {"text": written.value}
            items.append(
                MemoryItem(
                    id=key,
                    key=key,
                    text=str(value.get("text", "")),
                    importance=float(value.get("importance", 0.5)),
                    occurred_at=written.occurred_at or event.occurred_at,
                    metadata=written.metadata,
                    version=int(value.get("version", 1)),
                    superseded=n > 0,
                )
            )
        return self.redacted(items, raw)
