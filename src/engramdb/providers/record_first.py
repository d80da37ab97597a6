"""``write_record_first``: a lone write into a namespace with part vectors is committed while
the model computes its whole-text vector, and the vector is queued right after.

Its transaction holds a *pending parts* record naming it (``DeferredParts``): its part vectors,
if it has parts, are owed when it is acknowledged, and so is its whole-text vector until that
is stored. A record whose vector is not stored when the process dies is embedded, whole text
and parts, by the next engine to open the store (``DeferredParts.resume``). So the record, its
``memory.written`` event and the pending record are committed while the model runs, and the
vector follows with its ``memory.indexed`` event: the caller waits for the longer of the
embedding and the commit, not for both one after the other, and not for the vector's commit
either. That vector's write need not be durable the moment it commits (``queue_vectors``): the
pending record, which is, has it made again. A record without parts (a one-sentence turn)
takes this path only when no other write is under way, and owes nothing once its vector is
stored: its pending record is deleted in the vector's own transaction, so nothing is left for a
search to settle.

Only on a backend that queues vector writes (``QueuedVectorWrites``): the vector's write is
queued before the write returns and every later read and write of the tenant in this process
comes after it, so the write need not wait for its commit, and it is in this process's loaded
vector index at once. SQLite runs its one connection's work in order; PostgreSQL holds the
tenant's later transactions until the queued one is committed, and writes the record's row a
second time (the price of not waiting). The vector is stored for the record version it was
computed from only: a record written again meanwhile, by this process or another, keeps the
vector of its new text.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from engramdb.core.errors import EngramError
from engramdb.core.events import EventEnvelope, TraceContext
from engramdb.core.types import MemoryEntry
from engramdb.providers.deferred_parts import marker_deletes
from engramdb.providers.indexing import Embedded
from engramdb.providers.projection import record_entry
from engramdb.storage.backend import QueuedVectorWrites
from engramdb.storage.records import Put, Record

if TYPE_CHECKING:
    from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest

__all__ = ["vector_queue", "write_record_first"]

_log = logging.getLogger(__name__)


def vector_queue(
    provider: EventSourcedProvider, records: Sequence[Record]
) -> QueuedVectorWrites | None:
    """The backend, when a write of ``records`` is one ``write_record_first`` takes: a lone
    record in a namespace with vectors and part vectors, on a backend that queues vector
    writes; one without parts only when no other write of the engine is under way.

    A record without parts owes nothing but its vector, so taking this path only moves its
    commit from after the model to beside it: a caller alone saves that wait, while under
    concurrent writes it would only add a transaction per write (the model and the database
    are busy with the others anyway)."""
    spec, backend, indexer = provider.spec, provider.backend, provider.indexer
    if (
        len(records) == 1
        and spec.vectors
        and indexer.embedder is not None
        and spec.embed_parts is not None
        and isinstance(backend, QueuedVectorWrites)
        and (indexer.deferred.alone() or bool(spec.record_embed_parts(records[0])))
    ):
        return backend
    return None


async def write_record_first(
    provider: EventSourcedProvider,
    queue: QueuedVectorWrites,
    embedding: asyncio.Future[Embedded],
    requests: Sequence[WriteRequest],
    records: list[Record],
    envelopes: list[EventEnvelope],
    trace: TraceContext,
) -> list[MemoryEntry]:
    """Commit ``records`` (with their events and pending-parts records) while ``embedding``
    computes their whole-text vectors, then store the vectors (see the module docstring)."""
    try:
        ops = provider.expectations(records, requests)
        ops += [
            Put(r, if_absent=request.create) for r, request in zip(records, requests, strict=True)
        ]
        markers, marker_ops, marker_events = provider.owed_parts(records, whole=True)
        companion_ops, companion_events = provider.companion_writes(records)
        ops += marker_ops + companion_ops
        events = envelopes + marker_events + companion_events
        result = await provider.backend.commit(ops, events)
    except BaseException:
        embedding.cancel()
        raise
    stored = result.stored[: len(records)]
    # Everything but the vectors is made ready while the model still runs: once they are in,
    # the write returns after a few steps.
    after = _After(provider, queue, stored, envelopes, markers, trace)
    entries = [record_entry(r) for r in stored]
    try:
        embedded = await asyncio.shield(embedding)
    except asyncio.CancelledError:
        # The records are committed: their vectors are still stored once computed.
        embedding.add_done_callback(lambda done: after.finish(_got(done)))
        raise
    except EngramError as exc:
        embedded = _unembedded(exc)
    after.finish(embedded)
    return entries


class _After:
    """What follows a ``write_record_first`` commit, prepared before its vectors are in: the
    vectors into the loaded index and queued for storing with their ``memory.indexed``
    events, the parts queued after them, the companion told."""

    def __init__(
        self,
        provider: EventSourcedProvider,
        queue: QueuedVectorWrites,
        stored: Sequence[Record],
        envelopes: Sequence[EventEnvelope],
        markers: Sequence[tuple[int, str]],
        trace: TraceContext,
    ) -> None:
        self.provider, self.queue, self.stored = provider, queue, stored
        self.indexed = provider.indexer.indexed_events(stored, envelopes, provider.scope, trace)
        spec, scope = provider.spec, provider.scope
        # A record with parts keeps its pending record until they are stored; one without
        # settles it with its vector.
        owing = [(p, key, bool(spec.record_embed_parts(stored[p]))) for p, key in markers]
        self.markers = [(p, key) for p, key, parts in owing if parts]
        self.settled = marker_deletes([(scope, key) for _, key, parts in owing if not parts])

    def finish(self, embedded: Embedded) -> None:
        provider, stored = self.provider, self.stored
        indexer = provider.indexer
        vectors = embedded[0] if embedded else None
        indexer.committed(provider.provider_id, provider.partition, stored, vectors)
        indexer.written(provider.spec, stored, embedded)
        if vectors:
            kept = [
                (r.id, v, r.version, event)
                for r, v, event in zip(stored, vectors, self.indexed, strict=True)
                if r.id is not None
            ]
            deletes, deleted = self.settled
            try:
                self.queue.queue_vectors(
                    indexer.model,
                    [(record_id, vector) for record_id, vector, _, _ in kept],
                    [event for _, _, _, event in kept] + deleted,
                    [version for _, _, version, _ in kept],
                    deletes=deletes,
                ).add_done_callback(_unstored)
            except EngramError as exc:  # closed meanwhile
                _log.warning("vectors left for the next start to compute: %s", exc.message)
            # Queued after the vectors: their computation reads the stored whole-text vectors.
            indexer.deferred.committed(
                provider.spec, provider.partition, stored, self.markers, provider.scope
            )
        if provider.companion is not None:
            provider.companion.committed(provider, stored)


def _got(done: asyncio.Future[Embedded]) -> Embedded:
    if done.cancelled():
        return None
    exc = done.exception()
    if isinstance(exc, EngramError):
        return _unembedded(exc)
    return None if exc is not None else done.result()


def _unembedded(exc: EngramError) -> Embedded:
    """No vectors now: the records are committed by then, so they are embedded later instead
    (``PendingVectors``, or the pending-parts records at the next start)."""
    _log.warning("storing without vectors for now: %s", exc.message)
    return None


def _unstored(future: asyncio.Future[None]) -> None:
    # The pending-parts records stay in the store: the next engine to open it embeds them.
    if not future.cancelled() and (exc := future.exception()) is not None:
        _log.warning("vectors left for the next start to compute: %s", exc)
