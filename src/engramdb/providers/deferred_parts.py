"""``DeferredParts``: the part (sentence) vectors of memories acknowledged with their
whole-text vector alone, computed right after the write from a durable queue.

A lone write into a namespace with part vectors commits, in one transaction, the record, its
event, its full text and a *pending parts* record (namespace ``parts_pending``, with its own
``memory.written`` event) naming the record; its whole-text vector follows with its
``memory.indexed`` event (``record_first``). The write returns; the part vectors, most of a
turn's embedding work, are computed on the model's lane for work no caller waits for
(``aside``: a thread of its own at the lowest priority, on the cores the writes leave idle) —
at once on an embedded store (``eager``), once the writes pause on a database server (``quiet_s``,
or ``max_wait_s`` after they were due) — or, with a model that has no such lane, once the writes
pause and in slices between writes. They are stored, once no write is under way, with a
``memory.indexed`` event of ``index_type`` ``parts``, and the pending record is deleted (its
``memory.deleted`` event says the parts are stored). A process
that dies in between leaves the pending record in the store: the next engine to open the store
computes those parts (``resume``), and the whole-text vector too if the write died before
storing it; computing them twice stores the same vectors.

A search of a partition first computes what this process still owes that partition
(``settle``), so once the queue is drained a store holds, and a search finds, exactly what it
held when the parts were computed inside the write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Coroutine,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass
from typing import Any

from engramdb.core.errors import EngramError
from engramdb.core.events import EventEnvelope, MemoryDeleted, MemoryIndexed, new_id
from engramdb.core.scope import LEVELS, Scope
from engramdb.providers.projection import ProjectionSpec, plain_key_text
from engramdb.providers.write_pauses import WritePauses
from engramdb.storage.backend import Backend, QueuedVectorWrites
from engramdb.storage.records import Delete, Record, RecordQuery

__all__ = ["PARTS_PENDING_SPEC", "DeferredParts", "PendingParts", "marker_deletes"]

_log = logging.getLogger(__name__)

#: Pending part vectors, one record per written record, kept in the writer's full scope.
PARTS_PENDING_SPEC = ProjectionSpec("parts_pending", levels=LEVELS, key_text=plain_key_text)

#: Embeds texts into stored vector bytes (one call for all of them).
EmbedTexts = Callable[[Sequence[str]], Awaitable[list[bytes] | None]]
#: Brings a loaded vector index in step with records whose vectors were just stored.
Refresh = Callable[[str, Scope, Sequence[Record], Sequence[bytes], Sequence[bytes | None]], None]


@dataclass(frozen=True)
class PendingParts:
    """One record waiting for its part vectors, and the pending record that makes it durable."""

    spec: ProjectionSpec
    partition: Scope
    record_id: int
    key: str
    marker_scope: Scope
    marker_key: str


class DeferredParts:
    """The part vectors this engine owes, and the task that computes them.

    Args:
        backend: where the records, their vectors and the pending records live.
        embed: embeds texts (the indexer's model).
        refresh: updates this process's loaded vector indexes after parts are stored.
        model: the id of the embedding model the vectors are stored under.
        quiet_s: parts are computed once no write has come for this long …
        max_wait_s: … or this long after they were due, so a steady stream of writes delays
            them but never starves them.
        batch: records whose parts are computed and stored together.
        slice_texts: texts per model call in the background: a write that comes meanwhile
            waits for one such call at most, then has the model before the rest.
        aside: embeds texts where no write waits for them (the model's lane for background
            work, ``AsideEmbedder``); the background then embeds in one call, not in slices.
        eager: with ``aside``, begin at once rather than at a pause in the writes: for a store
            whose writes are this process's own work (SQLite). A database server's cores, and
            its tenant's later writes, wait for the background's transactions too.
    """

    def __init__(
        self,
        backend: Backend,
        embed: EmbedTexts,
        refresh: Refresh,
        model: Callable[[], str],
        *,
        quiet_s: float = 0.05,
        max_wait_s: float = 10.0,
        batch: int = 8,
        slice_texts: int = 4,
        aside: EmbedTexts | None = None,
        eager: bool = False,
    ) -> None:
        self.backend = backend
        self._embed = embed
        #: Embeds the background's texts where no write waits for them, if the model can.
        self.aside = aside
        #: Whether the background begins at once (with ``aside``) rather than at a pause.
        self.eager = eager
        self._refresh = refresh
        self._model = model
        #: The writes this engine has under way, which the parts make way for.
        self.pauses = WritePauses(quiet_s, max_wait_s)
        self.batch = batch
        self.slice_texts = slice_texts
        self._waiting: dict[tuple[str, Scope], list[PendingParts]] = {}
        self._lock = asyncio.Lock()
        #: Set while a search or a drain waits for the lock: the background work stops
        #: yielding to writes, so that they need not wait for the writes too.
        self._asked = asyncio.Event()
        self._askers = 0
        self._task: asyncio.Task[None] | None = None
        #: The namespace and partition whose parts the background is computing.
        self._computing: tuple[str, Scope] | None = None

    def __len__(self) -> int:
        return sum(len(items) for items in self._waiting.values())

    # -- the write's side ---------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around a write's embedding and commit: parts wait while a write is under way (the
        model and the database writer are shared), so a write is never queued behind them."""
        with self.pauses.writing():
            yield

    def alone(self) -> bool:
        """Whether the write under way (inside ``writing``) is the only one."""
        return self.pauses.in_flight <= 1

    def marker_requests(
        self, spec: ProjectionSpec, records: Sequence[Record], *, whole: bool = False
    ) -> list[tuple[int, str, dict[str, str]]]:
        """For each of ``records`` that has parts (``whole``: each of them, its whole-text
        vector owed too): its position, the key of its pending record and that record's value
        (written with the records, in their transaction)."""
        return [
            (position, new_id(), {"namespace": spec.namespace, "key": record.key})
            for position, record in enumerate(records)
            if whole or spec.record_embed_parts(record)
        ]

    def committed(
        self,
        spec: ProjectionSpec,
        partition: Scope,
        stored: Sequence[Record],
        markers: Sequence[tuple[int, str]],
        marker_scope: Scope,
    ) -> None:
        """The records are stored with their pending records: queue their parts."""
        if not markers:
            return
        waiting = self._waiting.setdefault((spec.namespace, partition), [])
        for position, key in markers:
            record_id = stored[position].id
            if record_id is not None:
                waiting.append(
                    PendingParts(
                        spec, partition, record_id, stored[position].key, marker_scope, key
                    )
                )
        self._start()

    # -- searches ------------------------------------------------------------------------------

    async def settle(self, namespace: str, partition: Scope) -> None:
        """Compute now what this process owes ``partition`` of ``namespace``, so a search sees
        every part vector of what was written before it."""
        slot = (namespace, partition)
        if slot not in self._waiting and slot != self._computing:
            return
        # The background's slice of it, if any, is stored once the lock is ours.
        async with self._first():
            items = self._waiting.pop(slot, [])
            await self._compute_all(items)

    # -- the background side -------------------------------------------------------------------

    async def resume(self, specs: Mapping[str, ProjectionSpec]) -> int:
        """Queue the pending parts stored by any process (a stopped one too), of namespaces
        in ``specs``; returns how many were queued."""
        queued = 0
        for marker in await self.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None)):
            value = marker.value if isinstance(marker.value, dict) else {}
            spec = specs.get(str(value.get("namespace")))
            if spec is None:
                continue
            partition = marker.scope.narrow(spec.levels)
            record = await self.backend.get(spec.namespace, partition, str(value.get("key")))
            if record is None or record.id is None:
                await self._delete_markers([(marker.scope, marker.key)])
                continue
            item = PendingParts(spec, partition, record.id, record.key, marker.scope, marker.key)
            self._waiting.setdefault((spec.namespace, partition), []).append(item)
            queued += 1
        if queued:
            self._start()
        return queued

    def _start(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            while self._waiting:
                if self.aside is None or not self.eager:
                    await self.pauses.pause()
                async with self._lock:
                    if not self._waiting:
                        break
                    slot = next(iter(self._waiting))
                    items = self._waiting[slot]
                    chunk, rest = items[: self.batch], items[self.batch :]
                    if rest:
                        self._waiting[slot] = rest
                    else:
                        del self._waiting[slot]
                    self._computing = slot
                    try:
                        await self._compute(chunk, background=True)
                    finally:
                        self._computing = None
        except Exception as exc:
            # The store or the model cannot be used now: the pending records stay in the store,
            # computed on the next search of their partition or by the next engine to open it.
            _log.warning("deferred part vectors stopped: %s", _said(exc))

    async def _compute_all(self, items: Sequence[PendingParts]) -> None:
        for start in range(0, len(items), self.batch):
            await self._compute(items[start : start + self.batch])

    async def _compute(self, items: Sequence[PendingParts], *, background: bool = False) -> None:
        """Embed the parts of ``items`` (of one namespace and partition), and the whole text of
        those stored without their vector (a write that died before storing it), in one call
        (``background``: aside, or in slices with each write that comes meanwhile going
        first); store them, deleting the pending records in the same transaction."""
        if not items:
            return
        spec, partition, model = items[0].spec, items[0].partition, self._model()
        records = await self._records(items)
        ids = tuple(records)
        query = RecordQuery(spec.namespace, None, ids=ids, hidden=None)
        found, mains = await self.backend.search.vectors(query, model) if ids else ([], [])
        whole = dict(zip(found, mains, strict=True))
        texts_of = {i: spec.record_embed_parts(records[i]) for i in ids}
        # A record without parts whose whole-text vector is stored owes nothing more.
        todo = [records[i] for i in ids if texts_of[i] or i not in whole]
        unvectored = [r for r in todo if r.id not in whole]
        texts = [texts_of[r.id or 0] for r in todo]
        wanted = [spec.record_embed_text(r) for r in unvectored]
        everything = wanted + [text for each in texts for text in each]
        embed = (self.aside or self._between_writes) if background else self._embed
        blobs = await embed(everything) if todo else []
        if blobs is None:
            return
        whole.update((r.id or 0, blob) for r, blob in zip(unvectored, blobs, strict=False))
        parts: list[bytes | None] = []
        start = len(unvectored)
        for each in texts:
            parts.append(b"".join(blobs[start : start + len(each)]) if each else None)
            start += len(each)
        if background:
            # The database's writer is shared too: the write under way commits first.
            await self._make_way()
        markers = [(item.marker_scope, item.marker_key) for item in items]
        if not todo:
            await self._delete_markers(markers)
            return
        await self._store(model, todo, unvectored, whole, parts, markers)
        # This process's loaded index takes them only for records still at the version read.
        kept = await self._unchanged(spec, todo)
        self._refresh(
            spec.namespace,
            partition,
            [r for r in todo if r.id in kept],
            [whole[r.id or 0] for r in todo if r.id in kept],
            [p for r, p in zip(todo, parts, strict=True) if r.id in kept],
        )

    async def _store(
        self,
        model: str,
        todo: Sequence[Record],
        unvectored: Sequence[Record],
        whole: Mapping[int, bytes],
        parts: Sequence[bytes | None],
        markers: Sequence[tuple[Scope, str]],
    ) -> None:
        """Store the vectors of ``todo`` (``parts`` aligned with it), each over the version
        read (a record written again meanwhile has its own vectors coming), with their events,
        and delete the pending records ``markers`` still stored, in one transaction. Where the
        backend can queue it, that transaction need not wait for the disk's sync: a power cut
        loses the vectors and the deletions together, and the pending records have the
        vectors computed again."""
        vectors = [(r.id or 0, whole[r.id or 0]) for r in todo]
        events = [_indexed_event(r, model, "vector") for r in unvectored] + [
            _indexed_event(r, model, "parts")
            for r, part in zip(todo, parts, strict=True)
            if part is not None
        ]
        versions = [r.version for r in todo]
        deletes, deleted = marker_deletes(await self._stored_markers(markers))
        if isinstance(self.backend, QueuedVectorWrites):
            await self.backend.queue_vectors(
                model, vectors, [*events, *deleted], versions, parts=parts, deletes=deletes
            )
            return
        await self.backend.search.put_vectors(
            model, vectors, events, parts=parts, versions=versions
        )
        if deletes:
            await self.backend.commit(deletes, deleted)

    @contextlib.asynccontextmanager
    async def _first(self) -> AsyncIterator[None]:
        """The lock, for a search or a drain: the background work holding it hurries."""
        self._askers += 1
        self._asked.set()
        try:
            async with self._lock:
                yield
        finally:
            self._askers -= 1
            if not self._askers:
                self._asked.clear()

    async def _make_way(self) -> None:
        """Let the write under way, if any, end first, unless a search or a drain waits for
        this work."""
        if self.pauses.in_flight and not self._asked.is_set():
            await _first_of(self.pauses.between(), self._asked.wait())

    async def _between_writes(self, texts: Sequence[str]) -> list[bytes] | None:
        """``texts`` embedded ``slice_texts`` at a time, letting each write begun meanwhile
        end first (unless a search waits for this work): the model runs one call at a time,
        so a write waits for one slice at most, and a steady stream of writes still leaves
        room for a slice between two of them."""
        blobs: list[bytes] = []
        for start in range(0, len(texts), self.slice_texts):
            if start:
                await self._make_way()
            got = await self._embed(texts[start : start + self.slice_texts])
            if got is None:
                return None
            blobs += got
        return blobs

    async def _unchanged(self, spec: ProjectionSpec, records: Sequence[Record]) -> set[int]:
        """The ids of ``records`` still stored at the version read."""
        query = RecordQuery(
            spec.namespace, None, ids=tuple(r.id or 0 for r in records), hidden=None
        )
        now = {r.id: r.version for r in await self.backend.scan(query)}
        return {r.id for r in records if r.id is not None and now.get(r.id) == r.version}

    async def _records(self, items: Sequence[PendingParts]) -> dict[int, Record]:
        """The records of ``items`` still stored, by id (looked up by key when their id
        changed: a rebuild writes every record anew)."""
        spec = items[0].spec
        query = RecordQuery(
            spec.namespace, None, ids=tuple(i.record_id for i in items), hidden=None
        )
        by_id = {r.id: r for r in await self.backend.scan(query)}
        found: dict[int, Record] = {}
        for item in items:
            record = by_id.get(item.record_id)
            if record is None or record.key != item.key or record.scope != item.partition:
                record = await self.backend.get(spec.namespace, item.partition, item.key)
            if record is not None and record.id is not None:
                found[record.id] = record
        return found

    async def drain(self) -> None:
        """Compute every part vector this process owes, now."""
        async with self._first():
            while self._waiting:
                _, items = self._waiting.popitem()
                await self._compute_all(items)

    async def _delete_markers(self, markers: Sequence[tuple[Scope, str]]) -> None:
        """Delete the pending records still stored, each with its ``memory.deleted``."""
        stored = await self._stored_markers(markers)
        if stored:
            await self.backend.commit(*marker_deletes(stored))

    async def _stored_markers(
        self, markers: Sequence[tuple[Scope, str]]
    ) -> list[tuple[Scope, str]]:
        """Those of the pending records ``markers`` still stored: another engine (one resuming
        at open) may have computed and deleted some already."""
        keys = tuple(key for _, key in markers)
        query = RecordQuery(PARTS_PENDING_SPEC.namespace, None, keys=keys)
        return [(r.scope, r.key) for r in await self.backend.scan(query)]

    async def close(self) -> None:
        """Compute what is still owed, then stop (what cannot be computed stays pending, in
        the store, for the next engine to open it)."""
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        try:
            await self.drain()
        except Exception as exc:
            _log.warning("part vectors left pending for the next start: %s", _said(exc))
            self._waiting.clear()


async def _first_of(*waits: Coroutine[Any, Any, Any]) -> None:
    """Wait until one of ``waits`` is done; the others are cancelled."""
    tasks = [asyncio.ensure_future(wait) for wait in waits]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()


def _indexed_event(record: Record, model: str, index_type: str) -> EventEnvelope:
    return MemoryIndexed(
        key=record.key, index_type=index_type, provider_id=record.namespace, model=model
    ).to_envelope(scope=record.scope)


def marker_deletes(
    markers: Sequence[tuple[Scope, str]],
) -> tuple[list[Delete], list[EventEnvelope]]:
    """The ops and ``memory.deleted`` events that delete the pending records ``markers`` (each
    its scope and key)."""
    namespace = PARTS_PENDING_SPEC.namespace
    return (
        [Delete(namespace, scope, key) for scope, key in markers],
        [
            MemoryDeleted(key=key, provider_id=namespace).to_envelope(scope=scope)
            for scope, key in markers
        ],
    )


def _said(exc: Exception) -> str:
    return exc.message if isinstance(exc, EngramError) else f"{type(exc).__name__}: {exc}"
