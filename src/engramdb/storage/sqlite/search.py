"""Search primitives of the SQLite backend: BM25 through FTS5, stored vectors, and a
conversation's neighbouring turns. Ranking itself happens above, in pure functions."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.rows import row_record, time_text
from engramdb.storage.sqlite.event_store import insert_events
from engramdb.storage.sqlite.queries import (
    RECORD_SELECT,
    UPSERT_VECTOR_IF_PRESENT,
    record_select,
    text_search,
    unvectored_select,
    vector_select,
)
from engramdb.storage.sqlite.worker import SqliteWorker

_PARTITION = (
    "namespace = ? AND tenant = ? AND user_id = ? AND agent = ? AND session = ? AND plan = ?"
)
SavedVectors = list[tuple[Any, ...]]
#: How many of the index's best full-text matches are read per wanted hit before filtering.
PREFETCH_FACTOR = 4


def save_vectors(conn: sqlite3.Connection, where: str, params: list[Any]) -> SavedVectors:
    """The vectors of the records ``where`` selects, keyed by partition, key and text (a
    vector is a function of its text, so it stays valid for a rebuilt record with that text)."""
    return conn.execute(
        "SELECT tenant, user_id, agent, session, plan, key, text, vectors.model, vectors.vector "
        f"FROM records JOIN vectors ON vectors.record_id = records.id WHERE {where}",
        params,
    ).fetchall()


def restore_vectors(conn: sqlite3.Connection, namespace: str, saved: SavedVectors) -> None:
    """Attach ``saved`` vectors to the rebuilt records whose text is unchanged."""
    conn.executemany(
        "INSERT INTO vectors (record_id, model, vector) SELECT id, ?, ? FROM records "
        f"WHERE {_PARTITION} AND key = ? AND text = ?",
        [(model, vector, namespace, *cols, key, text) for *cols, key, text, model, vector in saved],
    )


class SqliteSearch:
    """Candidate retrieval for hybrid recall, on the backend's worker thread."""

    def __init__(self, worker: SqliteWorker) -> None:
        self._worker = worker

    async def text(self, query: RecordQuery, match: str, limit: int) -> list[tuple[Record, float]]:
        """Records ``query`` selects that match the FTS5 expression ``match``, best first,
        with their BM25 scores (higher is better)."""
        prefetch = limit * PREFETCH_FACTOR

        def fetch(conn: sqlite3.Connection) -> list[tuple[Record, float]]:
            sql, params = text_search(query, match, limit, prefetch)
            rows = conn.execute(sql, params).fetchall()
            if len(rows) < limit:
                # Other partitions (or filters) took the best matches: join them all.
                sql, params = text_search(query, match, limit)
                rows = conn.execute(sql, params).fetchall()
            return [(row_record(row[:-1]), float(row[-1])) for row in rows]

        return await self._worker.run(fetch)

    async def document_frequencies(self, terms: Sequence[str]) -> tuple[dict[str, int], int]:
        """How many indexed documents hold each term, and how many documents there are."""

        def fetch(conn: sqlite3.Connection) -> tuple[dict[str, int], int]:
            counts = {
                term: int(
                    conn.execute(
                        "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?",
                        ('text : "' + term.replace('"', '""') + '"',),
                    ).fetchone()[0]
                )
                for term in terms
            }
            (total,) = conn.execute("SELECT count(*) FROM records").fetchone()
            return counts, int(total)

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

    async def unvectored(self, query: RecordQuery, model: str) -> list[Record]:
        """Records ``query`` selects that have no vector of ``model``."""
        sql, params = unvectored_select(query, model)
        return await self._worker.run(
            lambda conn: [row_record(r) for r in conn.execute(sql, params)]
        )

    async def drop_vectors(self, namespace: str) -> None:
        """Delete every stored vector of ``namespace``'s records."""
        await self._worker.write(
            lambda conn: conn.execute(
                "DELETE FROM vectors WHERE record_id IN "
                "(SELECT id FROM records WHERE namespace = ?)",
                (namespace,),
            )
        )

    async def put_vectors(
        self, model: str, vectors: Sequence[tuple[int, bytes]], events: Sequence[EventEnvelope]
    ) -> None:
        """Store vectors by record id, skipping records deleted since they were read, and
        append ``events`` in the same transaction."""
        rows = [(model, blob, record_id) for record_id, blob in vectors]
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
