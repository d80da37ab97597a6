"""``SearchBackend``: the candidate-retrieval primitives a backend offers hybrid recall."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope
from engramdb.storage.records import Record, RecordQuery

#: How many of a word's records a one-partition full-text query scores at most, on every
#: backend: its newest ones. A word fewer records hold (every word, in a partition of no more
#: records than this) is scored in every one of them, exactly as without the bound; beyond it,
#: a query costs the same however large the partition grows, and the word's document
#: frequency is still the partition's.
SCORED_PER_WORD = 1000


class SearchBackend(Protocol):
    """Full-text hits, stored vectors and neighbouring turns; ranking happens above."""

    #: How many of a word's newest records a one-partition full-text query scores at most
    #: (``SCORED_PER_WORD`` unless set).
    scored_per_word: int

    async def text(self, query: RecordQuery, match: str, limit: int) -> list[tuple[Record, float]]:
        """Records ``query`` selects matching the full-text expression ``match``, best first,
        each with its BM25 score (higher is better)."""
        ...

    async def text_ids(self, query: RecordQuery, match: str, limit: int) -> list[tuple[int, float]]:
        """``text``'s hits as record ids with their scores, for a caller that reads only the
        records it keeps."""
        ...

    async def document_frequencies(
        self, namespace: str, scope: Scope, terms: Sequence[str]
    ) -> dict[str, int]:
        """How many of the partition's records hold each term (never counting another
        partition's)."""
        ...

    async def document_count(self, namespace: str, scope: Scope) -> int:
        """How many records the partition holds, from statistics its writes keep."""
        ...

    async def record_ids(self, query: RecordQuery) -> list[int]:
        """Row ids of the records ``query`` selects."""
        ...

    async def vectors(self, query: RecordQuery, model: str) -> tuple[list[int], list[bytes]]:
        """Record ids and float32 vector bytes of ``model`` for the records ``query`` selects."""
        ...

    async def part_vectors(self, query: RecordQuery, model: str) -> dict[int, bytes]:
        """For each record ``query`` selects that has part vectors of ``model``: those
        vectors, as one run of float32 bytes."""
        ...

    async def vector_sets(self, query: RecordQuery, model: str) -> dict[int, bytes]:
        """For each record ``query`` selects that has a vector of ``model``: its whole-text
        vector followed by its part vectors, as one run of float32 bytes."""
        ...

    async def unvectored(self, query: RecordQuery, model: str) -> list[Record]:
        """Records ``query`` selects that have no vector of ``model``."""
        ...

    async def drop_vectors(self, namespace: str, *, keep_model: str | None = None) -> None:
        """Delete the stored vectors of ``namespace``'s records (all but ``keep_model``'s, when
        given)."""
        ...

    async def vector_counts(self) -> dict[str, int]:
        """How many records hold a vector, per model (reads every vector row: for stats)."""
        ...

    async def edge_vector_models(self) -> set[str]:
        """The models of the vectors of the oldest and the newest vectored record of each
        table: a few index lookups, enough to see a model change at open (old records keep the
        old model's vectors until they are embedded again)."""
        ...

    async def put_vectors(
        self,
        model: str,
        vectors: Sequence[tuple[int, bytes]],
        events: Sequence[EventEnvelope],
        *,
        parts: Sequence[bytes | None] | None = None,
        versions: Sequence[int] | None = None,
    ) -> None:
        """Store vectors by record id (records deleted meanwhile are skipped, and with
        ``versions``, aligned with ``vectors``, records written again since), with each
        record's part vectors if ``parts`` (aligned too) gives them, and append ``events`` in
        the same transaction."""
        ...

    async def neighbours(
        self,
        namespace: str,
        scope: Scope,
        anchors: Sequence[tuple[str, datetime]],
        count: int,
        alive_at: datetime,
    ) -> list[list[Record]]:
        """Up to ``count`` live records before and after each (thread, created_at) anchor."""
        ...

    async def data_version(self) -> int:
        """A number that changes whenever another connection or process commits."""
        ...


@runtime_checkable
class NativeVectorSearch(Protocol):
    """A backend that searches its stored vectors itself (pgvector's HNSW, say), so every
    process sharing the database searches the same, current index and none keeps its own."""

    async def nearest(
        self, query: RecordQuery, model: str, vector: bytes, limit: int
    ) -> list[tuple[int, float]]:
        """Ids and cosine similarities of the ``limit`` records ``query`` selects nearest to
        ``vector`` (float32 bytes), best first."""
        ...


