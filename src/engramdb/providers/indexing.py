"""``Indexer``: the indexed tier (rfc-2001 §5.3) — hybrid recall over persistent records.

Full-text (BM25) lives in the backend and follows every record change in the same
transaction. Vectors are computed before a write commits and stored with it — or, when the
embedding model is unavailable, the write commits without them and ``PendingVectors`` embeds
those records later; a search whose query cannot be embedded ranks by full text. In memory, one
``VectorIndex`` per partition serves similarity search, loaded from the stored vectors on first
use, updated by this process's writes, and dropped when another process commits. A
partition's HNSW graph is kept between runs beside a database file (``VectorGraphs``) and, when
dropped, kept until its partition reloads: either way it is checked against the stored vectors
and brought in step before use. Everything here is derived from the log: losing it loses
nothing.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
from cachetools import TTLCache

from engramdb.core.errors import EmbedderUnavailableError, RerankError
from engramdb.core.events import EventEnvelope, MemoryIndexed, TraceContext
from engramdb.core.futures import mapped
from engramdb.core.retry import patience
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now
from engramdb.index.batching import aside_lane
from engramdb.index.embedder import Embedder, FloatArray, start_embedding
from engramdb.index.fusion import Fused, fuse, group_boost, rerank
from engramdb.index.query_terms import fts_match, query_terms
from engramdb.index.reranker import Reranker
from engramdb.index.search_config import SearchConfig
from engramdb.index.temporal import strip_time_expressions
from engramdb.index.vector_index import VectorIndex, best_of_blocks
from engramdb.providers.deferred_parts import DeferredParts
from engramdb.providers.held_vectors import HELD_SEARCHES_AT_ONCE, HeldPartitions
from engramdb.providers.pending_vectors import PendingVectors
from engramdb.providers.projection import ProjectionSpec
from engramdb.providers.vector_graphs import VectorGraphs
from engramdb.storage.backend import Backend
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.search_backend import (
    BestHits,
    FollowsTenantLog,
    NativeVectorSearch,
    SearchesReadBestHits,
    TextHitsWithRecords,
    WordPruning,
)

_log = logging.getLogger(__name__)
#: What a write's embedding gives: whole-text vectors and part vectors, or nothing (no
#: embedder, or the model is unavailable).
Embedded = tuple[list[bytes], list[bytes | None]] | None
#: How stale the in-memory vector indexes may be relative to other processes' writes.
STALE_AFTER_S = 0.1
#: How long a word's document frequency (and a partition's size) is trusted, and the
#: partition size below which no word is ever dropped from a full-text query (in fewer
#: documents a word's share says little of how common it is).
DF_TTL_S = 60.0
MIN_DOCS_TO_PRUNE = 100
#: The longest a search waits for a busy embedding model before ranking by full text alone.
QUERY_PATIENCE_S = 2.0
#: Foreseen embeddings kept waiting for their writes (a lone write takes its own up at once).
_FORESEEN = 8


@dataclass(frozen=True)
class SearchRequest:
    """One hybrid search within a partition.

    ``since``/``until`` strictly filter by when things happened; ``time_range`` only boosts
    what falls inside it (``SearchConfig.time_boost``); ``now`` is the reference time for
    recency (default: the current time).
    """

    query: str
    limit: int = 10
    content_types: tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    since: datetime | None = None
    until: datetime | None = None
    time_range: tuple[datetime, datetime] | None = None
    now: datetime | None = None


@dataclass(frozen=True)
class SearchHit:
    """A record found by hybrid search, its score in [0, 1] and the score's parts."""

    record: Record
    score: float
    breakdown: dict[str, float]


def _remembered(entries: int) -> TTLCache[Any, int]:
    return TTLCache(maxsize=entries, ttl=DF_TTL_S, timer=time.monotonic)


def _observe(future: asyncio.Future[Any]) -> None:
    # Reading the exception marks it retrieved (a cancelled future has none to read).
    _ = future.cancelled() or future.exception()


def _filtered(query: RecordQuery) -> bool:
    """Whether ``query`` selects fewer records than its partition holds (by type, metadata or
    time)."""
    return bool(
        query.content_types is not None
        or query.metadata
        or query.occurred_after
        or query.occurred_before
    )


def vector_bytes(vector: np.ndarray[Any, Any]) -> bytes:
    """A vector as stored: little-endian float32 bytes."""
    return np.asarray(vector, dtype="<f4").tobytes()


