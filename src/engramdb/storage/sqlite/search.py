"""Search primitives of the SQLite backend: BM25 over FTS5's matches, stored vectors, and a
conversation's neighbouring turns. Ranking itself happens above, in pure functions."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope
from engramdb.storage.records import Record, RecordQuery, as_filter
from engramdb.storage.rows import RECORD_SELECTED, row_record, time_text
from engramdb.storage.search_backend import SCORED_PER_WORD
from engramdb.storage.sqlite.event_store import insert_events
from engramdb.storage.sqlite.partition import partition_token
from engramdb.storage.sqlite.queries import (
    RECORD_SELECT,
    UPSERT_VECTOR_IF_PRESENT,
    part_vector_select,
    query_partition_token,
    record_select,
    text_candidates,
    text_match,
    unvectored_select,
    vector_select,
    vector_set_select,
)
from engramdb.storage.sqlite.text_scores import (
    PhraseScorer,
    TextStatistics,
    any_phrase,
    in_partitions,
    index_length,
    match_phrases,
    partition_prefix,
    single_words,
)
from engramdb.storage.sqlite.worker import SqliteWorker

_PARTITION = (
    "namespace = ? AND tenant = ? AND user_id = ? AND agent = ? AND session = ? AND plan = ?"
)
#: The columns of a whole record, for ``SqliteSearch.text``.
_WHOLE_RECORD = ", ".join(RECORD_SELECTED)


class SqliteSearch:
    """Candidate retrieval for hybrid recall, on the backend's worker thread.

    Full-text hits are every match of the FTS5 index within the partition searched (its
    token narrows the match: see ``partition.py``), scored by BM25 from the partition's own
    statistics (``text_scores.py``): no other tenant's records move a score or the order. In
    one partition, a word more than ``scored_per_word`` records hold is scored in its newest
    ones only, as on PostgreSQL: the Python scoring then costs the same however large the
    partition grows, and below the bound hits and scores are those of every match.
    """

    def __init__(self, worker: SqliteWorker) -> None:
        self._worker = worker
        #: How many of a word's newest records a one-partition full-text query scores at most.
        self.scored_per_word = SCORED_PER_WORD

    def vector_graph_folder(self) -> Path | None:
        """``<database>.vectors``, beside the database file (none for ``:memory:``)."""
        path = self._worker.path
        return None if path == ":memory:" else Path(f"{path}.vectors")

    async def text(self, query: RecordQuery, match: str, limit: int) -> list[tuple[Record, float]]:
        """Records ``query`` selects that match the FTS5 expression ``match``, best first,
        with their BM25 scores (higher is better)."""
        best = await self._scored(query, match, limit)
        if not best:
            return []
        ids = [hit_id for hit_id, _ in best]

        def fetch(conn: sqlite3.Connection) -> dict[int, Record]:
            # Whole records are read for the hits that make the cut only.
            sql = (
                f"SELECT id, {_WHOLE_RECORD} FROM records WHERE id IN ({', '.join('?' * len(ids))})"
            )
            return {int(row[0]): row_record(row[1:]) for row in conn.execute(sql, ids)}

        found = await self._worker.run(fetch)
        # A hit deleted since it was scored is no longer found.
        return [(found[hit_id], score) for hit_id, score in best if hit_id in found]

    async def text_ids(self, query: RecordQuery, match: str, limit: int) -> list[tuple[int, float]]:
        """``text`` without reading the records: their ids, best first, with their scores."""
        return await self._scored(query, match, limit)

    async def _scored(self, query: RecordQuery, match: str, limit: int) -> list[tuple[int, float]]:
        """Ids of the records ``query`` selects that match ``match``, best first, with their
        scores.

        The worker thread reads the candidates and the statistics; they are scored on another
        thread, so that the one thread every read and write of the store queues for (and its
        commits) never waits for the Python scoring, nor for the interpreter it runs in."""
        phrases = match_phrases(match)
        if limit <= 0 or not phrases:
            return []
        token = query_partition_token(query)
        words = single_words(phrases)

        def fetch(conn: sqlite3.Connection) -> tuple[list[Any], TextStatistics | None]:
            # The statistics first: they say which words are common enough to be bounded.
            stats = self._statistics(conn, query, token, phrases)
            rows = self._candidates(conn, query, match, token, stats, words)
            return rows, stats if rows else None

        rows, stats = await self._worker.run(fetch)
        if stats is None:
            return []
        return await asyncio.to_thread(_best, rows, PhraseScorer(phrases, stats), limit)

    def _candidates(
        self,
        conn: sqlite3.Connection,
        query: RecordQuery,
        match: str,
        token: str | None,
        stats: TextStatistics,
        words: Sequence[str] | None,
    ) -> list[tuple[Any, ...]]:
        """Id, key, ``docsize`` row and text of the records to score (with ``words``, their
        stored counts of each instead of the text: see ``text_candidates``): every match, but
        in one partition asked for any of some phrases, a phrase more than ``scored_per_word``
        of its records hold is scored in its newest ones only (walked backwards by the
        index)."""
        phrases = any_phrase(match) if token is not None else None
        bound = self.scored_per_word
        common = [
            phrase
            for phrase in phrases or ()
            if stats.frequencies.get(match_phrases(phrase)[0], 0) > bound
        ]
        asked: list[tuple[str, int | None]] = [(match, None)]
        if phrases is not None and common:
            # The rarer phrases' matches all at once (all are scored), then each common one's.
            rare = " OR ".join(phrase for phrase in phrases if phrase not in common)
            asked = [(rare, None)] if rare else []
            asked += [(phrase, bound) for phrase in common]
        expressions = [(text_match(expression, token), newest) for expression, newest in asked]
        sql, params = text_candidates(query, expressions, "id, key", words)
        return conn.execute(sql, params).fetchall()

    def _statistics(
        self,
        conn: sqlite3.Connection,
        query: RecordQuery,
        token: str | None,
        phrases: Sequence[tuple[str, ...]],
    ) -> TextStatistics:
        """The document count, term count and phrases' document frequencies of the partitions
        ``query`` searches (one row each per partition: nothing is counted but a phrase of
        several terms, rare in a query of words)."""
        if token is not None:
            parts = [token]
        else:
            scope = None if query.scope is None else as_filter(query.scope)
            prefix = partition_prefix(query.namespace, scope)
            parts = [
                part
                for (part,) in conn.execute(
                    "SELECT part FROM text_stats WHERE part >= ? AND part < ?",
                    (prefix, prefix + "g"),
                )
                if in_partitions(part, query.namespace, scope)
            ]
        marks = ", ".join("?" * len(parts))
        docs, tokens = conn.execute(
            f"SELECT total(docs), total(tokens) FROM text_stats WHERE part IN ({marks})", parts
        ).fetchone()
        # Every single word's count in one statement: each statement run on the worker thread
        # waits its turn for the interpreter again, behind the requests the event loop serves.
        words = {phrase[0]: 0 for phrase in phrases if len(phrase) == 1}
        words.update(_term_counts(conn, parts, list(words)))
        frequencies = {
            phrase: words[phrase[0]]
            if len(phrase) == 1
            else sum(self._phrase_count(conn, part, phrase) for part in parts)
            for phrase in dict.fromkeys(phrases)
        }
        return TextStatistics(int(docs), int(tokens), frequencies)

    @staticmethod
    def _phrase_count(conn: sqlite3.Connection, part: str, phrase: tuple[str, ...]) -> int:
        """How many of the partition ``part``'s records hold ``phrase`` (counted by the index,
        within the partition's token)."""
        quoted = '"' + " ".join(phrase).replace('"', '""') + '"'
        (count,) = conn.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?",
            (text_match(quoted, part),),
        ).fetchone()
        return int(count)

    async def document_frequencies(
        self, namespace: str, scope: Scope, terms: Sequence[str]
    ) -> dict[str, int]:
        """How many of the partition's records hold each term (read from ``text_terms``, its
        own records only: another partition's are never counted)."""
        token = partition_token(namespace, scope.columns())

        def fetch(conn: sqlite3.Connection) -> dict[str, int]:
            # A quoted term is one phrase of the index's terms (none for a term without words).
            phrases = {term: match_phrases('"' + term.replace('"', '""') + '"') for term in terms}
            words = [found[0][0] for found in phrases.values() if found and len(found[0]) == 1]
            counts = _term_counts(conn, [token], words)
            frequencies = {}
            for term, found in phrases.items():
                if not found:
                    frequencies[term] = 0
                elif len(found[0]) == 1:
                    frequencies[term] = counts.get(found[0][0], 0)
                else:
                    frequencies[term] = self._phrase_count(conn, token, found[0])
            return frequencies

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
        versions: Sequence[int] | None = None,
    ) -> None:
        """Store vectors (and part vectors, aligned with them) by record id, skipping records
        deleted since they were read — and, with ``versions`` (aligned too), records written
        again since — and append ``events`` in the same transaction."""
        await self._worker.write(vector_writes(model, vectors, events, parts, versions))

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


