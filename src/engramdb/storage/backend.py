"""The storage contracts: ``EventStore`` (the append-only log) and ``Backend`` (projections
plus the log, written together).

A backend implements few primitives; the engine builds the rest once. The one write primitive
is ``commit``: record operations and the events that describe them, applied in one transaction,
so a state change is never stored without its event, nor an event without its change.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from engramdb.core.errors import ValidationError
from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.core.validation import check_text
from engramdb.storage.records import Amend, Delete, Op, Record, RecordQuery
from engramdb.storage.search_backend import SearchBackend

#: The largest log position a query may name (the REST API's bound too).
MAX_POSITION = 2**62


@dataclass(frozen=True)
class EventQuery:
    """Which events to read: by type, scope, provider, the entry ``key`` they concern, and
    log position (exclusive ``after``); oldest first unless ``newest_first``."""

    event_types: tuple[str, ...] | None = None
    scope: ScopeFilter | None = None
    provider_id: str | None = None
    after: int = 0
    limit: int | None = None
    key: str | None = None
    newest_first: bool = False

    def __post_init__(self) -> None:
        # Positions are 64-bit integers in both databases; a larger one is a caller's mistake,
        # not a driver's overflow.
        if isinstance(self.after, bool) or not 0 <= self.after <= MAX_POSITION:
            raise ValidationError(
                f"after must be a log position between 0 and {MAX_POSITION}, got {self.after!r}",
                after=str(self.after),
            )
        if self.limit is not None and not 0 <= self.limit <= MAX_POSITION:
            raise ValidationError(
                f"limit must be between 0 and {MAX_POSITION}, got {self.limit!r}",
                limit=str(self.limit),
            )
        # As a scan's strings (``RecordQuery``): refused alike on both backends.
        for name, texts in (
            ("event_types", self.event_types or ()),
            ("provider_id", () if self.provider_id is None else (self.provider_id,)),
            ("key", () if self.key is None else (self.key,)),
        ):
            for text in texts:
                check_text(text, what=name)


@runtime_checkable
class EventStore(Protocol):
    """The append-only event log. Positions start at 1 and only grow."""

    async def append(self, events: Sequence[EventEnvelope]) -> list[EventEnvelope]:
        """Append ``events`` atomically; returns them with their positions."""
        ...

    async def read(self, query: EventQuery | None = None) -> list[EventEnvelope]:
        """Events matching ``query`` in log order."""
        ...

    def stream(
        self, query: EventQuery | None = None, *, batch_size: int = 1000
    ) -> AsyncIterator[EventEnvelope]:
        """Iterate matching events in log order, fetching ``batch_size`` at a time."""
        ...

    async def last_position(self) -> int:
        """Position of the newest event, 0 for an empty log."""
        ...

    async def count(self, query: EventQuery | None = None) -> int:
        """How many events match ``query``."""
        ...


async def paged_events(
    read: Callable[[EventQuery], Awaitable[list[EventEnvelope]]],
    query: EventQuery | None,
    batch_size: int,
) -> AsyncIterator[EventEnvelope]:
    """``EventStore.stream`` built on ``read``: matching events in log order, fetched
    ``batch_size`` at a time by position so memory stays bounded."""
    q = query or EventQuery()
    after, remaining = q.after, q.limit
    while remaining is None or remaining > 0:
        size = batch_size if remaining is None else min(batch_size, remaining)
        batch = await read(
            EventQuery(q.event_types, q.scope, q.provider_id, after=after, limit=size, key=q.key)
        )
        for event in batch:
            yield event
        if len(batch) < size:
            return
        assert batch[-1].position is not None
        after = batch[-1].position
        if remaining is not None:
            remaining -= len(batch)


#: Turns a stream of events into the records they describe (runs inside the rebuild).
Fold = Callable[[Iterator[EventEnvelope]], Iterable[Record]]


@dataclass(frozen=True)
class CommitResult:
    """What a commit stored: the events with positions, each ``Put`` as stored (in op order),
    how many records ``Delete`` removed and ``Hide`` changed, and how many events ``Redact``
    blanked."""

    events: list[EventEnvelope]
    stored: list[Record] = field(default_factory=list)
    deleted: int = 0
    hidden: int = 0
    redacted: int = 0


@dataclass(frozen=True)
class BackendStats:
    """Sizes of a backend's contents."""

    url: str
    records: int
    events: int
    records_by_namespace: dict[str, int]
    size_bytes: int | None


