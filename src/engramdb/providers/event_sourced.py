"""``EventSourcedProvider``: persistent memory whose state is a projection of the event log
(rfc-2002 §6.2).

Every write, delete and expiry appends its event (``memory.written``, ``memory.deleted``,
``memory.expired``) in the same transaction as the projection change, so the two never
disagree; ``rebuild()`` recomputes the projection from the log alone.

Records are partitioned by tenant, user and agent by default (``ProjectionSpec.levels``), so
what one session learns is there in the next; the event keeps the writer's full scope, session
included. Search is hybrid through an ``Indexer``: BM25 always, plus vector similarity when the
namespace stores vectors and the indexer has an embedder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from engramdb.core.errors import EmbedderUnavailableError, ProviderReadOnlyError, ValidationError
from engramdb.core.events import (
    EventEnvelope,
    MemoryDeleted,
    MemoryExpired,
    MemoryRestored,
    MemoryWritten,
    ProducerRef,
    TraceContext,
)
from engramdb.core.scope import LEVELS, Scope, ScopeFilter
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
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC
from engramdb.providers.indexing import Embedded, Indexer, SearchHit, SearchRequest
from engramdb.providers.projection import (
    PROJECTED_TYPES,
    ProjectionSpec,
    fold,
    record_entry,
    written_record,
)
from engramdb.providers.record_first import vector_queue, write_record_first
from engramdb.storage.backend import Backend, EventQuery
from engramdb.storage.records import (
    Delete,
    Expect,
    Hide,
    Op,
    Put,
    Record,
    RecordQuery,
    Redact,
    check_expected,
)

UpsertStatus = Literal["created", "updated"]


class WriteCompanion(Protocol):
    """Work that rides along with a provider's writes: ``ops_for`` adds its own ops and events
    to the write's transaction (committed with it or not at all), ``committed`` hears of the
    records once they are stored."""

    def ops_for(
        self, provider: EventSourcedProvider, records: Sequence[Record]
    ) -> tuple[list[Op], list[EventEnvelope]]:
        """The ops and events to commit with ``records``."""
        ...

    def committed(self, provider: EventSourcedProvider, records: Sequence[Record]) -> None:
        """``records`` were committed (their companion ops with them)."""
        ...


@dataclass(frozen=True)
class WriteRequest:
    """One entry of a batched write (see ``EventSourcedProvider.write_many``); with
    ``create``, the batch fails with ``ConflictError`` if a live entry holds the key; with
    ``expected_version``, with ``VersionConflictError`` unless the stored entry is at that
    version (``NotFoundError`` if there is none) — each decided inside the write's
    transaction, so two writers cannot both create the key or both replace one version."""

    key: str
    value: Any
    content_type: str = "fact"
    metadata: dict[str, Any] = field(default_factory=dict)
    ttl_ms: int | None = None
    occurred_at: datetime | None = None
    create: bool = False
    expected_version: int | None = None


class EventSourcedProvider(MemoryProvider):
    """Durable key/value memory over a ``Backend``, one partition per scope."""

    def __init__(
        self,
        backend: Backend,
        scope: Scope | None = None,
        *,
        provider_id: str = "event_sourced",
        spec: ProjectionSpec | None = None,
        indexer: Indexer | None = None,
        tier: MemoryTier = MemoryTier.PERSISTENT,
        producer: ProducerRef | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        read_only: bool = False,
    ) -> None:
        self.backend = backend
        self.scope = scope or Scope()
        self.spec = spec or ProjectionSpec(provider_id)
        if self.spec.namespace != provider_id:
            raise ValueError("the projection spec must name this provider's namespace")
        self.provider_id = provider_id
        self.partition = self.scope.narrow(self.spec.levels)
        self.indexer = indexer or Indexer(backend)
        self.tier = tier
        self.producer = producer or ProducerRef()
        self.max_value_bytes = max_value_bytes
        self.read_only = read_only
        self.trace: TraceContext | None = None
        #: Committed with every write of this provider, when set (automatic formation).
        self.companion: WriteCompanion | None = None

    def capabilities(self) -> ProviderCapabilities:
        """Its tier (persistent by default), with hybrid search."""
        return ProviderCapabilities(
            provider_id=self.provider_id,
            tier=self.tier,
            supports_search=True,
            read_only=self.read_only,
        )

    def _envelope(
        self,
        event: MemoryWritten | MemoryDeleted | MemoryRestored,
        scope: Scope | None = None,
        trace: TraceContext | None = None,
    ) -> EventEnvelope:
        return event.to_envelope(
            scope=scope or self.scope,
            producer=self.producer,
            trace=trace or self.trace or TraceContext(),
        )

    def _check_writable(self) -> None:
        if self.read_only:
            raise ProviderReadOnlyError(
                f"provider {self.provider_id!r} is read-only", provider_id=self.provider_id
            )

    @property
    def _embeds(self) -> bool:
        return self.spec.vectors and self.indexer.embedder is not None

    async def write(
        self,
        key: str,
        value: Any,
        *,
        content_type: str = "fact",
        metadata: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
        expected_version: int | None = None,
    ) -> MemoryEntry:
        """Store ``value`` and its ``memory.written`` event in one transaction; with
        ``expected_version``, only over that version of the entry (see ``WriteRequest``)."""
        validate_key(key)
        validate_content_type(content_type)
        if metadata is not None and not isinstance(metadata, dict):
            raise ValidationError("metadata must be a dict", field="metadata")
        (entry,) = await self.write_many(
            [
                WriteRequest(
                    key,
                    value,
                    content_type,
                    metadata or {},
                    ttl_ms,
                    expected_version=expected_version,
                )
            ]
        )
        return entry

    def foresee(self, text: str) -> None:
        """Begin embedding ``text``, what a lone write about to be prepared embeds (its whole
        text: a lone write's parts are deferred): the model runs while the caller prepares the
        write (``Indexer.foresee``). Nothing is validated or written here."""
        if self._embeds and not self.read_only:
            self.indexer.foresee(text)

    def _event(self, request: WriteRequest) -> MemoryWritten:
        validate_key(request.key)
        validate_content_type(request.content_type)
        validate_ttl(request.ttl_ms)
        stored_value, _ = normalize_value(request.value, max_bytes=self.max_value_bytes)
        return MemoryWritten(
            key=request.key,
            value=stored_value,
            value_type=type(request.value).__name__,
            content_type=request.content_type,
            provider_id=self.provider_id,
            metadata=normalize_metadata(request.metadata),
            ttl_ms=request.ttl_ms,
            occurred_at=request.occurred_at,
        )

    async def write_many(self, requests: Sequence[WriteRequest]) -> list[MemoryEntry]:
        """Store several entries and their events in one transaction (all or none).

        Everything is validated before anything is embedded or written; vectors are computed
        in one batch before the transaction.
        """
        self._check_writable()
        events = [self._event(request) for request in requests]
        for request in requests:
            check_version(request.expected_version)
        if len({e.key for e in events}) != len(events):
            raise ValidationError("a batch may not write the same key twice")
        trace = self.trace or TraceContext()
        envelopes = [self._envelope(event, trace=trace) for event in events]
        records = [
            written_record(self.spec, self.scope, event, envelope.occurred_at)
            for event, envelope in zip(events, envelopes, strict=True)
        ]
        # Part vectors are most of the embedding work: a lone write is acknowledged with its
        # whole-text vector and a durable note that its parts are owed (``DeferredParts``),
        # committed while the model computes that vector (``record_first``). A batch, whose
        # caller waits for throughput rather than for one turn, embeds all at once.
        # The model begins first; the transaction is prepared (and on SQLite committed) while
        # it runs.
        deferring = self._embeds and self.spec.embed_parts is not None and len(records) == 1
        with self.indexer.deferred.writing():
            embedding = (
                self.indexer.embedding_for_write(self.spec, records, parts=not deferring)
                if self._embeds
                else None
            )
            try:
                queue = vector_queue(self, records)
            except BaseException:
                if embedding is not None:
                    embedding.cancel()
                raise
            if queue is not None and embedding is not None:
                return await write_record_first(
                    self, queue, embedding, requests, records, envelopes, trace
                )
            return await self._embed_and_commit(
                embedding, requests, records, envelopes, trace, deferring
            )

    async def _embed_and_commit(
        self,
        embedding: asyncio.Future[Embedded] | None,
        requests: Sequence[WriteRequest],
        records: list[Record],
        envelopes: list[EventEnvelope],
        trace: TraceContext,
        deferring: bool,
    ) -> list[MemoryEntry]:
        # Prepared while the model runs: once the vectors are in, the commit is all that is
        # left. An unavailable model does not fail the write: it commits without vectors and
        # the records are embedded later (``Indexer.written``).
        try:
            ops = self.expectations(records, requests)
            indexed = (
                self.indexer.indexed_events(records, envelopes, self.scope, trace)
                if embedding is not None
                else []
            )
            markers, marker_ops, marker_events = (
                self.owed_parts(records) if deferring else ([], [], [])
            )
            extra_ops, extra_events = self.companion_writes(records)
            embedded = await embedding if embedding is not None else None
        except BaseException:
            if embedding is not None:
                embedding.cancel()
            raise
        vectors = embedded[0] if embedded else None
        vector_sets = zip(*embedded, strict=True) if embedded else ((None, None) for _ in records)
        model = self.indexer.model if embedded else ""
        ops += [
            Put(r, v, model, p, if_absent=request.create)
            for r, (v, p), request in zip(records, vector_sets, requests, strict=True)
        ]
        if vectors:
            envelopes += indexed
        if not embedded:
            markers = []
        elif markers:
            ops += marker_ops
            envelopes += marker_events
        result = await self.backend.commit(ops + extra_ops, envelopes + extra_events)
        stored = result.stored[: len(records)]
        self.indexer.committed(
            self.provider_id,
            self.partition,
            stored,
            vectors,
            embedded[1] if embedded else None,
        )
        if self._embeds:
            self.indexer.written(self.spec, stored, embedded)
        if markers:
            self.indexer.deferred.committed(self.spec, self.partition, stored, markers, self.scope)
        if self.companion is not None:
            self.companion.committed(self, stored)
        return [record_entry(r) for r in stored]

    def expectations(self, records: Sequence[Record], requests: Sequence[WriteRequest]) -> list[Op]:
        """The version checks of a write's requests that name an ``expected_version``."""
        return [
            Expect(self.provider_id, self.partition, r.key, request.expected_version)
            for r, request in zip(records, requests, strict=True)
            if request.expected_version is not None
        ]

    def owed_parts(
        self, records: Sequence[Record], *, whole: bool = False
    ) -> tuple[list[tuple[int, str]], list[Op], list[EventEnvelope]]:
        """The pending-parts records owed by those of ``records`` that have parts (``whole``:
        by each of them, which owes its whole-text vector too): each one's position and key,
        and the ops and events that write them (in the records' transaction)."""
        markers = self.indexer.deferred.marker_requests(self.spec, records, whole=whole)
        if not markers:
            return [], [], []
        ops, events = self._markers_provider().prepared(
            [WriteRequest(key, value, "parts") for _, key, value in markers]
        )
        return [(position, key) for position, key, _ in markers], ops, events

    def companion_writes(self, records: Sequence[Record]) -> tuple[list[Op], list[EventEnvelope]]:
        """The companion's ops and events to commit with ``records`` (none without one)."""
        if self.companion is None:
            return [], []
        return self.companion.ops_for(self, records)

    def _markers_provider(self) -> EventSourcedProvider:
        """Where the pending-parts records of this provider's writes are written."""
        markers = EventSourcedProvider(
            self.backend,
            self.scope,
            provider_id=PARTS_PENDING_SPEC.namespace,
            spec=PARTS_PENDING_SPEC,
            indexer=self.indexer,
            producer=self.producer,
            max_value_bytes=self.max_value_bytes,
        )
        markers.trace = self.trace
        return markers

    def prepared(self, requests: Sequence[WriteRequest]) -> tuple[list[Op], list[EventEnvelope]]:
        """The ops and events that write ``requests`` without vectors, for a caller that
        commits them in a transaction of its own."""
        self._check_writable()
        ops: list[Op] = []
        envelopes: list[EventEnvelope] = []
        for request in requests:
            event = self._event(request)
            envelope = self._envelope(event)
            ops.append(Put(written_record(self.spec, self.scope, event, envelope.occurred_at)))
            envelopes.append(envelope)
        return ops, envelopes

    async def upsert_similar(
        self, request: WriteRequest, threshold: float
    ) -> tuple[MemoryEntry, UpsertStatus]:
        """Write ``request`` unless a live entry of this partition is near-identical to it, in
        which case that entry is updated instead (the service spec's ``dedupe_threshold``).

        Near-identical means cosine similarity of the values' embeddings at or above
        ``threshold``; without an embedder, an identical value. Returns the stored entry and
        ``"created"`` or ``"updated"``. Two concurrent upserts of one new fact may both create.
        """
        if not 0.0 < threshold <= 1.0:
            raise ValidationError("dedupe threshold must be in (0, 1]", threshold=threshold)
        event = self._event(request)
        twin = await self._near_duplicate(event, threshold)
        if twin is None:
            return (await self.write_many([request]))[0], "created"
        updated = WriteRequest(
            twin,
            request.value,
            request.content_type,
            request.metadata,
            request.ttl_ms,
            request.occurred_at,
        )
        return (await self.write_many([updated]))[0], "updated"

    async def _near_duplicate(self, event: MemoryWritten, threshold: float) -> str | None:
        now = utc_now()
        if self._embeds:
            assert self.indexer.embedder is not None
            text = self.spec.embed_text(event.key, event.value, event.occurred_at)
            try:
                nearest = await self.indexer.nearest(
                    self.provider_id,
                    self.partition,
                    self._query(alive_at=now),
                    asyncio.ensure_future(self.indexer.embedder.embed_one(text)),
                    5,
                )
            except EmbedderUnavailableError:
                # The model is busy: only an identical value is known to be a duplicate now.
                return await self._identical(event, now)
            for record_id, similarity in nearest:
                if similarity < threshold:
                    break
                found = await self.backend.scan(self._query(ids=(record_id,), alive_at=now))
                if found:
                    return found[0].key
            return None
        return await self._identical(event, now)

    async def _identical(self, event: MemoryWritten, now: datetime) -> str | None:
        same = await self.backend.keys(self._query(value_equals=event.value, alive_at=now, limit=1))
        return same[0] if same else None

    async def read(self, key: str) -> MemoryEntry | None:
        """The live entry under ``key`` (expired entries read as missing)."""
        record = await self.read_record(key)
        return None if record is None else record_entry(record)

    async def read_record(self, key: str) -> Record | None:
        """The live stored record under ``key``."""
        validate_key(key)
        record = await self.backend.get(self.provider_id, self.partition, key)
        return record if record is not None and _alive(record) else None

    async def delete(self, key: str, *, expected_version: int | None = None) -> bool:
        """Remove ``key`` and append ``memory.deleted``; ``False`` (and no event) if absent.
        Its history stays in the log (see :meth:`forget` for erasing it). With
        ``expected_version``, only that version is deleted (``VersionConflictError``
        otherwise, ``NotFoundError`` if there is no entry)."""
        return await self.forget(key, "hard", purge=False, expected_version=expected_version)

    async def forget(
        self,
        key: str,
        mode: Literal["soft", "hard"] = "soft",
        *,
        purge: bool = True,
        expected_version: int | None = None,
    ) -> bool:
        """Forget ``key``: ``soft`` hides it (kept, restorable with :meth:`restore`); ``hard``
        removes it from state and indexes and, with ``purge``, blanks its content from every
        earlier event of the log, leaving tombstones. One ``memory.deleted`` event either way;
        ``False`` (and no event) if there is no such entry. Decided in the write's
        transaction: of two concurrent forgets of one entry, one forgets it and one gets
        ``False``. With ``expected_version`` see :meth:`delete`."""
        self._check_writable()
        validate_key(key)
        check_version(expected_version)
        if mode not in ("soft", "hard"):
            raise ValidationError("mode must be 'soft' or 'hard'", mode=mode)
        purged = mode == "hard" and purge
        found: list[Record] = []

        def decide(record: Record | None) -> tuple[list[Op], list[EventEnvelope]]:
            if expected_version is not None:
                check_expected(
                    Expect(self.provider_id, self.partition, key, expected_version),
                    None if record is None else record.version,
                )
            if record is None or (mode == "soft" and record.hidden_at is not None):
                return [], []
            found.append(record)
            envelope = self._envelope(
                MemoryDeleted(key=key, provider_id=self.provider_id, mode=mode, purged=purged)
            )
            if mode == "soft":
                return [Hide(self.provider_id, self.partition, key, envelope.occurred_at)], [
                    envelope
                ]
            ops: list[Op] = [Delete(self.provider_id, self.partition, key)]
            if purged:
                ops.append(Redact(self.provider_id, self.partition, self.spec.levels, key))
            return ops, [envelope]

        result = await self.backend.amend(
            self.provider_id, self.partition, key, decide, writer=self.scope
        )
        if found and found[0].id is not None:
            self.indexer.removed(self.provider_id, self.partition, [found[0].id])
        return bool(result.deleted or result.hidden)

    async def update(
        self,
        key: str,
        change: Callable[[Record], WriteRequest],
        *,
        expected_version: int | None = None,
    ) -> MemoryEntry:
        """Replace the live entry ``key`` with what ``change`` makes of it, reading and writing
        in one transaction: concurrent updates each build on the one before, none is lost.
        ``change`` runs inside the transaction (it must not block) and may raise to write
        nothing. No embedding is computed inside a transaction: in a namespace with vectors the
        entry is stored without one, which ``reindex`` computes (resources have none).

        Raises:
            NotFoundError: there is no live entry ``key`` (it never existed, was deleted,
                soft-forgotten or has expired): an update never brings one back.
            VersionConflictError: ``expected_version`` is given and the entry is at another.
        """
        self._check_writable()
        validate_key(key)
        check_version(expected_version)
        trace = self.trace or TraceContext()

        def decide(record: Record | None) -> tuple[list[Op], list[EventEnvelope]]:
            if record is not None and not _alive(record):
                record = None
            check_expected(
                Expect(self.provider_id, self.partition, key, expected_version),
                None if record is None else record.version,
            )
            assert record is not None
            request = change(record)
            if request.key != key:
                raise ValidationError("an update may not change the key", key=key)
            event = self._event(request)
            envelope = self._envelope(event, trace=trace)
            new = written_record(self.spec, self.scope, event, envelope.occurred_at)
            return [Put(new)], [envelope]

        result = await self.backend.amend(
            self.provider_id, self.partition, key, decide, writer=self.scope
        )
        self.indexer.committed(self.provider_id, self.partition, result.stored, None, None)
        return record_entry(result.stored[0])

    async def restore(self, key: str) -> bool:
        """Make a soft-forgotten ``key`` visible again (``memory.restored``); ``False`` if it
        is not soft-forgotten (decided in the write's transaction, like :meth:`forget`)."""
        self._check_writable()
        validate_key(key)

        def decide(record: Record | None) -> tuple[list[Op], list[EventEnvelope]]:
            if record is None or record.hidden_at is None:
                return [], []
            envelope = self._envelope(MemoryRestored(key=key, provider_id=self.provider_id))
            return [Hide(self.provider_id, self.partition, key, None)], [envelope]

        result = await self.backend.amend(
            self.provider_id, self.partition, key, decide, writer=self.scope
        )
        if not result.hidden:
            return False
        self.indexer.invalidate(self.provider_id, self.partition)
        return True

    def _query(self, **fields: Any) -> RecordQuery:
        return RecordQuery(namespace=self.provider_id, scope=self.partition, **fields)

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
        """Hybrid search over this partition, best first, scores in [0, 1]; ``since`` /
        ``until`` bound when the entries happened."""
        hits = await self.search_hits(
            SearchRequest(
                query,
                limit=limit,
                content_types=tuple(content_types) if content_types is not None else None,
                metadata=dict(metadata_filters or {}),
                since=since,
                until=until,
            )
        )
        return [
            RecallResult(
                entry=record_entry(hit.record),
                score=hit.score,
                provider_id=self.provider_id,
                tier=self.tier,
                breakdown=hit.breakdown,
            )
            for hit in hits
        ]

    async def search_hits(self, request: SearchRequest) -> list[SearchHit]:
        """Hybrid search with the full request and score breakdowns (after the part vectors
        this process still owes the partition are stored)."""
        if self.spec.embed_parts is not None:
            await self.indexer.deferred.settle(self.provider_id, self.partition)
        return await self.indexer.search(
            self.provider_id,
            self.partition,
            request,
            use_vectors=self.spec.vectors,
            part_vectors=self.spec.embed_parts is not None,
            document=self.spec.record_embed_text,
        )

    async def list_keys(
        self, *, content_types: list[str] | None = None, prefix: str | None = None
    ) -> list[str]:
        """Keys of live entries, sorted."""
        return await self.backend.keys(
            self._query(
                content_types=tuple(content_types) if content_types is not None else None,
                prefix=prefix,
                alive_at=utc_now(),
            )
        )

    async def count(self) -> int:
        """Live entries of this partition."""
        return await self.backend.count(self._query(alive_at=utc_now()))

    async def entries(self, *, limit: int | None = None, offset: int = 0) -> list[MemoryEntry]:
        """Live entries of this partition ordered by key, a page at a time."""
        records = await self.backend.scan(
            self._query(alive_at=utc_now(), limit=limit, offset=offset)
        )
        return [record_entry(r) for r in records]

    async def evict(self, keys: Sequence[str]) -> list[str]:
        """Remove ``keys`` to make room, each with a ``memory.expired`` event (reason
        ``evicted``); returns the keys that were there."""
        if not keys:
            return []
        records = await self.backend.scan(self._query(keys=tuple(keys), hidden=None))
        removed = await expire_records(self.backend, records, self.producer, reason="evicted")
        self.indexer.removed(
            self.provider_id, self.partition, [r.id for r in records if r.id is not None]
        )
        return removed

    async def sweep_expired(self) -> list[str]:
        """Remove entries whose TTL has run out, each with a ``memory.expired`` event."""
        expired = await self.backend.scan(self._query(expired_at=utc_now()))
        keys = await expire_records(self.backend, expired, self.producer)
        self.indexer.removed(
            self.provider_id, self.partition, [r.id for r in expired if r.id is not None]
        )
        return keys

    async def rebuild(self) -> None:
        """Recompute this partition from the log."""
        await rebuild_namespace(self.backend, self.spec, self.partition)
        self.indexer.forget_all()


def _alive(record: Record) -> bool:
    """Neither soft-forgotten nor expired."""
    if record.hidden_at is not None:
        return False
    return record.expires_at is None or record.expires_at > utc_now()


def check_version(version: int | None) -> None:
    """Reject an expected version that no record can have."""
    if version is not None and (
        isinstance(version, bool) or not isinstance(version, int) or version < 1
    ):
        raise ValidationError("an expected version is a whole number from 1", version=version)


async def expire_records(
    backend: Backend,
    records: list[Record],
    producer: ProducerRef | None = None,
    *,
    reason: str = "ttl",
) -> list[str]:
    """Delete ``records`` with one ``memory.expired`` event each, in one transaction."""
    if not records:
        return []
    trace = TraceContext()
    events = [
        MemoryExpired(key=r.key, reason=reason, provider_id=r.namespace).to_envelope(
            scope=r.scope, producer=producer, trace=trace
        )
        for r in records
    ]
    await backend.commit([Delete(r.namespace, r.scope, r.key) for r in records], events)
    return [r.key for r in records]


async def rebuild_namespace(
    backend: Backend,
    spec: ProjectionSpec,
    partition: Scope | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Recompute the records of ``spec.namespace`` (one partition, or all) from the log."""
    source = EventQuery(
        event_types=PROJECTED_TYPES,
        provider_id=spec.namespace,
        scope=None if partition is None else ScopeFilter(partition, spec.levels),
    )

    def counted(events: Iterator[EventEnvelope]) -> Iterator[EventEnvelope]:
        for n, event in enumerate(events, 1):
            if progress is not None and n % 1000 == 0:
                progress(1000)
            yield event

    return await backend.rebuild(
        spec.namespace,
        None if partition is None else ScopeFilter(partition, LEVELS),
        source,
        lambda events: fold(counted(events), spec),
    )
