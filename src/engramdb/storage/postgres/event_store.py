"""``PostgresEventStore``: the event log in the same database (and transactions) as the
memory tables.

Positions come from an identity column, which hands out numbers when rows are inserted, not
when they commit. So that a reader paging by position never skips an event committed late,
appends take one transaction-scoped lock just before inserting: events become visible in
position order. Writers hold it only for the tail of their transaction.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence

from engramdb.core.events import EventEnvelope
from engramdb.storage.backend import EventQuery, paged_events
from engramdb.storage.postgres.connection import Connection, Cursor, PostgresPool
from engramdb.storage.postgres.queries import (
    EVENT_SELECT,
    UPSERT_TENANT,
    UPSERT_USER,
    event_where,
    insert_events_sql,
)
from engramdb.storage.postgres.tenancy import ADMIN, context_for, tenant_uuid, user_uuid
from engramdb.storage.rows import event_read_sql, event_row, row_event

#: Advisory lock keys: every write holds ``WRITERS`` shared (a rebuild holds it exclusively);
#: ``EVENT_ORDER`` orders appends to the log.
WRITERS_LOCK = 0x656E6772616D01
EVENT_ORDER_LOCK = 0x656E6772616D02
#: Rows one INSERT writes: a batch takes a few statements instead of one per row, each far
#: below the 65,535 parameters a statement may bind.
ROWS_PER_STATEMENT = 500


async def hold_writers(conn: Connection, *, exclusive: bool = False, durable: bool = True) -> None:
    """Take the writers' lock for this transaction (exclusive: wait for every writer and keep
    new ones out until the transaction ends). ``durable=False``: its commit does not wait for
    the log to reach the disk (``synchronous_commit`` off for it alone), for a write whose loss
    in a crash of the server the store makes good itself; the log is flushed in order, so the
    next durable commit takes it along."""
    function = "pg_advisory_xact_lock" if exclusive else "pg_advisory_xact_lock_shared"
    relaxed = "" if durable else ", set_config('synchronous_commit', 'off', true)"
    await conn.execute(f"SELECT {function}(%s){relaxed}", (WRITERS_LOCK,))


async def ensure_replicas(conn: Connection, scopes: Iterable[tuple[str, str]]) -> None:
    """Upsert the tenant and user replicas of (tenant, user) pairs (an empty user: none)."""
    pairs = sorted(set(scopes))
    tenants = sorted({tenant for tenant, _ in pairs})
    async with conn.cursor() as cur:
        await cur.executemany(UPSERT_TENANT, [(tenant_uuid(t), t) for t in tenants])
        users = [(user_uuid(t, u), tenant_uuid(t), u) for t, u in pairs if u]
        if users:
            await cur.executemany(UPSERT_USER, users)


async def insert_events(conn: Connection, events: Sequence[EventEnvelope]) -> list[EventEnvelope]:
    """Append ``events`` on ``conn`` inside the caller's transaction."""
    if not events:
        return []
    await ensure_replicas(conn, ((e.scope.tenant, "") for e in events))
    return await positioned(events, await send_events(conn, events))


async def send_events(conn: Connection, events: Sequence[EventEnvelope]) -> list[Cursor]:
    """Take the order lock and insert ``events`` (their tenants' replicas must exist); the
    inserts' cursors, for ``positioned``. In pipeline mode the statements are only queued."""
    if not events:
        return []
    await conn.execute("SELECT pg_advisory_xact_lock(%s)", (EVENT_ORDER_LOCK,))
    cursors = []
    for start in range(0, len(events), ROWS_PER_STATEMENT):
        chunk = events[start : start + ROWS_PER_STATEMENT]
        params = [v for e in chunk for v in (tenant_uuid(e.scope.tenant), *event_row(e))]
        cursors.append(await conn.execute(insert_events_sql(len(chunk)), params))
    return cursors


async def positioned(
    events: Sequence[EventEnvelope], cursors: Sequence[Cursor]
) -> list[EventEnvelope]:
    """``events`` with the positions ``send_events``'s inserts gave them."""
    positions: dict[str, int] = {}
    for cursor in cursors:
        positions.update(
            (str(event_id), int(position)) for event_id, position in await cursor.fetchall()
        )
    return [e.model_copy(update={"position": positions[e.event_id]}) for e in events]


class PostgresEventStore:
    """The append-only log, isolated per tenant by row-level security."""

    def __init__(self, pool: PostgresPool) -> None:
        self._pool = pool

    async def append(self, events: Sequence[EventEnvelope]) -> list[EventEnvelope]:
        """Append ``events`` in one transaction."""
        batch = list(events)
        async with self._pool.transaction(context_for(e.scope for e in batch)) as conn:
            await hold_writers(conn)
            return await insert_events(conn, batch)

    async def read(self, query: EventQuery | None = None) -> list[EventEnvelope]:
        """Events matching ``query``, oldest first (every tenant's when it has no scope)."""
        q = query or EventQuery()
        sql, params = event_read_sql(EVENT_SELECT, *event_where(q), q, "%s")
        async with self._pool.transaction(context_for([q.scope])) as conn:
            cursor = await conn.execute(sql, params)
            return [row_event(row[0], row[1:]) for row in await cursor.fetchall()]

    async def stream(
        self, query: EventQuery | None = None, *, batch_size: int = 1000
    ) -> AsyncIterator[EventEnvelope]:
        """Matching events in log order, read in batches so memory stays bounded."""
        async for event in paged_events(self.read, query, batch_size):
            yield event

    async def last_position(self) -> int:
        """Position of the newest event of any tenant (0 when empty)."""
        async with self._pool.transaction(ADMIN) as conn:
            cursor = await conn.execute("SELECT coalesce(max(position), 0) FROM events")
            row = await cursor.fetchone()
            return int(row[0]) if row else 0

    async def count(self, query: EventQuery | None = None) -> int:
        """How many events match ``query``."""
        q = query or EventQuery()
        where, params = event_where(q)
        async with self._pool.transaction(context_for([q.scope])) as conn:
            cursor = await conn.execute(f"SELECT count(*) FROM events WHERE {where}", params)
            row = await cursor.fetchone()
            return int(row[0]) if row else 0