#: Megabytes for building a search index once, at the end of a bulk load: a graph that
#: fits is built in memory, several times faster than one spilled to disk (a million
#: 384-dimension vectors take about 2,300).
INDEX_BUILD_MEMORY_MB = 1024
#: The most a build may be given: PostgreSQL's ceiling for ``maintenance_work_mem``
#: (2,147,483,647 kB).
MAX_INDEX_BUILD_MEMORY_MB = 2_097_151


@runtime_checkable
class Backend(Protocol):
    """Projection storage plus the event log, behind one transaction boundary."""

    url: str

    @property
    def events(self) -> EventStore:
        """The event log of this backend."""
        ...

    @property
    def search(self) -> SearchBackend:
        """Candidate retrieval for hybrid recall."""
        ...

    async def commit(self, ops: Sequence[Op], events: Sequence[EventEnvelope]) -> CommitResult:
        """Apply ``ops`` and append ``events`` in one transaction: all or nothing."""
        ...

    async def amend(
        self, namespace: str, scope: Scope, key: str, decide: Amend, *, writer: Scope | None = None
    ) -> CommitResult:
        """Read the record ``key`` of partition ``scope`` with its row locked against other
        writers, and commit the ops and events ``decide`` makes of it, in one transaction: a
        read-modify-write no concurrent write can come between. ``writer`` is the scope the
        events are written in (the partition's when ``None``). ``decide``'s ``Put``s carry no
        vectors."""
        ...

    async def get(self, namespace: str, scope: Scope, key: str) -> Record | None:
        """The record ``key`` of partition ``scope``, expired or not, if stored."""
        ...

    async def scan(self, query: RecordQuery) -> list[Record]:
        """Records matching ``query``, ordered by key (by row id when ``query.ids`` is set)."""
        ...

    async def keys(self, query: RecordQuery) -> list[str]:
        """Keys of the records matching ``query``, in ``scan`` order."""
        ...

    async def count(self, query: RecordQuery) -> int:
        """How many records match ``query`` (``limit`` and ``offset`` ignored)."""
        ...

    async def rebuild(
        self, namespace: str, scope: ScopeFilter | None, source: EventQuery, fold: Fold
    ) -> int:
        """Recompute the records of ``namespace`` within ``scope`` from the log.

        Afterwards the records are what ``fold`` makes of every event ``source`` selects, the
        events appended while it ran included; writers are held off only for short
        transactions, never for the whole fold (``storage.rebuild.staged_rebuild``). ``fold``
        must be slot-local: a record depends only on the events whose payload names its key.
        Records the log leaves as they are keep their row ids (and vectors). Returns how many
        records the namespace holds within ``scope`` afterwards.
        """
        ...

    def bulk_load(self, index_memory_mb: int) -> AbstractAsyncContextManager[None]:
        """While this runs, build no search index a write would create: each is built once,
        from all the rows, when it ends (with ``index_memory_mb`` megabytes, where the build
        takes a memory setting). A no-op where indexes are not built by writes."""
        ...

    async def stats(self) -> BackendStats:
        """Counts and size of what is stored."""
        ...

    async def close(self) -> None:
        """Release connections; further calls raise ``EngineClosedError``."""
        ...


@runtime_checkable
class QueuedVectorWrites(Protocol):
    """A backend whose every read and write asked for after ``queue_vectors`` returns comes
    after the vectors it queued (SQLite's one connection runs them in order; PostgreSQL holds
    the tenant's later transactions until they are committed), so their writer need not wait
    for their commit to be read back."""

    def queue_vectors(
        self,
        model: str,
        vectors: Sequence[tuple[int, bytes]],
        events: Sequence[EventEnvelope],
        versions: Sequence[int],
        *,
        parts: Sequence[bytes | None] | None = None,
        deletes: Sequence[Delete] = (),
    ) -> asyncio.Future[None]:
        """``search.put_vectors`` of whole-text vectors (and ``parts``, aligned with them),
        each for the record version ``versions`` gives (a record written again meanwhile
        keeps its own vectors), queued before this returns, with ``deletes`` (the pending
        records the vectors settle; their ``memory.deleted`` events are among ``events``) in
        the same transaction; the future is done once they are committed (or failed, with the
        driver's error). Their commit need not be durable at once: the next durable commit
        makes it so, and a crash before it loses vectors that are owed by a durable record
        (``DeferredParts``), not data."""
        ...
