"""``DeferredParts``: the part (sentence) vectors of memories acknowledged with their
whole-text vector alone, computed right after the write from a durable queue.

A lone write into a namespace with part vectors commits, in one transaction, the record, its
event, its full text and a *pending parts* record (namespace ``parts_pending``, with its own
``memory.written`` event) naming the record; its whole-text vector follows with its
``memory.indexed`` event (``record_first``). The write returns; the part vectors, most of a
turn's embedding work, are computed once the writes pause (``quiet_s``, or ``max_wait_s`` after
they were due), stored with a ``memory.indexed`` event of ``index_type`` ``parts``, and the
pending record is deleted (its ``memory.deleted`` event says the parts are stored). A process
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
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from engramdb.core.errors import EngramError
from engramdb.core.events import EventEnvelope, MemoryDeleted, MemoryIndexed, new_id
from engramdb.core.scope import LEVELS, Scope
from engramdb.providers.projection import ProjectionSpec, plain_key_text
from engramdb.providers.write_pauses import WritePauses
from engramdb.storage.backend import Backend
from engramdb.storage.records import Delete, Record, RecordQuery

__all__ = ["PARTS_PENDING_SPEC", "DeferredParts", "PendingParts"]

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
        batch: records whose parts go to the model in one call.
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
    ) -> None:
        self.backend = backend
        self._embed = embed
        self._refresh = refresh
        self._model = model
        #: The writes this engine has under way, which the parts wait for a pause in.
        self.pauses = WritePauses(quiet_s, max_wait_s)
        self.batch = batch
        self._waiting: dict[tuple[str, Scope], list[PendingParts]] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def __len__(self) -> int:
        return sum(len(items) for items in self._waiting.values())

    # -- the write's side ---------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around a write's embedding and commit: parts wait while a write is under way (the
        model and the database writer are shared), so a write is never queued behind them."""
        with self.pauses.writing():
            yield

    def marker_requests(
        self, spec: ProjectionSpec, records: Sequence[Record]
    ) -> list[tuple[int, str, dict[str, str]]]:
        """For each of ``records`` that has parts: its position, the key of its pending record
        and that record's value (written with the records, in their transaction)."""
        return [
            (position, new_id(), {"namespace": spec.namespace, "key": record.key})
            for position, record in enumerate(records)
            if spec.record_embed_parts(record)
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
        if (namespace, partition) not in self._waiting:
            return
        async with self._lock:
            items = self._waiting.pop((namespace, partition), [])
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
                    await self._compute(chunk)
        except Exception as exc:
            # The store or the model cannot be used now: the pending records stay in the store,
            # computed on the next search of their partition or by the next engine to open it.
            _log.warning("deferred part vectors stopped: %s", _said(exc))

    async def _compute_all(self, items: Sequence[PendingParts]) -> None:
        for start in range(0, len(items), self.batch):
            await self._compute(items[start : start + self.batch])

    async def _compute(self, items: Sequence[PendingParts]) -> None:
        """Embed the parts of ``items`` (of one namespace and partition), and the whole text of
        those stored without their vector (a write that died before storing it), in one call;
        store them, then delete the pending records."""
        if not items:
            return
        spec, partition, model = items[0].spec, items[0].partition, self._model()
        records = await self._records(items)
        ids = tuple(records)
        query = RecordQuery(spec.namespace, None, ids=ids, hidden=None)
        found, mains = await self.backend.search.vectors(query, model) if ids else ([], [])
        whole = dict(zip(found, mains, strict=True))
        todo = [records[i] for i in ids]
        unvectored = [r for r in todo if r.id not in whole]
        texts = [spec.record_embed_parts(r) for r in todo]
        wanted = [spec.record_embed_text(r) for r in unvectored]
        blobs = (
            await self._embed(wanted + [text for each in texts for text in each]) if todo else []
        )
        if blobs is None:
            return
        whole.update((r.id or 0, blob) for r, blob in zip(unvectored, blobs, strict=False))
        parts: list[bytes | None] = []
        start = len(unvectored)
        for each in texts:
            parts.append(b"".join(blobs[start : start + len(each)]) if each else None)
            start += len(each)
        if todo:
            await self.backend.search.put_vectors(
                model,
                [(r.id, whole[r.id]) for r in todo if r.id is not None],
                [_indexed_event(r, model, "vector") for r in unvectored]
                + [_indexed_event(r, model, "parts") for r in todo],
                parts=parts,
            )
            self._refresh(spec.namespace, partition, todo, [whole[r.id or 0] for r in todo], parts)
        await self._delete_markers([(item.marker_scope, item.marker_key) for item in items])

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
        async with self._lock:
            while self._waiting:
                _, items = self._waiting.popitem()
                await self._compute_all(items)

    async def _delete_markers(self, markers: Sequence[tuple[Scope, str]]) -> None:
        """Delete the pending records still stored, each with its ``memory.deleted``."""
        keys = tuple(key for _, key in markers)
        # Another engine (one resuming at open) may have computed and deleted some already.
        stored = await self.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None, keys=keys))
        if stored:
            await self.backend.commit(
                [Delete(PARTS_PENDING_SPEC.namespace, r.scope, r.key) for r in stored],
                [_deleted_event(r.scope, r.key) for r in stored],
            )

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


def _indexed_event(record: Record, model: str, index_type: str) -> EventEnvelope:
    return MemoryIndexed(
        key=record.key, index_type=index_type, provider_id=record.namespace, model=model
    ).to_envelope(scope=record.scope)


def _deleted_event(scope: Scope, key: str) -> EventEnvelope:
    return MemoryDeleted(key=key, provider_id=PARTS_PENDING_SPEC.namespace).to_envelope(scope=scope)


def _said(exc: Exception) -> str:
    return exc.message if isinstance(exc, EngramError) else f"{type(exc).__name__}: {exc}"