def _term_counts(
    conn: sqlite3.Connection, parts: Sequence[str], terms: Sequence[str]
) -> dict[str, int]:
    """How many records of the partitions ``parts`` hold each of ``terms`` (absent: none),
    read from ``text_terms`` in one statement."""
    if not parts or not terms:
        return {}
    rows = conn.execute(
        f"SELECT term, total(docs) FROM text_terms WHERE part IN ({', '.join('?' * len(parts))}) "
        f"AND term IN ({', '.join('?' * len(terms))}) GROUP BY term",
        [*parts, *terms],
    )
    return {str(term): int(docs) for term, docs in rows}


def _best(rows: Sequence[Any], scorer: PhraseScorer, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` best of the candidate ``rows`` (id, key, FTS5 docsize, then the text, or
    ``None`` and the stored count of each of ``scorer.words``) by ``scorer``, ties broken by
    key."""
    words = scorer.words or []
    scored = []
    for hit_id, key, sizes, text, *counts in rows:
        length = index_length(sizes)
        if text is None:
            held = {word: n for word, n in zip(words, counts, strict=True) if n}
            score = scorer.score_counts(held, length)
        else:
            score = scorer.score(text, length)
        scored.append((int(hit_id), key, score))
    scored.sort(key=lambda hit: (-hit[2], hit[1]))
    return [(hit_id, score) for hit_id, _, score in scored[:limit]]


def vector_writes(
    model: str,
    vectors: Sequence[tuple[int, bytes]],
    events: Sequence[EventEnvelope],
    parts: Sequence[bytes | None] | None = None,
    versions: Sequence[int] | None = None,
) -> Callable[[sqlite3.Connection], None]:
    """The write storing ``vectors`` (and ``parts``, aligned with them) by record id, records
    deleted since they were read skipped — and, with ``versions`` (aligned too), records
    written again since — with ``events`` (``put_vectors``)."""
    none = [None] * len(vectors)
    rows = [
        (model, blob, part, record_id, version, version)
        for (record_id, blob), part, version in zip(
            vectors,
            parts if parts is not None else none,
            versions if versions is not None else none,
            strict=True,
        )
    ]
    batch = list(events)

    def store(conn: sqlite3.Connection) -> None:
        conn.executemany(UPSERT_VECTOR_IF_PRESENT, rows)
        insert_events(conn, batch)

    return store