@runtime_checkable
class FollowsTenantLog(Protocol):
    """A backend with its own vector search (``NativeVectorSearch``) whose small partitions a
    process may search from vectors it holds instead, kept current from the tenant's event
    log: every write of a record appends an event naming its provider and key in the same
    transaction, and events become visible in position order, so reading a tenant's events
    after the last position seen passes over no write, however late it committed."""

    #: Partitions of at most this many records may be searched from held vectors (0: none).
    held_vectors_up_to: int

    async def log_position(self, scope: Scope) -> int:
        """The position of the newest event of ``scope``'s tenant (0 for none)."""
        ...

    async def log_changes(
        self, scope: Scope, after: int, limit: int
    ) -> list[tuple[int, str, str | None]]:
        """Position, provider id and key of the events of ``scope``'s tenant after position
        ``after``, oldest first, at most ``limit`` of them."""
        ...

    async def keyed_vectors(
        self, query: RecordQuery, model: str
    ) -> list[tuple[int, bytes | None, bytes | None]]:
        """Each record ``query`` selects, as its id, vector and part vectors of ``model``
        (float32 bytes; ``None`` where it has none)."""
        ...


@dataclass
class BestHits:
    """What searches read beside their hits for ranking, in the same statement: of each
    search's ``best`` hits by score, then id (as ranking chooses them), the record and, given
    a ``model``, the vector set (whole-text vector, then part vectors, as float32 bytes;
    ``None``: the hit has no vectors of ``model``); with ``every_record``, every hit's
    record. Records come as rows of the shared layout (``storage.rows``): ranking makes
    ``Record``s of those it needs only (``take``)."""

    model: str | None
    best: int
    every_record: bool = False
    sets: dict[int, bytes | None] = field(default_factory=dict)
    rows: dict[int, tuple[Any, ...]] = field(default_factory=dict)

    def take(self, ids: Iterable[int]) -> dict[int, Record]:
        """The records of those of ``ids`` read (each row is made a ``Record`` once)."""
        # Imported here: the row layout's module imports the backend contract, which imports
        # this one.
        from engramdb.storage.rows import row_record

        return {i: row_record(self.rows.pop(i)) for i in ids if i in self.rows}


@runtime_checkable
class SearchesReadBestHits(Protocol):
    """A backend whose full-text and nearest-vector searches read what ranking needs of their
    best hits (``BestHits``) in the same statement, so ranking reads none of it again (for a
    database a round trip away)."""

    async def text_best(
        self, query: RecordQuery, match: str, limit: int, found: BestHits
    ) -> list[tuple[int, float]]:
        """``text_ids``; the best hits' records and vector sets go into ``found``."""
        ...

    async def nearest_best(
        self, query: RecordQuery, vector: bytes, limit: int, found: BestHits
    ) -> list[tuple[int, float]]:
        """``nearest`` (of ``found.model``, not ``None``); the best hits' records and vector
        sets go into ``found``."""
        ...

    async def text_pruned(
        self,
        query: RecordQuery,
        terms: Sequence[str],
        rule: WordPruning,
        limit: int,
        found: BestHits,
    ) -> list[tuple[int, float]] | None:
        """``text_best`` for the ``terms`` ``rule`` keeps in ``query``'s partition, without a
        round trip for their frequencies; ``None`` when it cannot tell which (the caller then
        asks for the frequencies and searches)."""
        ...


@dataclass(frozen=True)
class WordPruning:
    """Which words of a full-text query hybrid recall leaves out as too common, by the
    partition's own document frequencies: with at least ``min_docs`` records, those more than
    ``max_term_share`` of them hold; then, while the words left would score more than
    ``max_scored_docs`` documents (0: no limit), the most common one. The rarest word always
    stays."""

    max_term_share: float
    min_docs: int
    max_scored_docs: int


@runtime_checkable
class LocalVectorFiles(Protocol):
    """A backend whose database is a local file, beside which a process may keep the vector
    graphs it builds (a cache: a store copied without them works as well)."""

    def vector_graph_folder(self) -> Path | None:
        """The folder for those graphs (``None`` for a database kept in memory)."""
        ...


@runtime_checkable
class TextHitsWithRecords(Protocol):
    """A backend whose full-text hits come with their records at no extra cost (its
    ``text_ids`` reads them too), so hybrid recall keeps them instead of reading the best of
    them again."""

    text_hits_include_records: Literal[True]