class Indexer:
    """Embeds on write and answers hybrid searches for the namespaces that use it."""

    def __init__(
        self,
        backend: Backend,
        embedder: Embedder | None = None,
        config: SearchConfig | None = None,
        reranker: Reranker | None = None,
        *,
        min_docs_to_prune: int = MIN_DOCS_TO_PRUNE,
    ) -> None:
        self.backend = backend
        self.embedder = embedder
        self.config = config or SearchConfig()
        self.reranker = reranker
        #: Below this many documents in a partition no word is dropped as too common.
        self.min_docs_to_prune = min_docs_to_prune
        self._indexes: dict[tuple[str, Scope], VectorIndex] = {}
        #: Graphs of dropped indexes, each the starting point of its partition's reload.
        self._dropped: dict[tuple[str, Scope], VectorIndex] = {}
        self.graphs = VectorGraphs.beside(backend) if self.config.save_graphs else None
        #: On a backend that searches vectors itself, the small partitions searched here, and
        #: the lock of each one loading.
        self._loading: dict[tuple[str, Scope], asyncio.Lock] = {}
        #: Searches under way (held partitions are searched here only when few are).
        self._searching = 0
        self.held = (
            HeldPartitions(backend.search, self.config.held_vectors)
            if isinstance(backend.search, FollowsTenantLog) and self.config.held_vectors
            else None
        )
        # Several memory types embed the same prompt in one turn, often at the same moment:
        # each prompt is embedded once, and callers share the one computation in flight.
        self._queries: OrderedDict[str, asyncio.Future[FloatArray]] = OrderedDict()
        # Statistics that steer which words are scored, never which documents match.
        self._df: TTLCache[tuple[tuple[str, Scope], str], int] = _remembered(50_000)
        self._sizes: TTLCache[tuple[str, Scope], int] = _remembered(10_000)
        self._version: int | None = None
        self._checked = -STALE_AFTER_S
        self._lock = asyncio.Lock()
        #: Records committed without their vector while the model was unavailable.
        self.pending = PendingVectors(self._embed_stored)
        #: Part vectors of records written with their whole-text vector alone.
        aside = aside_lane(embedder) if embedder is not None else None
        self.deferred = DeferredParts(
            backend,
            self.embed,
            self.committed,
            lambda: self.model,
            aside=None if aside is None else _stored_vectors(aside.embed_aside),
            eager=backend.url.startswith("sqlite"),
        )
        #: Embeddings begun for writes still being prepared (``foresee``), by text.
        self._foreseen: OrderedDict[str, asyncio.Future[FloatArray]] = OrderedDict()

    @property
    def model(self) -> str:
        """The id of the embedding model, or an empty string without one."""
        return self.embedder.model_id if self.embedder is not None else ""

    async def warm(self) -> None:
        """Load the embedding model now, so the first search does not pay for it."""
        if self.embedder is not None and not self._queries:
            await self.embed_query("warm-up")

    async def embed_query(self, text: str) -> FloatArray:
        """The vector of a search query (the last 256 are remembered)."""
        # Shielded: a caller that gives up (a timed-out memory type) must not cancel the
        # computation the other callers share.
        return await asyncio.shield(self._query_vector(text))

    def _query_vector(self, text: str) -> asyncio.Future[FloatArray]:
        """The embedding of ``text``, computed or in flight; a failure is not remembered."""
        assert self.embedder is not None
        found = self._queries.get(text)
        if found is not None and not (
            found.done() and (found.cancelled() or found.exception() is not None)
        ):
            self._queries.move_to_end(text)
            return found
        # The task keeps the short budget: a search does not wait out a write's retries.
        with patience(QUERY_PATIENCE_S):
            future = asyncio.ensure_future(self.embedder.embed_one(text))
        # A search that ends early never awaits it; its failure is raised to whoever does.
        future.add_done_callback(_observe)
        self._queries[text] = future
        if len(self._queries) > 256:
            self._queries.popitem(last=False)
        return future

    def foresee(self, text: str) -> None:
        """Begin embedding ``text``, which a lone write still being prepared will embed: the
        model runs while the write is prepared, and ``embedding_for_write`` takes the
        embedding up. One not taken up (the write failed first, or embeds another text) is
        dropped after a few more."""
        if self.embedder is None or text in self._foreseen:
            return
        future = start_embedding(self.embedder, [text])
        future.add_done_callback(_observe)
        self._foreseen[text] = future
        if len(self._foreseen) > _FORESEEN:
            self._foreseen.popitem(last=False)[1].cancel()

    async def embed(self, texts: Sequence[str]) -> list[bytes] | None:
        """Stored vectors for ``texts`` (``None`` without an embedder)."""
        if self.embedder is None:
            return None
        matrix = await self.embedder.embed(list(texts))
        return [vector_bytes(row) for row in matrix]

    async def embed_records(
        self, spec: ProjectionSpec, records: Sequence[Record], *, parts: bool = True
    ) -> Embedded:
        """Each record's whole-text vector and its part vectors (concatenated; ``None`` for a
        record without parts, and for every record unless ``parts``), all computed in one call
        (``None`` without an embedder)."""
        everything, texts = _texts_to_embed(spec, records, parts)
        blobs = await self.embed(everything)
        return None if blobs is None else _split(blobs, len(records), texts)

    async def embed_for_write(
        self, spec: ProjectionSpec, records: Sequence[Record], *, parts: bool = True
    ) -> Embedded:
        """``embed_records``, except that an unavailable model gives ``None`` (the write
        commits without vectors, then hands its records to ``pending``) instead of failing."""
        return await self.embedding_for_write(spec, records, parts=parts)

    def embedding_for_write(
        self, spec: ProjectionSpec, records: Sequence[Record], *, parts: bool = True
    ) -> asyncio.Future[Embedded]:
        """``embed_for_write`` as a future whose model work has begun, when the embedder can
        begin it at once (``StartingEmbedder``), before this returns: a write prepares its
        transaction while the model runs. Cancelling it gives up on the vectors."""
        if self.embedder is None:
            nothing: asyncio.Future[Embedded] = asyncio.get_running_loop().create_future()
            nothing.set_result(None)
            return nothing
        everything, texts = _texts_to_embed(spec, records, parts)
        foreseen = self._foreseen.pop(everything[0], None) if len(everything) == 1 else None
        started = foreseen if foreseen is not None else start_embedding(self.embedder, everything)

        def split(matrix: FloatArray) -> Embedded:
            self.pending.model_is_back()
            return _split([vector_bytes(row) for row in matrix], len(records), texts)

        written = mapped(started, split, failure=_unavailable)
        written.add_done_callback(lambda done: started.cancel() if done.cancelled() else None)
        return written

    def written(
        self,
        spec: ProjectionSpec,
        stored: Sequence[Record],
        embedded: tuple[list[bytes], list[bytes | None]] | None,
    ) -> None:
        """After a write committed: note its records for a later embedding if the model was
        unavailable (``embedded`` is ``None`` while there is an embedder)."""
        if embedded is None and self.embedder is not None:
            self.pending.add(spec, stored)

    async def _current(self) -> None:
        # Other processes' commits are noticed within STALE_AFTER_S: the vector cache may lag
        # that long behind them (full-text search never lags, it reads the database).
        now = time.monotonic()
        if now - self._checked < STALE_AFTER_S:
            return
        self._checked = now
        version = await self.backend.search.data_version()
        if version != self._version:
            self.forget_all()
            self._version = version

    async def vector_index(
        self, namespace: str, partition: Scope, *, follow: bool = True
    ) -> VectorIndex:
        """The in-memory vector index of one partition, loaded on first use; for a held
        partition, brought in step with its tenant's log first (unless not ``follow``: this
        search did that already)."""
        assert self.embedder is not None
        slot = (namespace, partition)
        if self.held is not None:
            return await self._held_index(slot, self.held, follow=follow)
        async with self._lock:
            await self._current()
            index = self._indexes.get(slot)
            if index is None:
                index, built = await self._load_index(namespace, partition)
                self._indexes[slot] = index
                if built and self.graphs is not None:
                    # A built graph is saved at once (a patched one on close); registered
                    # first, so that writes committed while the files are written reach it.
                    await self.graphs.save(self._identity(slot), index)
            return index

    async def _held_index(
        self, slot: tuple[str, Scope], held: HeldPartitions, *, follow: bool
    ) -> VectorIndex:
        """``vector_index`` of a held partition. Searches follow the log side by side (each
        read waits for this process's queued writes of the tenant), and a partition loads
        under a lock of its own: no search waits for another partition's load."""
        index = self._indexes.get(slot)
        if index is not None and follow and not await held.catch_up(slot, index, self.model):
            self._drop(slot)
        index = self._indexes.get(slot)
        if index is not None:
            return index
        lock = self._loading.setdefault(slot, asyncio.Lock())
        async with lock:
            index = self._indexes.get(slot)
            if index is None:
                # Read before the vectors: what is committed meanwhile is after it in the log.
                position = await held.position(slot[1])
                index, _ = await self._load_index(*slot)
                self._indexes[slot] = index
                for old in held.loaded(slot, position, len(index)):
                    self._drop(old)
            self._loading.pop(slot, None)
        return index

    def _identity(self, slot: tuple[str, Scope]) -> dict[str, Any]:
        assert self.embedder is not None
        return VectorGraphs.identity(*slot, self.model, self.embedder.dimensions)

    async def _load_index(self, namespace: str, partition: Scope) -> tuple[VectorIndex, bool]:
        """A partition's vector index from its stored vectors, and whether a graph was built
        for it: its graph, when it needs one, is the one it had before it was dropped, or the
        saved one, brought in step with the stored vectors, or else built."""
        assert self.embedder is not None
        index = VectorIndex(self.embedder.dimensions, ann_threshold=self.config.ann_threshold)
        dropped = self._dropped.pop((namespace, partition), None)
        saved = dropped.saved_graph() if dropped is not None else None
        if saved is None and self.graphs is not None:
            # Read before the vectors: what is committed meanwhile is in the vectors.
            saved = await self.graphs.load(self._identity((namespace, partition)))
        ids, blobs = await self.backend.search.vectors(
            RecordQuery(namespace, partition), self.model
        )
        if not ids:
            return index, False
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(ids), -1)
        patched = index.load(ids, matrix.astype(np.float32), saved)
        if index.uses_ann:
            # A partition large enough for a graph re-scores a few dozen candidates a query:
            # their part vectors are read when first needed, not every record's at once.
            index.lazy_parts = True
        else:
            parts = await self.backend.search.part_vectors(
                RecordQuery(namespace, partition), self.model
            )
            index.set_parts(list(parts), list(parts.values()))
        return index, index.uses_ann and not patched

    async def close(self) -> None:
        """Save the graphs that changed since they were loaded or saved."""
        async with self._lock:
            if self.graphs is None or self.embedder is None:
                return
            for slot, index in [*self._dropped.items(), *self._indexes.items()]:
                await self.graphs.save(self._identity(slot), index)
            self._dropped.clear()

    def indexed_event(
        self, record: Record, scope: Scope, trace: TraceContext | None = None
    ) -> EventEnvelope:
        """The ``memory.indexed`` event of storing ``record``'s vector (written in ``scope``)."""
        return MemoryIndexed(
            key=record.key, index_type="vector", provider_id=record.namespace, model=self.model
        ).to_envelope(scope=scope, trace=trace)

    def indexed_events(
        self,
        records: Sequence[Record],
        written: Sequence[EventEnvelope],
        scope: Scope,
        trace: TraceContext,
    ) -> list[EventEnvelope]:
        """The ``memory.indexed`` events of storing the vectors of ``records`` just written, each
        caused by its ``memory.written`` event (aligned with them)."""
        return [
            self.indexed_event(r, scope, trace.caused_by(event.event_id))
            for r, event in zip(records, written, strict=True)
        ]

    def committed(
        self,
        namespace: str,
        partition: Scope,
        stored: Sequence[Record],
        vectors: Sequence[bytes | None] | None,
        parts: Sequence[bytes | None] | None = None,
    ) -> None:
        """Bring loaded vector indexes in step with records this process just committed (and
        their part vectors, aligned with ``vectors``)."""
        index = self._indexes.get((namespace, partition))
        if index is None:
            return
        none = [None] * len(stored)
        index.put(
            [
                (r.id, v, p)
                for r, v, p in zip(stored, vectors or none, parts or none, strict=True)
                if r.id is not None
            ]
        )

    def removed(self, namespace: str, partition: Scope, ids: Sequence[int]) -> None:
        """Drop deleted records from a loaded vector index."""
        index = self._indexes.get((namespace, partition))
        if index is not None:
            index.remove(ids)

    def invalidate(self, namespace: str, partition: Scope) -> None:
        """Drop one partition's loaded vector index (it reloads on next use)."""
        self._drop((namespace, partition))

    def forget_all(self) -> None:
        """Drop every loaded vector index (after a rebuild, say)."""
        for slot in list(self._indexes):
            self._drop(slot)

    def _drop(self, slot: tuple[str, Scope]) -> None:
        # Kept until the partition reloads, which checks its graph against the stored vectors.
        index = self._indexes.pop(slot, None)
        if self.held is not None:
            self.held.dropped(slot)
        if index is not None and index.uses_ann:
            self._dropped[slot] = index

    async def search(
        self,
        namespace: str,
        partition: Scope,
        request: SearchRequest,
        *,
        use_vectors: bool,
        part_vectors: bool = False,
        document: Callable[[Record], str] | None = None,
    ) -> list[SearchHit]:
        """Hybrid search: BM25 and vector candidates fused, shaped, and cut to ``limit``.

        With ``part_vectors`` (a namespace whose records carry sentence vectors), every
        candidate's vector score is its best similarity over its whole-text and part vectors.
        With a reranker, the best ``rerank_candidates`` are re-ordered by it, each shown to it
        as ``document(record)`` (default: the record's full-text key).
        """
        self._searching += 1
        try:
            return await self._search(
                namespace,
                partition,
                request,
                use_vectors=use_vectors,
                part_vectors=part_vectors,
                document=document,
            )
        finally:
            self._searching -= 1

    async def _search(
        self,
        namespace: str,
        partition: Scope,
        request: SearchRequest,
        *,
        use_vectors: bool,
        part_vectors: bool,
        document: Callable[[Record], str] | None,
    ) -> list[SearchHit]:
        config = self.config
        now = utc_now()
        base = RecordQuery(
            namespace,
            partition,
            content_types=request.content_types,
            metadata=dict(request.metadata),
            alive_at=now,
            occurred_after=request.since,
            occurred_before=request.until,
        )
        scores: dict[str, dict[int, float]] = {}
        records: dict[int, Record] = {}
        wants_vectors = config.mode != "bm25" and use_vectors and self.embedder is not None
        # The model embeds the query on its own thread while SQLite runs the full-text query.
        query_vector = self._query_vector(request.query) if wants_vectors else None
        lazy = self._ranks_by_scores_alone(request)
        sentences = query_vector is not None and part_vectors and config.part_vectors
        here = query_vector is not None and await self._searched_here(namespace, partition, base)
        # Records read from now on may be kept for later searches (see ``HeldPartitions``).
        kept = self.held.generation((namespace, partition)) if here and self.held else None
        # Vectors searched here need none of the database's: its searches read records only.
        found = self._best_hits(sentences and not here, lazy)
        # Both signals at once: the vector index is searched as soon as the query vector is
        # ready, while SQLite may still be busy with the full-text query.
        text, vector = await asyncio.gather(
            self._text_scores(request.query, partition, base, records, lazy=lazy, found=found)
            if config.mode != "vector"
            else _nothing(),
            self._vector_scores(namespace, partition, base, query_vector, found, here=here)
            if query_vector is not None
            else _nothing(),
        )
        if found is not None and not lazy:
            records.update(found.take(list(found.rows)))
        if text is not None:
            scores["bm25"] = text
        if vector is not None and query_vector is not None:
            scores["vector"] = vector
            query = await _embedded(query_vector) if part_vectors and config.part_vectors else None
            if part_vectors and config.part_vectors and query is None:
                del scores["vector"]
        if "vector" in scores:
            # The vector hits' records (read at once when the ranking needs them) and their
            # sentence vectors' scores are read side by side: the second only adds scores to
            # hits, and the hits without a record are those of the vector search either way.
            parts, gone = await asyncio.gather(
                self._best_part_scores(namespace, partition, scores, query, found, here=here)
                if query is not None
                else _nothing(),
                self._read_live(
                    namespace, partition, list(scores["vector"]), records, now, kept=kept
                )
                if not lazy
                else _no_ids(),
            )
            if parts is not None:
                scores["vector"] = parts
            scores["vector"] = {i: s for i, s in scores["vector"].items() if i not in gone}
        reference = request.now or now
        span = request.time_range if config.time_boost else None
        while True:
            scores = {name: signal for name, signal in scores.items() if signal}
            if not scores:
                return []
            fused = fuse(
                scores,
                config,
                ages_days={i: _age_days(r, reference) for i, r in records.items()}
                if config.recency_weight
                else None,
                importance={i: _importance(r) for i, r in records.items()}
                if config.importance_weight
                else None,
                in_range={i: _inside(r, span) for i, r in records.items()} if span else None,
            )
            if config.session_weight:
                threads = {i: r.thread for i, r in records.items()}
                fused = group_boost(fused, threads, config.session_weight)
            if not lazy:
                break
            # Only the hits that make the cut are read. A vector hit whose record is no longer
            # live (expired, or forgotten since the index loaded) leaves the ranking, and the
            # rest is fused again: with weighted fusion no other hit's score changes.
            top = [f.id for f in fused[: request.limit]]
            gone = await self._read_live(namespace, partition, top, records, now, found, kept=kept)
            if not gone:
                break
            scores["vector"] = {i: s for i, s in scores["vector"].items() if i not in gone}
        if self.reranker is not None and config.rerank_candidates:
            fused = await self._reranked(
                namespace, partition, request.query, fused, records, now, document, found, kept
            )
        ranked = [SearchHit(records[f.id], f.score, f.breakdown) for f in fused[: request.limit]]
        if config.neighbours:
            ranked = await self._with_neighbours(namespace, partition, ranked, now)
        return ranked[: request.limit]

    async def _reranked(
        self,
        namespace: str,
        partition: Scope,
        query: str,
        fused: list[Fused],
        records: dict[int, Record],
        now: datetime,
        document: Callable[[Record], str] | None,
        found: BestHits | None = None,
        kept: int | None = None,
    ) -> list[Fused]:
        """``fused`` with its best ``rerank_candidates`` re-ordered by the reranker; as it was
        if the reranker fails (logged: recall does without it)."""
        assert self.reranker is not None
        top = [f.id for f in fused[: self.config.rerank_candidates]]
        gone = await self._read_live(namespace, partition, top, records, now, found, kept=kept)
        fused = [f for f in fused if f.id not in gone]
        judged = [i for i in top if i not in gone]
        text_of = document or (lambda record: record.text)
        try:
            scores = await self.reranker.rerank(query, [text_of(records[i]) for i in judged])
        except RerankError as exc:
            _log.warning("reranking skipped, hybrid order kept: %s", exc.message)
            return fused
        return rerank(fused, dict(zip(judged, scores, strict=True)), self.config.rerank_weight)

    async def _text_scores(
        self,
        query: str,
        partition: Scope,
        base: RecordQuery,
        records: dict[int, Record],
        *,
        lazy: bool,
        found: BestHits | None = None,
    ) -> dict[int, float] | None:
        """BM25 scores of the records ``base`` (in ``partition``) selects for ``query`` (None
        when no word of it is worth asking); unless ``lazy``, the hits' records go into
        ``records``; given ``found``, what the search reads of its best hits goes there."""
        search, limit = self.backend.search, self.config.candidates
        terms = self.full_text_terms(query)
        if found is not None and isinstance(search, SearchesReadBestHits):
            rule = self.word_pruning(terms)
            # The words are pruned in the search: no round trip for their frequencies.
            pruned = await search.text_pruned(base, terms, rule, limit, found) if rule else None
            if pruned is not None:
                return dict(pruned)
            match = fts_match(await self._selective(terms, base.namespace, partition))
            return dict(await search.text_best(base, match, limit, found)) if match else None
        match = fts_match(await self._selective(terms, base.namespace, partition))
        if match is None:
            return None
        if lazy and not isinstance(search, TextHitsWithRecords):
            # Records are read later, for the hits that make the cut only.
            return dict(await search.text_ids(base, match, limit))
        hits = await search.text(base, match, limit)
        records.update((r.id, r) for r, _ in hits if r.id is not None)
        return {r.id: s for r, s in hits if r.id is not None}

    def _ranks_by_scores_alone(self, request: SearchRequest) -> bool:
        """Whether the fused order depends on nothing but each signal's own scores, so records
        are needed only for the hits that make the cut."""
        config = self.config
        return (
            config.fusion == "weighted"
            and not config.recency_weight
            and not config.importance_weight
            and not (config.time_boost and request.time_range)
            and not config.session_weight
        )

    async def _read_live(
        self,
        namespace: str,
        partition: Scope,
        ids: Sequence[int],
        records: dict[int, Record],
        now: datetime,
        found: BestHits | None = None,
        *,
        kept: int | None = None,
    ) -> set[int]:
        """Read the live records among ``ids`` that ``records`` lacks into it (those the
        searches read, from ``found``; given ``kept``, the generation of a held partition
        this search brought in step with its log, those it keeps); returns the ids that are
        no longer live."""
        slot = (namespace, partition)
        held = self.held if kept is not None else None
        if found is not None:
            taken = found.take(i for i in ids if i not in records)
            records.update(taken)
            if held is not None:
                held.keep(slot, taken.values(), kept)
        if held is not None:
            records.update(held.records(slot, [i for i in ids if i not in records], now))
        missing = tuple(i for i in ids if i not in records)
        if not missing:
            return set()
        read = await self.backend.scan(RecordQuery(namespace, partition, ids=missing, alive_at=now))
        records.update((r.id, r) for r in read if r.id is not None)
        if held is not None:
            held.keep(slot, read, kept)
        return {i for i in missing if i not in records}

    async def full_text_match(self, query: str, namespace: str, partition: Scope) -> str | None:
        """The full-text expression hybrid search asks of ``namespace``'s ``partition`` for
        ``query``: its words, without time expressions and the words too common to score."""
        return fts_match(await self._selective(self.full_text_terms(query), namespace, partition))

    def full_text_terms(self, query: str) -> list[str]:
        """The words of ``query`` a full-text search asks for, time expressions left out."""
        text = strip_time_expressions(query) if self.config.strip_time else query
        return query_terms(text) or query_terms(query)

    def word_pruning(self, terms: list[str]) -> WordPruning | None:
        """The rule ``_selective`` prunes ``terms`` by, for a backend that applies it in its
        full-text search (``None`` when nothing would be pruned, or the backend cannot)."""
        config = self.config
        if not isinstance(self.backend.search, SearchesReadBestHits) or len(terms) < 2:
            return None
        if config.max_term_share <= 0 and not config.max_scored_docs:
            return None
        return WordPruning(config.max_term_share, self.min_docs_to_prune, config.max_scored_docs)

    async def _selective(self, terms: list[str], namespace: str, partition: Scope) -> list[str]:
        """``terms`` without the ones too common to be worth scoring.

        Two rules, both on the partition's own document frequencies (another tenant's
        records never change which words are scored): words found in more than
        ``max_term_share`` of a large partition are left out; then, while the words left
        would have BM25 score more than ``max_scored_docs`` of its documents, the most common
        one is left out. The rarest word always stays. Frequencies and sizes are remembered
        for a minute: they only steer which words are scored, never which documents match.
        """
        config = self.config
        if (config.max_term_share <= 0 and not config.max_scored_docs) or len(terms) < 2:
            return terms
        slot = (namespace, partition)
        unknown = [t for t in terms if (slot, t) not in self._df]
        if unknown:
            found = await self.backend.search.document_frequencies(namespace, partition, unknown)
            self._df.update({(slot, t): n for t, n in found.items()})
        total = await self._size(slot)
        df = {t: self._df.get((slot, t), 0) for t in terms}
        kept = terms
        if config.max_term_share > 0 and total >= self.min_docs_to_prune:
            kept = [t for t in terms if df[t] <= config.max_term_share * total]
            kept = kept or [min(terms, key=df.__getitem__)]
        if config.max_scored_docs and len(kept) > 1:
            by_rarity = sorted(kept, key=lambda t: (df[t], t))
            while len(by_rarity) > 1 and sum(df[t] for t in by_rarity) > config.max_scored_docs:
                by_rarity.pop()
            kept = [t for t in kept if t in by_rarity]
        return kept

    async def _size(self, partition: tuple[str, Scope]) -> int:
        """How many records a (namespace, partition) holds (remembered for a minute)."""
        known = self._sizes.get(partition)
        if known is None:
            known = self._sizes[partition] = await self.backend.search.document_count(*partition)
        return known

    async def _vector_scores(
        self,
        namespace: str,
        partition: Scope,
        base: RecordQuery,
        query_vector: asyncio.Future[FloatArray],
        found: BestHits | None = None,
        *,
        here: bool = False,
    ) -> dict[int, float] | None:
        """Cosine similarities of the nearest candidates, from this process's index if
        ``here`` (else, given ``found`` with a model, what the database's search reads of its
        best hits goes there); ``None`` when the query cannot be embedded now (the search
        ranks by full text alone)."""
        search, limit = self.backend.search, self.config.candidates
        try:
            if not here and found is not None and found.model:
                assert isinstance(search, SearchesReadBestHits)  # ``_best_hits`` gave ``found``
                probe = vector_bytes(await asyncio.shield(query_vector))
                hits = await search.nearest_best(base, probe, limit, found)
            else:
                hits = await self.nearest(
                    namespace, partition, base, query_vector, limit, here=here
                )
        except EmbedderUnavailableError as exc:
            _log.warning("searching by full text alone: %s", exc.message)
            return None
        return {i: s for i, s in hits if s >= self.config.min_similarity}

    async def _searched_here(self, namespace: str, partition: Scope, base: RecordQuery) -> bool:
        """Whether a search's nearest vectors come from an index this process holds: always
        on a backend without a vector search of its own; on one with it, for an unfiltered
        search of a partition small enough to hold (``HeldPartitions``)."""
        if not isinstance(self.backend.search, NativeVectorSearch):
            return True
        slot = (namespace, partition)
        busy = self._searching > HELD_SEARCHES_AT_ONCE
        if self.held is None or _filtered(base) or slot in self._loading or busy:
            # Nor while another search loads it, nor among many searches at once: the
            # database answers them.
            return False
        return slot in self._indexes or self.held.wanted(slot, await self._size(slot))

    def _best_hits(self, sentences: bool, lazy: bool) -> BestHits | None:
        """What the searches should read of their best hits for ranking (every hit's record
        unless ``lazy``; vector sets for the sentence-vector pass if ``sentences``), for a
        backend whose searches can (else ``None``)."""
        if not isinstance(self.backend.search, SearchesReadBestHits):
            return None
        best = self.config.part_candidates or self.config.candidates
        return BestHits(self.model if sentences else None, best, every_record=not lazy)

    async def _best_part_scores(
        self,
        namespace: str,
        partition: Scope,
        scores: dict[str, dict[int, float]],
        query: FloatArray,
        read: BestHits | None = None,
        *,
        here: bool = False,
    ) -> dict[int, float]:
        """The vector scores with the best candidates' replaced by their best cosine similarity
        over their whole-text and part vectors.

        The best ``part_candidates`` of each signal (the whole-text vectors and BM25) are
        re-scored, so a record whose one relevant sentence the whole-text vector hides is still
        found when its words match; the rest keep their whole-text score. The vectors come
        from this process's index of the partition (``here``), or, for a backend that
        searches vectors itself, from the database.
        """
        top = self.config.part_candidates or None
        chosen: set[int] = set()
        for signal in scores.values():
            chosen.update(sorted(signal, key=lambda i: (-signal[i], i))[:top])
        candidates = tuple(sorted(chosen))
        whole = scores.get("vector", {})
        if not candidates:
            return dict(whole)
        found: dict[int, float] = {}
        if here:
            # This process holds the partition's vectors, its parts included; what another
            # process wrote since the index loaded is read from the database.
            index = await self.vector_index(namespace, partition, follow=False)
            unknown = index.parts_unknown(candidates)
            if unknown:
                changes = index.changes
                parts = await self.backend.search.part_vectors(
                    RecordQuery(namespace, partition, ids=tuple(unknown)), self.model
                )
                # A write that reached the index meanwhile may have outdated what was read:
                # then those candidates are scored from the database below instead.
                if index.changes == changes:
                    index.set_parts(unknown, [parts.get(i) for i in unknown])
            found = index.best_similarities(candidates, query)
            candidates = tuple(i for i in candidates if i not in found)
        if candidates:
            found |= await self._stored_best(namespace, partition, candidates, query, read)
        floor = self.config.min_similarity
        return {**whole, **{i: s for i, s in found.items() if s >= floor}}

    async def _stored_best(
        self,
        namespace: str,
        partition: Scope,
        ids: tuple[int, ...],
        query: FloatArray,
        read: BestHits | None = None,
    ) -> dict[int, float]:
        """The best similarity to ``query`` over each record's stored whole-text and part
        vectors, from ``read`` or else the database (records without vectors are left
        out)."""
        known = read.sets if read is not None else {}
        missing = tuple(i for i in ids if i not in known)
        sets = {i: blob for i in ids if (blob := known.get(i)) is not None}
        if missing:
            sets |= await self.backend.search.vector_sets(
                RecordQuery(namespace, partition, ids=missing), self.model
            )
        if not sets:
            return {}
        width = 4 * len(query)
        matrix = np.frombuffer(b"".join(sets.values()), dtype="<f4").reshape(-1, len(query))
        best = best_of_blocks(matrix, [len(blob) // width for blob in sets.values()], query)
        return {i: float(s) for i, s in zip(sets, best, strict=True)}

    async def nearest(
        self,
        namespace: str,
        partition: Scope,
        base: RecordQuery,
        vector: Awaitable[FloatArray],
        limit: int,
        *,
        here: bool = False,
    ) -> list[tuple[int, float]]:
        """Ids and cosine similarities of the ``limit`` records ``base`` selects nearest to
        ``vector``: the backend's own vector search where it has one (unless ``here``: a
        partition this process holds), else this process's vector index of the partition."""
        search = self.backend.search
        if isinstance(search, NativeVectorSearch) and not here:
            query = await asyncio.shield(vector)
            return await search.nearest(base, self.model, vector_bytes(query), limit)
        index = await self.vector_index(namespace, partition)
        if not len(index):
            return []
        allowed = set(await search.record_ids(base)) if _filtered(base) else None
        return index.search(await asyncio.shield(vector), limit, allowed)

    async def _with_neighbours(
        self, namespace: str, partition: Scope, hits: list[SearchHit], now: datetime
    ) -> list[SearchHit]:
        anchors = [(h.record.thread, h.record.created_at) for h in hits if h.record.thread]
        if not anchors:
            return hits
        around = await self.backend.search.neighbours(
            namespace, partition, anchors, self.config.neighbours, now
        )
        seen = {h.record.id for h in hits}
        expanded = list(hits)
        threaded = [h for h in hits if h.record.thread]
        for hit, neighbours in zip(threaded, around, strict=True):
            for record in neighbours:
                if record.id in seen:
                    continue
                seen.add(record.id)
                expanded.append(
                    SearchHit(
                        record,
                        hit.score * self.config.neighbour_decay,
                        {"neighbour_of": float(hit.record.id or 0)},
                    )
                )
        expanded.sort(key=lambda h: (-h.score, h.record.id or 0))
        return expanded

    async def reindex(
        self,
        spec: ProjectionSpec,
        progress: Callable[[int], None] | None = None,
        batch: int = 256,
    ) -> int:
        """Compute and store the missing vectors of ``spec``'s namespace (every partition)."""
        if self.embedder is None:
            return 0
        done = 0
        while True:
            todo = await self.backend.search.unvectored(
                RecordQuery(spec.namespace, None, limit=batch), self.model
            )
            if not todo:
                break
            await self._store_vectors(spec, todo)
            done += len(todo)
            if progress is not None:
                progress(len(todo))
        self.forget_all()
        return done

    async def _embed_stored(self, spec: ProjectionSpec, ids: tuple[int, ...]) -> int:
        """Embed the records of ``spec``'s namespace among ``ids`` that still lack a vector
        of the current model (soft-forgotten ones too: a restore brings them back)."""
        if self.embedder is None:
            return 0
        done = 0
        for start in range(0, len(ids), 256):
            todo = await self.backend.search.unvectored(
                RecordQuery(spec.namespace, None, ids=ids[start : start + 256], hidden=None),
                self.model,
            )
            if todo:
                await self._store_vectors(spec, todo)
                done += len(todo)
        if done:
            self.forget_all()
        return done

    async def _store_vectors(self, spec: ProjectionSpec, todo: Sequence[Record]) -> None:
        """Embed stored records and store their vectors, each with ``memory.indexed``."""
        embedded = await self.embed_records(spec, todo)
        assert embedded is not None
        kept = [(r.id, v, p) for r, v, p in zip(todo, *embedded, strict=True) if r.id is not None]
        await self.backend.search.put_vectors(
            self.model,
            [(record_id, v) for record_id, v, _ in kept],
            [self.indexed_event(r, r.scope) for r in todo],
            parts=[p for _, _, p in kept],
        )


def _stored_vectors(
    embed: Callable[[Sequence[str]], Awaitable[FloatArray]],
) -> Callable[[Sequence[str]], Awaitable[list[bytes] | None]]:
    """``embed``, giving each text's vector as it is stored."""

    async def stored(texts: Sequence[str]) -> list[bytes] | None:
        return [vector_bytes(row) for row in await embed(texts)]

    return stored


def _texts_to_embed(
    spec: ProjectionSpec, records: Sequence[Record], parts: bool
) -> tuple[list[str], list[list[str]]]:
    """What one model call embeds for ``records`` (their whole texts, then every part text),
    and each record's part texts (none unless ``parts``)."""
    texts = [spec.record_embed_parts(r) if parts else [] for r in records]
    return [spec.record_embed_text(r) for r in records] + [t for each in texts for t in each], texts


def _unavailable(exc: BaseException) -> Embedded:
    """A write's vectors when the model failed: none now if it is unavailable (the records are
    embedded later), else the failure."""
    if not isinstance(exc, EmbedderUnavailableError):
        raise exc
    _log.warning("storing without vectors for now: %s", exc.message)
    return None


def _split(blobs: list[bytes], count: int, texts: list[list[str]]) -> Embedded:
    """The whole-text vectors (the first ``count`` of ``blobs``) and each record's part
    vectors joined (``None`` for a record without parts), ``texts`` being its part texts."""
    sets: list[bytes | None] = []
    start = count
    for each in texts:
        sets.append(b"".join(blobs[start : start + len(each)]) if each else None)
        start += len(each)
    return blobs[:count], sets


async def _no_ids() -> set[int]:
    return set()


async def _nothing() -> None:
    return None


async def _embedded(query_vector: asyncio.Future[FloatArray]) -> FloatArray | None:
    """The query's vector, or ``None`` when the model is unavailable (the search ranks by
    full text alone)."""
    try:
        return await asyncio.shield(query_vector)
    except EmbedderUnavailableError as exc:
        _log.warning("searching by full text alone: %s", exc.message)
        return None


def _age_days(record: Record, now: datetime) -> float:
    moment = record.occurred_at or record.created_at
    return (now - moment).total_seconds() / 86_400


def _importance(record: Record) -> float:
    value = record.value.get("importance") if isinstance(record.value, dict) else None
    return float(value) if isinstance(value, int | float) else 0.5


def _inside(record: Record, span: tuple[datetime, datetime]) -> bool:
    moment = record.occurred_at or record.created_at
    return span[0] <= moment < span[1]
