"""The pure projection of memory events into records — the one definition of what the log
means, used by rebuild (and mirrored by every backend's upsert).

Rules: ``memory.written`` creates or replaces a key (a replace keeps ``created_at`` and the
thread, and sets ``updated_at`` to the event's time; ``expires_at`` is the event's time plus
``ttl_ms``); ``memory.deleted`` removes it (``hard``) or hides it (``soft``, until
``memory.restored``); ``memory.expired`` removes it. A record's partition is the
event's scope narrowed to the namespace's levels, its thread the session it was written in,
and its full-text key whatever the namespace's ``key_text`` makes of it. A record's version
counts the writes, soft forgets and restores of the key since it was created (1 when new), as
every backend counts them when it stores them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from engramdb.core.events import (
    EventEnvelope,
    MemoryDeleted,
    MemoryExpired,
    MemoryRestored,
    MemoryWritten,
)
from engramdb.core.scope import PERSISTENT_LEVELS, Level, Scope
from engramdb.core.types import MemoryEntry
from engramdb.providers.text_match import flatten_text, searchable_text
from engramdb.storage.records import Record

#: The event types a key/value projection folds.
PROJECTED_TYPES = (
    MemoryWritten.event_type,
    MemoryDeleted.event_type,
    MemoryRestored.event_type,
    MemoryExpired.event_type,
)

#: Builds a record's full-text key from its key, value and the time it happened.
KeyText = Callable[[str, Any, datetime | None], str]
#: The texts of a record's part vectors (each scored on its own, the best one counting).
KeyParts = Callable[[str, Any, datetime | None], list[str]]


def plain_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The default full-text key: the key and every word of the value, lowercased."""
    return searchable_text(key, value)


def plain_embed_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The default text to embed: the value's words alone, so the same content under two keys
    has the same vector (what near-duplicate detection compares)."""
    return flatten_text(value)


@dataclass(frozen=True)
class ProjectionSpec:
    """How one namespace's events become records: its partition levels, its full-text key,
    whether its records carry embedding vectors, the text those are computed from, and the
    texts of extra part vectors (``embed_parts``: a search scores a record by the best of its
    whole-text and part vectors)."""

    namespace: str
    levels: tuple[Level, ...] = PERSISTENT_LEVELS
    key_text: KeyText = plain_key_text
    vectors: bool = False
    embed_text: KeyText = plain_embed_text
    embed_parts: KeyParts | None = None

    def record_embed_text(self, record: Record) -> str:
        """The text ``record``'s vector is computed from."""
        return self.embed_text(record.key, record.value, record.occurred_at)

    def record_embed_parts(self, record: Record) -> list[str]:
        """The texts of ``record``'s part vectors (its sentences, say); none by default."""
        if self.embed_parts is None:
            return []
        return self.embed_parts(record.key, record.value, record.occurred_at)


def written_record(
    spec: ProjectionSpec, origin: Scope, event: MemoryWritten, at: datetime
) -> Record:
    """The record a ``memory.written`` event (written in scope ``origin`` at ``at``)
    describes, as if the key were new."""
    return Record(
        namespace=spec.namespace,
        scope=origin.narrow(spec.levels),
        key=event.key,
        value=event.value,
        content_type=event.content_type,
        metadata=event.metadata,
        created_at=at,
        ttl_ms=event.ttl_ms,
        expires_at=at + timedelta(milliseconds=event.ttl_ms) if event.ttl_ms else None,
        text=spec.key_text(event.key, event.value, event.occurred_at),
        thread=origin.session or "",
        occurred_at=event.occurred_at,
    )


def upsert(previous: Record | None, new: Record) -> Record:
    """``new`` stored over ``previous``: creation time and thread kept, update time set,
    version counted on."""
    if previous is None:
        return new
    return replace(
        new,
        created_at=previous.created_at,
        updated_at=new.created_at,
        thread=previous.thread,
        version=previous.version + 1,
    )


def _hidden(record: Record, at: datetime | None) -> Record:
    return replace(record, hidden_at=at, version=record.version + 1)


def fold(
    events: Iterator[EventEnvelope] | Iterable[EventEnvelope], spec: ProjectionSpec
) -> list[Record]:
    """Replay ``events`` of ``spec.namespace`` into the records they leave behind."""
    state: dict[tuple[Scope, str], Record] = {}
    for envelope in events:
        if envelope.provider_id != spec.namespace or envelope.payload.get("redacted") == 1:
            # A redacted event kept only a tombstone: the hard forget that blanked it
            # follows in the log and removes the key.
            continue
        partition = envelope.scope.narrow(spec.levels)
        kind = envelope.event_type
        if kind == MemoryWritten.event_type:
            written = MemoryWritten.from_envelope(envelope)
            slot = (partition, written.key)
            state[slot] = upsert(
                state.get(slot), written_record(spec, envelope.scope, written, envelope.occurred_at)
            )
        elif kind == MemoryDeleted.event_type:
            deleted = MemoryDeleted.from_envelope(envelope)
            slot = (partition, deleted.key)
            if deleted.mode == "soft":
                if slot in state:
                    state[slot] = _hidden(state[slot], envelope.occurred_at)
            else:
                state.pop(slot, None)
        elif kind == MemoryRestored.event_type:
            slot = (partition, MemoryRestored.from_envelope(envelope).key)
            if slot in state:
                state[slot] = _hidden(state[slot], None)
        elif kind == MemoryExpired.event_type:
            state.pop((partition, MemoryExpired.from_envelope(envelope).key), None)
    return list(state.values())


def record_entry(record: Record) -> MemoryEntry:
    """The public ``MemoryEntry`` of a stored record."""
    return MemoryEntry(
        key=record.key,
        value=record.value,
        content_type=record.content_type,
        metadata=record.metadata,
        created_at=record.created_at,
        updated_at=record.updated_at,
        ttl_ms=record.ttl_ms,
        expires_at=record.expires_at,
        provider_id=record.namespace,
        scope=record.scope,
        version=record.version,
    )
