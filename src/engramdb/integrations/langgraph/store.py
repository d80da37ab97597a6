"""``EngramStore``: LangGraph's ``BaseStore`` backed by an Engram database, on SQLite or
PostgreSQL.

Each item is one record of the ``store_items`` namespace in the store's scope (tenant, user,
agent): its record key encodes the item's namespace and key (``keys``), its value keeps the
item with its namespace and the texts chosen for search. Every put and delete appends its
``memory.written`` / ``memory.deleted`` event in the same transaction as the change, one
transaction per batch, so the store is replayable and rebuildable like all of Engram.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine, Iterable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from engramdb.core.errors import (
    EmbedderUnavailableError,
    EngramError,
    UsageError,
    ValidationError,
)
from engramdb.core.events import EventEnvelope, MemoryDeleted, MemoryWritten, TraceContext
from engramdb.core.scope import DEFAULT_TENANT, Scope
from engramdb.core.types import utc_now
from engramdb.core.validation import normalize_value, validate_key
from engramdb.engine import Engine, EngineConfig
from engramdb.engine import open as open_engine
from engramdb.integrations.langgraph.items import (
    as_item,
    as_search_item,
    check_op,
    last_updated,
    ttl_ms,
)
from engramdb.integrations.langgraph.keys import namespace_prefix, record_key, split_record_key
from engramdb.integrations.langgraph.matching import check_filter, matches, namespace_matches
from engramdb.integrations.langgraph.ranking import hybrid_scores, own_vector_scores, pack_vectors
from engramdb.orchestrator.store_items import CONTENT_TYPE, NAMESPACE, STORE_ITEMS_SPEC
from engramdb.providers.event_sourced import expire_records
from engramdb.providers.projection import written_record
from engramdb.storage.records import Delete, Put, Record, RecordQuery
from engramdb.storage.records import Op as StorageOp
from engramdb.sync.engine import SyncEngine

_log = logging.getLogger(__name__)
R = TypeVar("R")


class EngramStore(BaseStore):
    """A LangGraph store whose items live in an Engram database.

    Args:
        engine: the open Engram database: an ``Engine`` (use the ``a…`` methods on its
            loop, the blocking ones from other threads), or the ``SyncEngine`` of
            ``engramdb.open_sync`` (use the blocking methods, from any thread).
        tenant, user, agent: the scope the items belong to; another scope sees none of them.
        index: what to index for ``search(query=...)``. ``fields`` choose the text (JSON
            paths, default the whole value); with ``embed``, queries are ranked by cosine
            similarity to vectors of that embedding function; without, by Engram's hybrid
            search (BM25 and the engine's model). With no ``index`` at all the whole value
            is indexed for Engram's hybrid search.
        ttl: ``default_ttl`` (minutes) for new items, and whether reads refresh an item's
            TTL (``refresh_on_read``, default true). Expired items read as missing.

    Example::

        async with EngramStore.open("memory.db", tenant="acme", user="alice") as store:
            await store.aput(("memories", "alice"), "city", {"text": "lives in Lisbon"})
            hits = await store.asearch(("memories", "alice"), query="where does she live?")
    """

    supports_ttl = True

    def __init__(
        self,
        engine: Engine | SyncEngine,
        *,
        tenant: str = DEFAULT_TENANT,
        user: str | None = None,
        agent: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
    ) -> None:
        # A blocking engine (``engramdb.open_sync``) runs on its own loop thread: the store's
        # blocking methods run there, for callers that have no event loop at all.
        self._portal = engine._portal if isinstance(engine, SyncEngine) else None
        self.engine = engine.wrapped if isinstance(engine, SyncEngine) else engine
        self.scope = Scope(tenant=tenant, user=user, agent=agent)
        self.partition = self.scope.narrow(STORE_ITEMS_SPEC.levels)
        self.index_config = index
        self.ttl_config = ttl
        embed = index.get("embed") if index else None
        self.embeddings = ensure_embeddings(embed) if embed is not None else None
        self._fields = [
            (path, tokenize_path(path)) for path in (index or {}).get("fields") or ["$"]
        ]
        self._sweeper: asyncio.Task[None] | None = None
        try:
            self._loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            self._loop = None

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        target: str | Path,
        *,
        tenant: str = DEFAULT_TENANT,
        user: str | None = None,
        agent: str | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        config: EngineConfig | None = None,
    ) -> AsyncIterator[EngramStore]:
        """Open the Engram database at ``target`` (a SQLite path or a ``postgresql://`` URL)
        as a store; the database closes when the block ends. A ``ttl`` config with
        ``sweep_interval_minutes`` sweeps expired items that often meanwhile."""
        async with open_engine(target, config=config) as engine:
            store = cls(engine, tenant=tenant, user=user, agent=agent, index=index, ttl=ttl)
            if (ttl or {}).get("sweep_interval_minutes"):
                await store.start_ttl_sweeper()
            try:
                yield store
            finally:
                await store.stop_ttl_sweeper()

    # -- the two primitives --------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` from a thread other than the engine's event loop (LangGraph calls this
        from the worker threads of synchronous nodes); waits for the results.

        Raises:
            UsageError: called on the event loop's own thread (use ``abatch`` there), or
                before the store has seen the loop its database runs on.
        """
        return self._blocking(self.abatch(ops))

    def _blocking(self, work: Coroutine[Any, Any, R]) -> R:
        """Run ``work`` on the engine's event loop from another thread and wait for it."""
        if self._portal is not None:
            return self._portal.call(work)
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            work.close()
            raise UsageError(
                "EngramStore needs the event loop its database runs on: create the store "
                "inside that loop (or call an async method there once)"
                if loop is None
                else "a synchronous store call on the event loop's own thread would wait for "
                "itself; use the async methods (aget, aput, asearch, ...) there"
            )
        return asyncio.run_coroutine_threadsafe(work, loop).result()

    # -- expiry -----------------------------------------------------------------------------

    async def asweep_ttl(self) -> int:
        """Remove the expired items of this store's scope, each with a ``memory.expired``
        event; returns how many."""
        expired = await self.engine.backend.scan(self._query(expired_at=utc_now(), hidden=None))
        return len(await expire_records(self.engine.backend, expired, self.engine.producer))

    def sweep_ttl(self) -> int:
        """:meth:`asweep_ttl` from a thread other than the event loop's."""
        return self._blocking(self.asweep_ttl())

    async def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> asyncio.Task[None]:
        """Sweep expired items every ``sweep_interval_minutes`` (default: the TTL config's
        ``sweep_interval_minutes``, else 5) until :meth:`stop_ttl_sweeper`."""
        await self.stop_ttl_sweeper()
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        pause = float(minutes or 5) * 60

        async def sweep_forever() -> None:
            while True:
                await asyncio.sleep(pause)
                try:
                    await self.asweep_ttl()
                except EngramError as exc:  # a busy database: the next round sweeps it
                    _log.warning("store TTL sweep failed: %s", exc.message)

        self._sweeper = asyncio.create_task(sweep_forever())
        return self._sweeper

    async def stop_ttl_sweeper(self) -> bool:
        """Stop the sweeper, if one runs; ``True`` once it has stopped."""
        sweeper, self._sweeper = self._sweeper, None
        if sweeper is None:
            return True
        sweeper.cancel()
        await asyncio.wait([sweeper])
        return True

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops``: every put and delete first, in one transaction (the last put of a key
        wins), then the reads in order; TTLs refreshed by the reads are written last.

        Raises:
            InvalidNamespaceError: a namespace is empty or has a bad label.
            ValidationError: a key, value or filter cannot be stored or evaluated.
        """
        self._loop = asyncio.get_running_loop()
        listed = list(ops)
        for op in listed:
            check_op(op)
        puts = {(op.namespace, op.key): op for op in listed if isinstance(op, PutOp)}
        if puts:
            await self._write(list(puts.values()))
        results: list[Result] = []
        refresh: dict[str, Record] = {}
        for op in listed:
            if isinstance(op, GetOp):
                record = await self._get(op.namespace, op.key)
                results.append(None if record is None else as_item(record))
                if record is not None and op.refresh_ttl and record.ttl_ms:
                    refresh[record.key] = record
            elif isinstance(op, SearchOp):
                found = await self._search(op)
                results.append([hit for hit, _ in found])
                if op.refresh_ttl:
                    refresh.update((r.key, r) for _, r in found if r.ttl_ms)
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                results.append(None)
        if refresh:
            await self._refresh(list(refresh.values()))
        return results

    # -- writes -----------------------------------------------------------------------------

    async def _write(self, puts: Sequence[PutOp]) -> None:
        writes = [op for op in puts if op.value is not None]
        deletes = [record_key(op.namespace, op.key) for op in puts if op.value is None]
        wrappers = [await self._wrapper(op) for op in writes]
        events = [
            MemoryWritten(
                key=validate_key(record_key(op.namespace, op.key)),
                value=wrapper,
                value_type="dict",
                content_type=CONTENT_TYPE,
                provider_id=NAMESPACE,
                ttl_ms=ttl_ms(op.ttl),
            )
            for op, wrapper in zip(writes, wrappers, strict=True)
        ]
        present = (
            await self.engine.backend.keys(self._query(keys=tuple(deletes))) if deletes else []
        )
        gone = [MemoryDeleted(key=key, provider_id=NAMESPACE) for key in present]
        await self._commit(events, gone)

    async def _wrapper(self, op: PutOp) -> dict[str, Any]:
        if not isinstance(op.value, dict):
            raise ValidationError(
                f"a store value must be a dict, got {type(op.value).__name__}", field="value"
            )
        texts = self._texts(op)
        wrapper: dict[str, Any] = {
            "namespace": list(op.namespace),
            "key": op.key,
            "value": op.value,
            "texts": texts,
        }
        if self.embeddings is not None and texts:
            vectors = await self.embeddings.aembed_documents(texts)
            dims = (self.index_config or {}).get("dims")
            if dims is not None and any(len(v) != dims for v in vectors):
                raise ValidationError(
                    f"the embedding function returned vectors of another size than dims={dims}"
                )
            wrapper["vectors"] = pack_vectors(vectors)
        stored, _ = normalize_value(wrapper, max_bytes=self.engine.config.max_value_bytes)
        return dict(stored)

    def _texts(self, op: PutOp) -> list[str]:
        if op.index is False:
            return []
        paths = self._fields if op.index is None else [(p, tokenize_path(p)) for p in op.index]
        texts: list[str] = []
        for path, tokens in paths:
            texts += get_text_at_path(op.value, "$" if path == "$" else tokens)
        return [text for text in texts if text.strip()]

    async def _commit(
        self,
        written: Sequence[MemoryWritten],
        deleted: Sequence[MemoryDeleted],
        kept_vectors: dict[str, tuple[bytes, bytes | None]] | None = None,
    ) -> None:
        """Store ``written`` and ``deleted`` with their events in one transaction. Items
        are embedded by the engine's model unless the store embeds them itself (or
        ``kept_vectors`` holds the vectors they already have)."""
        if not written and not deleted:
            return
        engine, spec = self.engine, STORE_ITEMS_SPEC
        trace = TraceContext()
        envelopes: list[EventEnvelope] = [
            event.to_envelope(scope=self.scope, producer=engine.producer, trace=trace)
            for event in (*written, *deleted)
        ]
        records = [
            written_record(spec, self.scope, event, envelope.occurred_at)
            for event, envelope in zip(written, envelopes, strict=False)
        ]
        fresh = [
            r
            for r in records
            if self.embeddings is None and r.text and r.key not in (kept_vectors or {})
        ]
        embedded = await engine.indexer.embed_for_write(spec, fresh) if fresh else None
        vectors: dict[str, tuple[bytes, bytes | None]] = dict(kept_vectors or {})
        if embedded is not None:
            vectors.update(
                (r.key, (whole, parts)) for r, whole, parts in zip(fresh, *embedded, strict=True)
            )
            envelopes += [engine.indexer.indexed_event(r, self.scope, trace) for r in fresh]
        model = engine.indexer.model
        ops: list[StorageOp] = [
            Put(r, vector=vectors[r.key][0], model=model, parts=vectors[r.key][1])
            if r.key in vectors
            else Put(r)
            for r in records
        ]
        ops += [Delete(NAMESPACE, self.partition, event.key) for event in deleted]
        result = await engine.backend.commit(ops, envelopes)
        if fresh:
            stored = {r.key: r for r in result.stored}
            engine.indexer.written(spec, [stored[r.key] for r in fresh], embedded)

    async def _refresh(self, records: Sequence[Record]) -> None:
        """Restart the TTL of ``records`` as of now: each is written again, unchanged but for
        the time it was last updated, with the vectors it has."""
        kept: dict[str, tuple[bytes, bytes | None]] = {}
        model = self.engine.indexer.model
        ids = tuple(r.id for r in records if r.id is not None)
        if model and ids and self.engine.indexer.embedder is not None:
            width = self.engine.indexer.embedder.dimensions * 4
            sets = await self.engine.backend.search.vector_sets(self._query(ids=ids), model)
            by_id = {r.id: r.key for r in records}
            for record_id, blob in sets.items():
                kept[by_id[record_id]] = (blob[:width], blob[width:] or None)
        events = [
            MemoryWritten(
                key=r.key,
                value={**r.value, "updated_at": last_updated(r).isoformat()},
                value_type="dict",
                content_type=CONTENT_TYPE,
                provider_id=NAMESPACE,
                ttl_ms=r.ttl_ms,
            )
            for r in records
        ]
        await self._commit(events, [], kept)

    # -- reads ------------------------------------------------------------------------------

    def _query(self, **fields: Any) -> RecordQuery:
        return RecordQuery(NAMESPACE, self.partition, **fields)

    async def _get(self, namespace: tuple[str, ...], key: str) -> Record | None:
        record = await self.engine.backend.get(
            NAMESPACE, self.partition, record_key(namespace, key)
        )
        if record is None or record.hidden_at is not None:
            return None
        if record.expires_at is not None and record.expires_at <= utc_now():
            return None
        return record

    async def _search(self, op: SearchOp) -> list[tuple[SearchItem, Record]]:
        check_filter(op.filter)
        if op.limit < 0 or op.offset < 0:
            raise ValidationError("limit and offset must not be negative")
        prefix = namespace_prefix(op.namespace_prefix) or None
        if not op.filter and not op.query:
            page = await self.engine.backend.scan(
                self._query(prefix=prefix, alive_at=utc_now(), limit=op.limit, offset=op.offset)
            )
            return [(as_search_item(r, None), r) for r in page]
        candidates = [
            r
            for r in await self.engine.backend.scan(self._query(prefix=prefix, alive_at=utc_now()))
            if matches(r.value.get("value", {}), op.filter)
        ]
        scores = await self._scores(op.query, candidates) if op.query else {}
        ranked = sorted(
            (r for r in candidates if r.id in scores),
            key=lambda r: -scores[r.id or 0],
        ) + [r for r in candidates if r.id not in scores]
        page = ranked[op.offset : op.offset + op.limit]
        return [(as_search_item(r, scores.get(r.id or 0)), r) for r in page]

    async def _scores(self, query: str, candidates: Sequence[Record]) -> dict[int, float]:
        if self.embeddings is not None:
            try:
                vector = await self.embeddings.aembed_query(query)
            except EmbedderUnavailableError:
                return {}
            return own_vector_scores(vector, candidates)
        return await hybrid_scores(
            self.engine.backend, self.engine.indexer, self.partition, query, candidates
        )

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        if op.limit < 0 or op.offset < 0:
            raise ValidationError("limit and offset must not be negative")
        if op.max_depth is not None and op.max_depth < 1:
            raise ValidationError("max_depth must be at least 1")
        keys = await self.engine.backend.keys(self._query(alive_at=utc_now()))
        found = {split_record_key(key)[0] for key in keys}
        kept = {
            namespace[: op.max_depth] if op.max_depth is not None else namespace
            for namespace in found
            if all(
                namespace_matches(namespace, c.match_type, c.path)
                for c in op.match_conditions or ()
            )
        }
        return sorted(kept)[op.offset : op.offset + op.limit]
