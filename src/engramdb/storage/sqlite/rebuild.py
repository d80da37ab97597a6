"""``SqliteRebuild``: the SQLite steps of a staged rebuild (see ``storage/rebuild.py``).

The snapshot is read on a connection of its own, in one read transaction (WAL readers never
block writers, in this process or another); each applying transaction is a short
``BEGIN IMMEDIATE`` on the backend's writer. A changed record is updated in place (its row
id, and its vector while its text is unchanged, stay); a record that goes is deleted with its
vector.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from engramdb.core.scope import ScopeFilter
from engramdb.storage.backend import EventQuery, Fold
from engramdb.storage.rebuild import (
    SLOT_COLUMNS,
    Change,
    Progress,
    Slot,
    Snapshot,
    settle_plan,
    slot_of,
    slot_of_row,
    still_planned,
)
from engramdb.storage.rows import RECORD_COLUMNS, record_row, row_event
from engramdb.storage.sqlite.queries import EVENT_SELECT, event_where, scope_clauses
from engramdb.storage.sqlite.text_scores import in_partitions, partition_prefix
from engramdb.storage.sqlite.worker import SqliteWorker

T = TypeVar("T")
_KEYED = ", ".join(SLOT_COLUMNS)
#: Store a record as it is, every column (a rebuilt record is exactly what the log says).
REPLACE_RECORD = (
    f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(RECORD_COLUMNS))}) "
    f"ON CONFLICT (namespace, {_KEYED}) DO UPDATE SET "
    + ", ".join(f"{c} = excluded.{c}" for c in RECORD_COLUMNS[7:])
)
_IN_SLOT = " AND ".join(f"{c} = ?" for c in ("namespace", *SLOT_COLUMNS))
#: How many keys one ``IN (…)`` list names.
_KEYS_PER_QUERY = 500


class SqliteRebuild:
    """One rebuild of ``namespace`` within ``scope`` from the events ``source`` selects."""

    def __init__(
        self,
        worker: SqliteWorker,
        namespace: str,
        scope: ScopeFilter | None,
        source: EventQuery,
        fold: Fold,
    ) -> None:
        self._worker = worker
        self._namespace = namespace
        self._source = source
        self._fold = fold
        scope_sql, scope_params = scope_clauses(scope)
        self._where = " AND ".join(["namespace = ?", *scope_sql])
        self._params: list[Any] = [namespace, *scope_params]

    async def snapshot(self) -> Snapshot:
        """Fold the log and read the records in one read transaction of a connection of its
        own (the backend's worker stays free for this process's other work)."""
        if self._worker.path == ":memory:":
            return await self._worker.run(self._read_snapshot)
        reader = SqliteWorker(self._worker.path, busy_timeout_s=self._worker.busy_timeout_s)
        await reader.open()
        try:
            return await reader.run(self._read_snapshot)
        finally:
            await reader.close()

    def _read_snapshot(self, conn: sqlite3.Connection) -> Snapshot:
        conn.execute("BEGIN")
        try:
            (position,) = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
            sql, params = event_where(self._source)
            cursor = conn.execute(
                f"{EVENT_SELECT} WHERE {sql} AND position <= ? ORDER BY position",
                [*params, position],
            )
            target = {slot_of(r): r for r in self._fold(_events(cursor))}
            current = {
                slot_of_row(row): row
                for row in conn.execute(
                    f"SELECT {', '.join(RECORD_COLUMNS)} FROM records WHERE {self._where}",
                    self._params,
                )
            }
        finally:
            conn.execute("COMMIT")
        return Snapshot(int(position), target, current)

    async def apply(self, changes: Sequence[Change], progress: Progress, *, settle: bool) -> None:
        """See ``StagedRebuild.apply``."""

        def write(conn: sqlite3.Connection) -> None:
            self._mark_touched(conn, progress)
            if changes:
                stored = self._slot_rows(conn, [c.slot for c in changes])
                kept = still_planned(changes, {s: row for s, (_, row) in stored.items()}, progress)
                self._store(conn, kept, stored)
            if settle:
                self._settle(conn, progress)
                self._recount_text_stats(conn)

        await self._worker.write(write)

    def _mark_touched(self, conn: sqlite3.Connection, progress: Progress) -> None:
        sql, params = event_where(replace(self._source, after=progress.position))
        progress.saw(
            conn.execute(
                f"SELECT position, json_extract(payload, '$.key') FROM events WHERE {sql}", params
            )
        )

    def _settle(self, conn: sqlite3.Connection, progress: Progress) -> None:
        """Fold the events of every touched key and store what they leave."""
        keys = sorted(progress.touched)
        folded = []
        stored: dict[Slot, tuple[int, tuple[Any, ...]]] = {}
        sql, params = event_where(self._source)
        for chunk in _chunks(keys):
            marks = ", ".join("?" * len(chunk))
            cursor = conn.execute(
                f"{EVENT_SELECT} WHERE {sql} AND json_extract(payload, '$.key') IN ({marks}) "
                "ORDER BY position",
                [*params, *chunk],
            )
            # The fold is slot-local: keys can be folded a chunk at a time.
            folded += [r for r in self._fold(_events(cursor)) if r.key in progress.touched]
            for row in conn.execute(
                f"SELECT id, {', '.join(RECORD_COLUMNS)} FROM records "
                f"WHERE {self._where} AND key IN ({marks})",
                [*self._params, *chunk],
            ):
                stored[slot_of_row(row[1:])] = (row[0], tuple(row[1:]))
        changes = settle_plan(folded, [row for _, row in stored.values()], progress.touched)
        self._store(conn, changes, stored)
        progress.settled = len(folded)

    def _recount_text_stats(self, conn: sqlite3.Connection) -> None:
        """Count the rebuilt records afresh, by partition; the namespace's partitions left
        without records lose their statistics and words.

        Only the rebuilt namespace is counted: a rebuild settles each namespace in a
        transaction of its own, and counting every partition in each of them held another
        process's writers off for most of the rebuild. The words and term counts are not
        recounted: the triggers kept them as the rebuild wrote (tests compare them with a
        recount), and recounting would tokenize every rebuilt record while writers wait."""
        conn.execute(
            "INSERT INTO text_stats (part, docs) SELECT part, count(*) FROM records "
            f"WHERE {self._where} GROUP BY part "
            "ON CONFLICT (part) DO UPDATE SET docs = excluded.docs",
            self._params,
        )
        # Every token of the namespace starts with its prefix, and no hex digit sorts after g;
        # a namespace that extends this one with a separator shares the prefix, hence the check.
        low = partition_prefix(self._namespace, None)
        for table in ("text_stats", "text_terms"):
            emptied = conn.execute(
                f"SELECT DISTINCT part FROM {table} WHERE part >= ? AND part < ? "
                "AND part NOT IN (SELECT part FROM records WHERE namespace = ?)",
                (low, low + "g", self._namespace),
            )
            conn.executemany(
                f"DELETE FROM {table} WHERE part = ?",
                [(part,) for (part,) in emptied if in_partitions(part, self._namespace, None)],
            )

    def _slot_rows(
        self, conn: sqlite3.Connection, slots: Sequence[Slot]
    ) -> dict[Slot, tuple[int, tuple[Any, ...]]]:
        """The row id and stored row of each of ``slots`` that holds a record."""
        found = {}
        for slot in slots:
            row = conn.execute(
                f"SELECT id, {', '.join(RECORD_COLUMNS)} FROM records WHERE {_IN_SLOT}",
                (self._namespace, *slot),
            ).fetchone()
            if row is not None:
                found[slot] = (row[0], tuple(row[1:]))
        return found

    def _store(
        self,
        conn: sqlite3.Connection,
        changes: Sequence[Change],
        stored: dict[Slot, tuple[int, tuple[Any, ...]]],
    ) -> None:
        """Apply ``changes`` (``stored``: the row ids and rows their slots hold now)."""
        text = RECORD_COLUMNS.index("text")
        for change in changes:
            held = stored.get(change.slot)
            if change.record is None:
                conn.execute(
                    f"DELETE FROM records WHERE {_IN_SLOT}", (self._namespace, *change.slot)
                )
                continue
            row = record_row(change.record)
            if held is not None and held[1][text] != row[text]:
                # A vector is a function of the text it was computed from.
                conn.execute("DELETE FROM vectors WHERE record_id = ?", (held[0],))
            conn.execute(REPLACE_RECORD, row)


def _events(cursor: sqlite3.Cursor) -> Iterator[Any]:
    return (row_event(row[0], row[1:]) for row in cursor)


def _chunks(items: list[T]) -> Iterator[list[T]]:
    for start in range(0, len(items), _KEYS_PER_QUERY):
        yield items[start : start + _KEYS_PER_QUERY]
