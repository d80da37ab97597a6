"""``SqliteEventStore``: the event log in the same SQLite file as the projections."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Sequence

from engramdb.core.events import EventEnvelope
from engramdb.storage.backend import EventQuery, paged_events
from engramdb.storage.rows import event_read_sql, event_row, row_event
from engramdb.storage.sqlite.queries import EVENT_SELECT, INSERT_EVENT, event_where
from engramdb.storage.sqlite.worker import SqliteWorker


def insert_events(conn: sqlite3.Connection, events: Sequence[EventEnvelope]) -> list[EventEnvelope]:
    """Append ``events`` on ``conn`` inside the caller's transaction."""
    positioned = []
    for event in events:
        (position,) = conn.execute(INSERT_EVENT, event_row(event)).fetchone()
        positioned.append(event.model_copy(update={"position": position}))
    return positioned


class SqliteEventStore:
    """The append-only log; positions are SQLite's AUTOINCREMENT ids, never reused."""

    def __init__(self, worker: SqliteWorker) -> None:
        self._worker = worker

    async def append(self, events: Sequence[EventEnvelope]) -> list[EventEnvelope]:
        """Append ``events`` in one transaction."""
        batch = list(events)
        return await self._worker.write(lambda conn: insert_events(conn, batch))

    async def read(self, query: EventQuery | None = None) -> list[EventEnvelope]:
        """Events matching ``query``, oldest first."""
        q = query or EventQuery()
        sql, params = event_read_sql(EVENT_SELECT, *event_where(q), q, "?")

        def fetch(conn: sqlite3.Connection) -> list[EventEnvelope]:
            return [row_event(row[0], row[1:]) for row in conn.execute(sql, params)]

        return await self._worker.run(fetch)

    async def stream(
        self, query: EventQuery | None = None, *, batch_size: int = 1000
    ) -> AsyncIterator[EventEnvelope]:
        """Matching events in log order, read in batches so memory stays bounded."""
        async for event in paged_events(self.read, query, batch_size):
            yield event

    async def last_position(self) -> int:
        """Position of the newest event (0 when empty)."""

        def fetch(conn: sqlite3.Connection) -> int:
            (position,) = conn.execute("SELECT coalesce(max(position), 0) FROM events").fetchone()
            return int(position)

        return await self._worker.run(fetch)

    async def count(self, query: EventQuery | None = None) -> int:
        """How many events match ``query``."""
        where, params = event_where(query or EventQuery())

        def fetch(conn: sqlite3.Connection) -> int:
            (n,) = conn.execute(f"SELECT count(*) FROM events WHERE {where}", params).fetchone()
            return int(n)

        return await self._worker.run(fetch)
