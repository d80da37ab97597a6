"""``SemanticMemory``: facts and knowledge, one current version per semantic key.

| operation | here |
|---|---|
| ``memorize`` | stores the fact under ``item.key`` (derived from the text when absent); a new |
| | value for a key becomes version n+1 and supersedes the old one; with |
| | ``dedupe_threshold``, a near-identical fact updates the existing one instead |
| | (``created`` / ``updated``); ``public=True`` shares it with the whole tenant |
| ``remember`` | hybrid search over the user's private facts and the tenant's public ones; |
| | current versions that hold now, unless ``history=True`` adds the superseded |
| | (and ended) ones; ``as_of`` gives the version of each fact that held then |
| ``forget`` | ``id``, ``key``, ``oldest``, ``least important``, ``before``, ``older than``, |
| | ``matching``, ``fade``, ``all`` |
| ``summarize`` | extractive over current facts |
| ``get_capacity_info`` | private facts and their tokens |

Old versions are not kept as records: the event log holds every version, and ``history``
reads them from it. A fact's validity (``valid_from`` / ``valid_to``) is kept with each
version: a version ends where the next begins, and a fact whose ``valid_to`` has passed no
longer holds (it is history, shown with ``history=True``). Facts of kind ``profile``,
``event``, ``activity`` or ``mind`` are stored under that content type, the others as ``fact``.
What a model inferred about the user (``metadata["inferred"]``) is left out of ``remember``
unless asked for with ``inferred=True``: an agent reads what the user said first.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import replace
from datetime import datetime
from typing import Any, ClassVar

from engramdb.core.errors import ValidationError
from engramdb.core.events import MemoryWritten
from engramdb.core.intent import MemorizeResult, MemoryItem
from engramdb.core.scope import ScopeFilter
from engramdb.core.types import utc_now
from engramdb.index.query_terms import query_terms
from engramdb.orchestrator.plugin import StoredMemoryType, TypeLimits, require_item
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.backend import EventQuery

NAMESPACE = "semantic"
PUBLIC_NAMESPACE = "semantic_public"
#: Item kinds stored under a content type of their own (rfc-2001's formed categories).
_OWN_CONTENT_TYPES = frozenset({"profile", "event", "activity", "mind"})
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

    def content_type(self, item: MemoryItem) -> str:
        """``profile``, ``event`` or ``activity`` for items of that kind, else ``fact``."""
        return item.kind if item.kind in _OWN_CONTENT_TYPES else "fact"

    async def memorize(
        self,
        item: MemoryItem,
        *,
        public: bool = False,
        dedupe_threshold: float | None = None,
        expected_version: int | None = None,
        create: bool = False,
    ) -> MemorizeResult:
        """Store a fact; see the module docstring for versions and dedupe. With
        ``expected_version``, only over that stored version of the key
        (``VersionConflictError`` otherwise); with ``create``, only if nothing holds the key
        (``ConflictError``): a writer that decided on what it read writes nothing if another
        wrote in between."""
        require_item(item)
        if dedupe_threshold is not None and (expected_version is not None or create):
            raise ValidationError("a deduplicated write takes no expected version")
        target = self.public if public else self.provider
        key = item.key or item.id or derive_key(item.text)
        current = await target.read_record(key)
        version = 1
        if current is not None and isinstance(current.value, dict):
            version = int(current.value.get("version", 1)) + 1
        request = replace(
            self._request(item, key=key, version=version),
            expected_version=expected_version,
            create=create,
        )
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
        as_of: datetime | None = None,
        raw: bool = False,
        inferred: bool = False,
    ) -> list[MemoryItem]:
        """Facts relevant to ``prompt`` (private and public) that hold now, best first.

        Facts a model inferred (``metadata["inferred"]``) are left out unless ``inferred``.

        With ``history``, each is followed by its superseded versions, newest first, and
        facts that no longer hold are kept. With ``as_of``, each fact found is given in the
        version that held at that moment (facts that did not hold then are left out).
        Redacted unless ``raw``.
        """
        wanted = limit if history else limit * 2  # room for facts that no longer hold
        found = await self._search(prompt, wanted, filters)
        public = (
            await self._search(prompt, wanted, filters, provider=self.public)
            if await self.public.count()
            else []
        )
        merged = sorted(found + public, key=lambda i: -(i.score or 0.0))
        if not inferred:
            merged = [i for i in merged if not i.metadata.get("inferred")]
        if as_of is not None:
            return (await self._as_of(merged, as_of, raw))[:limit]
        if not history:
            now = utc_now()
            holding = [i for i in merged if i.valid_to is None or i.valid_to > now]
            return self.redacted(holding[:limit], raw)
        with_history: list[MemoryItem] = []
        for item in merged[:limit]:
            with_history.append(item)
            with_history += await self.history(item.id or "", skip_current=True, raw=True)
        return self.redacted(with_history, raw)

    async def _as_of(
        self, items: list[MemoryItem], moment: datetime, raw: bool
    ) -> list[MemoryItem]:
        held = []
        for item in items:
            for version in await self.history(item.id or "", raw=raw):
                start = version.valid_from or version.occurred_at
                if (start is None or start <= moment) and (
                    version.valid_to is None or moment < version.valid_to
                ):
                    held.append(version.model_copy(update={"score": item.score}))
                    break
        return held

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
        items: list[MemoryItem] = []
        for n, event in enumerate(reversed(versions)):
            written = MemoryWritten.from_envelope(event)
            value = written.value if isinstance(written.value, dict) else {"text": written.value}
            item = MemoryItem(
                id=key,
                key=key,
                text=str(value.get("text", "")),
                kind=str(value.get("kind", "fact")),
                importance=float(value.get("importance", 0.5)),
                occurred_at=written.occurred_at or event.occurred_at,
                metadata=written.metadata,
                version=int(value.get("version", 1)),
                superseded=n > 0,
                valid_from=value.get("valid_from"),
                valid_to=value.get("valid_to"),
            )
            if items and item.valid_to is None:
                # A version held until the next one (newer, listed before it) began; a newer
                # version of the same start restates it (ended, or marked) and ends with it.
                newer = items[-1]
                begins = newer.valid_from or newer.occurred_at
                same = begins == (item.valid_from or item.occurred_at)
                item = item.model_copy(update={"valid_to": newer.valid_to if same else begins})
            items.append(item)
        return self.redacted(items[1:] if skip_current else items, raw)
