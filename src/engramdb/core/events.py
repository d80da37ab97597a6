"""``EventEnvelope`` and the memory domain events of rfc-2001 §8.

Every persistent change is first an event. An envelope wraps one domain event with its identity
(``event_id``), kind (``event_type`` and ``schema_version``), time, producer, trace
(correlation and causation ids) and the scope it happened in; the event store gives it a
``position`` in the log when it is appended.
"""

from __future__ import annotations

import os
import socket
import time
from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import ConfigDict, Field

from engramdb.core.model import EngramModel
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now

_MS_BITS = (1 << 48) - 1
_RAND_A = (1 << 12) - 1
_RAND_B = (1 << 62) - 1


def new_id() -> str:
    """A fresh identifier: a version 7 UUID (RFC 9562) in hex form.

    Its first 48 bits are the Unix time in milliseconds and the other 74 free bits random, so
    an id made later sorts later. Indexes over ids (the event log's, a partition's keys) then
    grow at their end, where the pages being written are already in memory; with random ids
    every insert into a large index touched a page of its own.
    """
    millis = time.time_ns() // 1_000_000 & _MS_BITS
    rand = int.from_bytes(os.urandom(10), "big")
    value = millis << 80 | 0x7 << 76 | (rand >> 62 & _RAND_A) << 64 | 0b10 << 62 | rand & _RAND_B
    return f"{value:032x}"


class ProducerRef(EngramModel):
    """Who appended an event: a component name and the process instance it ran in."""

    model_config = ConfigDict(frozen=True)

    name: str = "engramdb"
    instance: str = Field(default_factory=lambda: f"{socket.gethostname()}:{os.getpid()}")


class TraceContext(EngramModel):
    """Correlation across a chain of events: one ``correlation_id`` per logical operation,
    ``causation_id`` naming the event (or request) that caused this one."""

    model_config = ConfigDict(frozen=True)

    correlation_id: str = Field(default_factory=new_id)
    causation_id: str | None = None

    def caused_by(self, event_id: str) -> TraceContext:
        """The trace of an event caused by ``event_id`` in the same operation."""
        return TraceContext(correlation_id=self.correlation_id, causation_id=event_id)


class EventEnvelope(EngramModel):
    """One entry of the event log."""

    model_config = ConfigDict(frozen=True)

    event_id: str = Field(default_factory=new_id)
    event_type: str = Field(min_length=1, max_length=128)
    schema_version: int = Field(default=1, ge=1)
    occurred_at: datetime = Field(default_factory=utc_now)
    producer: ProducerRef = Field(default_factory=ProducerRef)
    trace: TraceContext = Field(default_factory=TraceContext)
    scope: Scope = Field(default_factory=Scope)
    payload: dict[str, Any] = Field(default_factory=dict)
    position: int | None = None

    @property
    def provider_id(self) -> str:
        """The provider the event concerns, or an empty string."""
        value = self.payload.get("provider_id", "")
        return value if isinstance(value, str) else ""


class DomainEvent(EngramModel):
    """Base of the typed memory events; ``to_envelope`` puts one in the log's format."""

    event_type: ClassVar[str]
    schema_version: ClassVar[int] = 1

    def to_envelope(
        self,
        *,
        scope: Scope,
        producer: ProducerRef | None = None,
        trace: TraceContext | None = None,
        occurred_at: datetime | None = None,
    ) -> EventEnvelope:
        """Wrap this event in an envelope for ``scope``."""
        return EventEnvelope(
            event_type=self.event_type,
            schema_version=self.schema_version,
            occurred_at=occurred_at or utc_now(),
            producer=producer or ProducerRef(),
            trace=trace or TraceContext(),
            scope=scope,
            payload=self.model_dump(mode="json"),
        )

    @classmethod
    def from_envelope(cls, envelope: EventEnvelope) -> Self:
        """The typed event inside ``envelope``."""
        return cls.model_validate(envelope.payload)


class MemoryWritten(DomainEvent):
    """An entry was created or updated. With the envelope's time (which gives ``created_at``,
    ``updated_at`` and ``expires_at``) it carries everything needed to rebuild it exactly."""

    event_type: ClassVar[str] = "memory.written"

    key: str
    value: Any
    value_type: str
    content_type: str = "fact"
    provider_id: str = ""
    metadata: dict[str, Any] = Field(default_factory=dict)
    ttl_ms: int | None = None
    occurred_at: datetime | None = None


class MemoryDeleted(DomainEvent):
    """An entry was removed (``hard``) or hidden but kept (``soft``). ``purged`` says its
    content was also blanked from every earlier event of the log (a hard forget)."""

    event_type: ClassVar[str] = "memory.deleted"

    key: str
    provider_id: str = ""
    mode: Literal["hard", "soft"] = "hard"
    purged: bool = False


class MemoryRestored(DomainEvent):
    """A soft-forgotten entry was made visible again."""

    event_type: ClassVar[str] = "memory.restored"

    key: str
    provider_id: str = ""


class MemoryLinked(DomainEvent):
    """Two entries were linked by a relation (graph). ``key`` names the relation and
    ``value`` holds it whole (its times included), so the link can be rebuilt exactly."""

    event_type: ClassVar[str] = "memory.linked"

    source_key: str
    target_key: str
    relation: str
    provider_id: str = ""
    properties: dict[str, Any] = Field(default_factory=dict)
    key: str | None = None
    value: dict[str, Any] | None = None


class MemoryInvalidated(DomainEvent):
    """A fact stopped being true (``invalid_at``, world time) and was retired as the current
    belief (``expired_at``, when Engram learned it) — kept, not deleted. ``superseded_by``
    names the entry that contradicted it, if one did."""

    event_type: ClassVar[str] = "memory.invalidated"

    key: str
    provider_id: str = ""
    invalid_at: datetime
    expired_at: datetime
    superseded_by: str | None = None


class MemoryIndexed(DomainEvent):
    """An entry was added to a search index (``index_type`` ``vector``: its embedding by
    ``model`` was stored; full-text indexing is part of every write and not reported)."""

    event_type: ClassVar[str] = "memory.indexed"

    key: str
    index_type: str
    provider_id: str = ""
    model: str = ""


class MemoryExpired(DomainEvent):
    """An entry was removed by TTL or cleanup."""

    event_type: ClassVar[str] = "memory.expired"

    key: str
    reason: str = "ttl"
    provider_id: str = ""


class MemoryProviderRegistered(DomainEvent):
    """A provider became available, with its tier and capabilities."""

    event_type: ClassVar[str] = "memory.provider.registered"

    provider_id: str
    tier: str
    capabilities: dict[str, Any]


#: Every domain event type by its ``event_type`` name.
EVENT_TYPES: dict[str, type[DomainEvent]] = {
    cls.event_type: cls
    for cls in (
        MemoryWritten,
        MemoryDeleted,
        MemoryRestored,
        MemoryLinked,
        MemoryInvalidated,
        MemoryIndexed,
        MemoryExpired,
        MemoryProviderRegistered,
    )
}
