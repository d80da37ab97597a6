"""``SqliteBackend``: the embedded default — projections and the event log in one SQLite file
(WAL), written together in one transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from datetime import UTC, datetime
from pathlib import Path

from engramdb.core.errors import MigrationError
from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.backend import BackendStats, CommitResult, EventQuery, Fold
from engramdb.storage.migrations import pending
from engramdb.storage.rebuild import staged_rebuild
from engramdb.storage.records import (
    Amend,
    Delete,
    Expect,
    Hide,
    Op,
    Put,
    Record,
    RecordQuery,
    Redact,
    RedactScope,
    check_expected,
    key_taken,
)
from engramdb.storage.rows import optional_time_text, record_row, row_record
from engramdb.storage.sqlite.event_store import SqliteEventStore, insert_events
from engramdb.storage.sqlite.queries import (
    CREATE_RECORD,
    RECORD_SELECT,
    UPSERT_RECORD,
    UPSERT_VECTOR,
    record_select,
    record_where,
    redact_events,
    redact_scope_events,
    scope_clauses,
)
from engramdb.storage.sqlite.rebuild import SqliteRebuild
from engramdb.storage.sqlite.schema import MIGRATIONS
from engramdb.storage.sqlite.search import SqliteSearch, vector_writes
from engramdb.storage.sqlite.worker import BUSY_TIMEOUT_S, SqliteWorker, Synchronous

_PARTITION = (
    "namespace = ? AND tenant = ? AND user_id = ? AND agent = ? AND session = ? AND plan = ?"
)


def _migrate(conn: sqlite3.Connection) -> list[str]:
    conn.execute(
        "CREATE TABLE IF NOT EXISTS engram_migrations ("
        "name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
    )
    applied = [row[0] for row in conn.execute("SELECT name FROM engram_migrations ORDER BY rowid")]
    ran = []
    for migration in pending(MIGRATIONS, applied):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in migration.statements:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO engram_migrations (name, applied_at) VALUES (?, ?)",
                (migration.name, datetime.now(tz=UTC).isoformat()),
            )
        except sqlite3.Error as exc:
            conn.execute("ROLLBACK")
            raise MigrationError(f"migration {migration.name} failed: {exc}") from exc
        conn.execute("COMMIT")
        ran.append(migration.name)
    return ran


def _apply(
    conn: sqlite3.Connection, ops: Sequence[Op], events: Sequence[EventEnvelope]
) -> CommitResult:
    stored: list[Record] = []
    deleted = hidden = redacted = 0
    purged = False
    for op in ops:
        if isinstance(op, Put):
            sql = CREATE_RECORD if op.if_absent else UPSERT_RECORD
            row = conn.execute(sql, record_row(op.record)).fetchone()
            if row is None:
                raise key_taken(op.record)
            record = row_record(row)
            if op.vector is not None:
                conn.execute(UPSERT_VECTOR, (record.id, op.model, op.vector, op.parts))
            else:
                conn.execute("DELETE FROM vectors WHERE record_id = ?", (record.id,))
            stored.append(record)
        elif isinstance(op, Delete):
            params = (op.namespace, *op.scope.columns(), op.key)
            deleted += conn.execute(
                f"DELETE FROM records WHERE {_PARTITION} AND key = ?", params
            ).rowcount
        elif isinstance(op, Expect):
            row = conn.execute(
                f"SELECT version FROM records WHERE {_PARTITION} AND key = ?",
                (op.namespace, *op.scope.columns(), op.key),
            ).fetchone()
            check_expected(op, None if row is None else int(row[0]))
        elif isinstance(op, Hide):
            hidden += conn.execute(
                "UPDATE records SET hidden_at = ?, version = version + 1 "
                f"WHERE {_PARTITION} AND key = ?",
                (optional_time_text(op.at), op.namespace, *op.scope.columns(), op.key),
            ).rowcount
        elif isinstance(op, Redact):
            scope_sql, scope_params = scope_clauses(ScopeFilter(op.scope, op.levels))
            sql, redact_params = redact_events(op.namespace, scope_sql, op.key)
            redacted += conn.execute(sql, [*redact_params, *scope_params]).rowcount
            purged = True
        elif isinstance(op, RedactScope):
            scope_sql, scope_params = scope_clauses(ScopeFilter(op.scope, op.levels))
            sql = redact_scope_events(scope_sql, len(op.keep))
            redacted += conn.execute(sql, [*scope_params, *op.keep]).rowcount
            purged = True
    if purged:
        # FTS5 only marks a deleted document's tokens as deleted until segments merge;
        # merging now leaves no trace of the forgotten words in the index (once per commit:
        # a merge reads the whole index).
        conn.execute("INSERT INTO records_fts (records_fts) VALUES ('optimize')")
    return CommitResult(
        events=insert_events(conn, events),
        stored=stored,
        deleted=deleted,
        hidden=hidden,
        redacted=redacted,
    )


def _fetch(conn: sqlite3.Connection, namespace: str, scope: Scope, key: str) -> Record | None:
    params = (namespace, *scope.columns(), key)
    row = conn.execute(f"{RECORD_SELECT} WHERE {_PARTITION} AND key = ?", params).fetchone()
    return None if row is None else row_record(row)


def _file_path(path: str | Path) -> str:
    return str(path) if str(path) == ":memory:" else str(Path(path).expanduser())


async def migrate(path: str | Path) -> list[str]:
    """Apply pending migrations to the database at ``path`` (created if missing); returns the
    names applied.

    Raises:
        MigrationError: a migration failed (nothing of it was applied) or the database was
            migrated by a newer Engram.
    """
    worker = SqliteWorker(_file_path(path))
    await worker.open()
    try:
        return await worker.run(_migrate)
    finally:
        await worker.close()


class SqliteBackend:
    """Projection storage and event log in one SQLite database file."""

    def __init__(
        self,
        path: str | Path,
        *,
        synchronous: Synchronous = "full",
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ) -> None:
        self.path = _file_path(path)
        self.url = f"sqlite:///{self.path}"
        self._worker = SqliteWorker(
            self.path, synchronous=synchronous, busy_timeout_s=busy_timeout_s
        )
        self._events = SqliteEventStore(self._worker)
        self._search = SqliteSearch(self._worker)

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        synchronous: Synchronous = "full",
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ) -> SqliteBackend:
        """Open (creating if needed) the database at ``path`` and apply pending migrations.
        A write waits up to ``busy_timeout_s`` for another connection's lock, then fails with
        ``StorageBusyError``."""
        backend = cls(path, synchronous=synchronous, busy_timeout_s=busy_timeout_s)
        await backend._worker.open()
        try:
            await backend._worker.run(_migrate)
        except BaseException:
            await backend.close()
            raise
        return backend

    @property
    def events(self) -> SqliteEventStore:
        """The event log."""
        return self._events

    @property
    def search(self) -> SqliteSearch:
        """Candidate retrieval for hybrid recall."""
        return self._search

    async def commit(self, ops: Sequence[Op], events: Sequence[EventEnvelope]) -> CommitResult:
        """Apply ``ops`` and append ``events`` atomically."""
        ops, events = list(ops), list(events)
        return await self._worker.write(lambda conn: _apply(conn, ops, events))

    def queue_vectors(
        self,
        model: str,
        vectors: Sequence[tuple[int, bytes]],
        events: Sequence[EventEnvelope],
        versions: Sequence[int],
        *,
        parts: Sequence[bytes | None] | None = None,
        deletes: Sequence[Delete] = (),
    ) -> asyncio.Future[None]:
        """``search.put_vectors`` of whole-text vectors (and ``parts``), with ``deletes``, in a
        write queued on the one connection before this returns. Not a durable one
        (``SqliteWorker.queue``): the records' durable pending-parts records have them computed
        again if a power cut loses them (and those deletes with them)."""
        store, settled = vector_writes(model, vectors, events, parts, versions), list(deletes)

        def write(conn: sqlite3.Connection) -> None:
            store(conn)
            _apply(conn, settled, ())

        return self._worker.queue(write, durable=False)

    async def amend(
        self, namespace: str, scope: Scope, key: str, decide: Amend, *, writer: Scope | None = None
    ) -> CommitResult:
        """Read the record ``key`` and commit what ``decide`` makes of it, in one writer
        transaction (SQLite has one writer at a time, so nothing comes between)."""

        def transaction(conn: sqlite3.Connection) -> CommitResult:
            ops, events = decide(_fetch(conn, namespace, scope, key))
            return _apply(conn, list(ops), list(events))

        return await self._worker.write(transaction)

    async def get(self, namespace: str, scope: Scope, key: str) -> Record | None:
        """The record ``key`` in partition ``scope``, expired or not."""
        return await self._worker.run(lambda conn: _fetch(conn, namespace, scope, key))

    async def scan(self, query: RecordQuery) -> list[Record]:
        """Records matching ``query`` ordered by key."""
        sql, params = record_select(query)
        return await self._worker.run(
            lambda conn: [row_record(r) for r in conn.execute(sql, params)]
        )

    async def keys(self, query: RecordQuery) -> list[str]:
        """Keys of the records matching ``query``, ordered like :meth:`scan`."""
        sql, params = record_select(query, columns="key")
        return await self._worker.run(lambda conn: [row[0] for row in conn.execute(sql, params)])

    async def count(self, query: RecordQuery) -> int:
        """How many records match ``query``."""
        where, params = record_where(query)

        def fetch(conn: sqlite3.Connection) -> int:
            return int(
                conn.execute(f"SELECT count(*) FROM records WHERE {where}", params).fetchone()[0]
            )

        return await self._worker.run(fetch)

    async def rebuild(
        self, namespace: str, scope: ScopeFilter | None, source: EventQuery, fold: Fold
    ) -> int:
        """Recompute ``namespace`` within ``scope`` from the events ``source`` selects, in
        stages that hold writers off only for short transactions (``staged_rebuild``)."""
        return await staged_rebuild(SqliteRebuild(self._worker, namespace, scope, source, fold))

    async def stats(self) -> BackendStats:
        """Record and event counts and the database size in bytes."""

        def fetch(conn: sqlite3.Connection) -> BackendStats:
            by_ns = dict(
                conn.execute(
                    "SELECT namespace, count(*) FROM records GROUP BY namespace ORDER BY namespace"
                ).fetchall()
            )
            (events,) = conn.execute("SELECT count(*) FROM events").fetchone()
            (pages,) = conn.execute("PRAGMA page_count").fetchone()
            (page_size,) = conn.execute("PRAGMA page_size").fetchone()
            return BackendStats(
                self.url, sum(by_ns.values()), int(events), by_ns, int(pages) * int(page_size)
            )

        return await self._worker.run(fetch)

    def bulk_load(self, index_memory_mb: int) -> AbstractAsyncContextManager[None]:
        """Nothing to defer: the vector graphs live in the engine, not in the file."""
        return nullcontext()

    async def close(self) -> None:
        """Close the database; idempotent."""
        await self._worker.close()
