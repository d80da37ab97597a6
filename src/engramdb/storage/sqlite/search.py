"""Search primitives of the SQLite backend: BM25 through FTS5, stored vectors, and a
conversation's neighbouring turns. Ranking itself happens above, in pure functions."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from cachetools import TTLCache

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.rows import RECORD_SELECTED, row_record, time_text
from engramdb.storage.sqlite.event_store import insert_events
from engramdb.storage.sqlite.partition import partition_token
from engramdb.storage.sqlite.queries import (
    RECORD_SELECT,
    TEXT_HITS,
    UPSERT_VECTOR_IF_PRESENT,
    part_vector_select,
    query_partition_token,
    record_select,
    record_where,
    text_match,
    text_search,
    unvectored_select,
    vector_select,
    vector_set_select,
)
from engramdb.storage.sqlite.worker import SqliteWorker

_PARTITION = (
    "namespace = ? AND tenant = ? AND user_id = ? AND agent = ? AND session = ? AND plan = ?"
)
#: The columns of a whole record, after id and key, for ``SqliteSearch._text_hits``.
_WHOLE_RECORD = ", " + ", ".join(RECORD_SELECTED)
#: How many of the index's best full-text matches are read per wanted hit before filtering.
PREFETCH_FACTOR = 4
#: Seconds a partition's share of the index is trusted.
SHARE_TTL_S = 60.0
#: A partition under this share of the indexed records is searched within its token.
SMALL_SHARE = 0.5


class SqliteSearch:
    """Candidate retrieval for hybrid recall, on the backend's worker thread.

    Full-text hits come one of three ways: the index's best matches within the partition's
    token (a partition under ``small_share`` of the index), the index's best matches of the
    words alone (a partition that is most of the index, where asking for its token only slows
    the match down), and, when those best matches hold too few of the records asked for,
    every match of the partition joined to its records. ``prefetch_factor`` and
    ``small_share`` are the thresholds between them.
    """

    def __init__(
        self,
        worker: SqliteWorker,
        *,
        prefetch_factor: int = PREFETCH_FACTOR,
        small_share: float = SMALL_SHARE,
    ) -> None:
        self._worker = worker
        self.prefetch_factor = prefetch_factor
        self.small_share = small_share
        self._shares: TTLCache[tuple[str, object], bool] = TTLCache(
            maxsize=10_000, ttl=SHARE_TTL_S, timer=time.monotonic
        )

    def vector_graph_folder(self) -> Path | None:
        """``<database>.vectors``, beside the database file (none for ``:memory:``)."""
        path = self._worker.path
        return None if path == ":memory:" else Path(f"{path}.vectors")

    async def text(self, query: RecordQuery, match: str, limit: int) -> list[tuple[Record, float]]:
        """Records ``query`` selects that match the FTS5 expression ``match``, best first,
        with their BM25 scores (higher is better)."""

        def fetch(conn: sqlite3.Connection) -> list[tuple[Record, float]]:
            found = self._hits(conn, query, match, limit, _WHOLE_RECORD)
            return [(row_record(row[2:]), score) for row, score in found]

        return await self._worker.run(fetch)

    async def text_ids(self, query: RecordQuery, match: str, limit: int) -> list[tuple[int, float]]:
        """``text`` without reading the records: their ids, best first, with their scores."""

        def fetch(conn: sqlite3.Connection) -> list[tuple[int, float]]:
            found = self._hits(conn, query, match, limit, "")
            return [(int(row[0]), score) for row, score in found]

        return await self._worker.run(fetch)

    def _hits(
        self, conn: sqlite3.Connection, query: RecordQuery, match: str, limit: int, columns: str
    ) -> list[tuple[tuple[Any, ...], float]]:
        """Rows of id, key and ``columns`` of the records ``query`` selects that match
        ``match``, best first, with their scores."""
        if limit <= 0:
            return []
        token = query_partition_token(query)
        narrow = token is not None and self._is_small(conn, query)
        expression = text_match(match, token if narrow else None)
        found = self._text_hits(conn, query, expression, limit, columns)
        if found is None:
            # Other partitions (or the filters) took the index's best matches: every match of
            # the partition is joined, within its token when it has one.
            sql, params = text_search(query, text_match(match, token), limit, f"id, key{columns}")
            found = [(row[:-1], float(row[-1])) for row in conn.execute(sql, params)]
        return found

    def _text_hits(
        self,
        conn: sqlite3.Connection,
        query: RecordQuery,
        expression: str,
        limit: int,
        columns: str,
    ) -> list[tuple[tuple[Any, ...], float]] | None:
        """Rows of id, key and ``columns`` for the records ``query`` selects among the index's
        best matches of the FTS5 ``expression``, best first, with their scores; None when
        those best matches do not hold ``limit`` of them."""
        prefetch = limit * self.prefetch_factor
        hits = conn.execute(TEXT_HITS, (expression, prefetch)).fetchall()
        rank = dict(hits)
        found: list[tuple[Any, ...]] = []
        # Rows are read for the best hits first, a limit's worth at a time, until the filters
        # have let enough through.
        for start in range(0, len(hits), limit):
            ids = tuple(hit_id for hit_id, _ in hits[start : start + limit])
            sql, params = record_select(
                replace(query, ids=ids, limit=None, offset=0), columns=f"id, key{columns}"
            )
            found += conn.execute(sql, params).fetchall()
            if len(found) >= limit:
                break
        if len(found) < limit and len(hits) == prefetch:
            return None
        found.sort(key=lambda row: (rank[row[0]], row[1]))
        return [(row, -float(rank[row[0]])) for row in found[:limit]]

    def _is_small(self, conn: sqlite3.Connection, query: RecordQuery) -> bool:
        """Whether ``query``'s partition holds under ``small_share`` of the indexed records
        (then asking for its token pays; a partition that is most of the index would only
        slow the match down). Sizes are remembered for a minute."""
        key = (query.namespace, query.scope)
        known = self._shares.get(key)
        if known is None:
            where, params = record_where(RecordQuery(query.namespace, query.scope))
            (size,) = conn.execute(f"SELECT count(*) FROM records WHERE {where}", params).fetchone()
            (total,) = conn.execute("SELECT count(*) FROM records").fetchone()
            known = self._shares[key] = size < total * self.small_share
        return known

    async def document_frequencies(
        self, namespace: str, scope: Scope, terms: Sequence[str]
    ) -> dict[str, int]:
        """How many of the partition's records hold each term (within its token: another
        partition's records are never counted)."""
        token = partition_token(namespace, scope.columns())

        def fetch(conn: sqlite3.Connection) -> dict[str, int]:
            return {
                term: int(
                    conn.execute(
                        "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?",
                        (text_match('"' + term.replace('"', '""') + '"', token),),
                    ).fetchone()[0]
                )
                for term in terms
            }

        return await self._worker.run(fetch)

    async def document_count(self, namespace: str, scope: Scope) -> int:
        """How many records the partition holds (one row of ``text_stats``: no count)."""
        token = partition_token(namespace, scope.columns())

        def fetch(conn: sqlite3.Connection) -> int:
            row = conn.execute("SELECT docs FROM text_stats WHERE part = ?", (token,)).fetchone()
            return int(row[0]) if row else 0

        return await self._worker.run(fetch)

    async def record_ids(self, query: RecordQuery) -> list[int]:
        """Row ids of the records ``query`` selects."""
        sql, params = record_select(query, columns="id")
        return await self._worker.run(lambda conn: [row[0] for row in conn.execute(sql, params)])

    async def vectors(self, query: RecordQuery, model: str) -> tuple[list[int], list[bytes]]:
        """Ids and float32 vector bytes of ``model`` for the records ``query`` selects."""
        sql, params = vector_select(query, model)

        def fetch(conn: sqlite3.Connection) -> tuple[list[int], list[bytes]]:
            rows = conn.execute(sql, params).fetchall()
            return [r[0] for r in rows], [r[1] for r in rows]

        return await self._worker.run(fetch)

    async def part_vectors(self, query: RecordQuery, model: str) -> dict[int, bytes]:
        """Each selected record's part vectors of ``model``, for those that have any."""
        sql, params = part_vector_select(query, model)
        return await self._worker.run(lambda conn: dict(conn.execute(sql, params).fetchall()))

    async def vector_sets(self, query: RecordQuery, model: str) -> dict[int, bytes]:
        """Each selected record's vectors of ``model``: the whole text's, then its parts'."""
        sql, params = vector_set_select(query, model)
        return await self._worker.run(
            lambda conn: {row[0]: row[1] + (row[2] or b"") for row in conn.execute(sql, params)}
        )

    async def unvectored(self, query: RecordQuery, model: str) -> list[Record]:
        """Records ``query`` selects that have no vector of ``model``."""
        sql, params = unvectored_select(query, model)
        return await self._worker.run(
            lambda conn: [row_record(r) for r in conn.execute(sql, params)]
        )

    async def drop_vectors(self, namespace: str, *, keep_model: str | None = None) -> None:
        """Delete the stored vectors of ``namespace``'s records (all but ``keep_model``'s, when
        given)."""
        sql = "DELETE FROM vectors WHERE record_id IN (SELECT id FROM records WHERE namespace = ?)"
        params: tuple[str, ...] = (namespace,)
        if keep_model is not None:
            sql, params = f"{sql} AND model != ?", (namespace, keep_model)
        await self._worker.write(lambda conn: conn.execute(sql, params))

    async def vector_counts(self) -> dict[str, int]:
        """How many records hold a vector, per model (reads every vector row: for stats)."""
        return await self._worker.run(
            lambda conn: {
                str(model): int(count)
                for model, count in conn.execute(
                    "SELECT model, count(*) FROM vectors GROUP BY model ORDER BY model"
                )
            }
        )

    async def edge_vector_models(self) -> set[str]:
        """The models of the vectors of the lowest and the highest vectored record id."""
        return await self._worker.run(
            lambda conn: {
                str(model)
                for (model,) in conn.execute(
                    "SELECT model FROM vectors WHERE record_id IN "
                    "((SELECT min(record_id) FROM vectors), (SELECT max(record_id) FROM vectors))"
                )
            }
        )

    async def put_vectors(
        self,
        model: str,
        vectors: Sequence[tuple[int, bytes]],
        events: Sequence[EventEnvelope],
        *,
        parts: Sequence[bytes | None] | None = None,
    ) -> None:
        """Store vectors (and part vectors, aligned with them) by record id, skipping records
        deleted since they were read, and append ``events`` in the same transaction."""
        rows = [
            (model, blob, part, record_id)
            for (record_id, blob), part in zip(
                vectors, parts if parts is not None else [None] * len(vectors), strict=True
            )
        ]
        batch = list(events)

        def store(conn: sqlite3.Connection) -> None:
            conn.executemany(UPSERT_VECTOR_IF_PRESENT, rows)
            insert_events(conn, batch)

        await self._worker.write(store)

    async def neighbours(
        self,
        namespace: str,
        scope: Scope,
        anchors: Sequence[tuple[str, datetime]],
        count: int,
        alive_at: datetime,
    ) -> list[list[Record]]:
        """For each (thread, created_at) anchor, up to ``count`` records written just before
        and just after it in the same thread, nearest first."""
        base = (namespace, *scope.columns())
        alive = time_text(alive_at)

        def fetch(conn: sqlite3.Connection) -> list[list[Record]]:
            found = []
            for thread, created in anchors:
                around = []
                for op, order in (("<", "DESC"), (">", "ASC")):
                    around += [
                        row_record(r)
                        for r in conn.execute(
                            f"{RECORD_SELECT} WHERE {_PARTITION} AND thread = ? "
                            f"AND created_at {op} ? AND (expires_at IS NULL OR expires_at > ?) "
                            "AND hidden_at IS NULL "
                            f"ORDER BY created_at {order} LIMIT ?",
                            (*base, thread, time_text(created), alive, count),
                        )
                    ]
                found.append(around)
            return found

        return await self._worker.run(fetch)

    async def data_version(self) -> int:
        """SQLite's ``data_version``: it changes when another connection commits."""

        def fetch(conn: sqlite3.Connection) -> int:
            return int(conn.execute("PRAGMA data_version").fetchone()[0])

        return await self._worker.run(fetch)
