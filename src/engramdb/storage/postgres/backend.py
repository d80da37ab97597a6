"""``PostgresBackend``: the scale-out backend — memory tables, vectors and the event log in one
PostgreSQL database (with pgvector), written together in one transaction, each tenant's rows
guarded by row-level security.

Every transaction runs as the ``engram_service`` role with the tenant (and user) of the scopes
it touches set transaction-locally, so a query that forgot a tenant condition still sees only
that tenant's rows. Work that spans tenants by design (unscoped admin scans, stats, rebuilding
every tenant, reindexing) runs as ``engram_admin``; a login that is only a member of
``engram_service`` cannot do it at all.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import psycopg
from psycopg import AsyncPipeline

from engramdb.core.errors import MigrationError
from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.backend import BackendStats, CommitResult, EventQuery, Fold
from engramdb.storage.migrations import pending
from engramdb.storage.postgres.connection import (
    Connection,
    Cursor,
    PostgresPool,
    Read,
    connect,
    redacted_url,
)
from engramdb.storage.postgres.event_store import (
    ROWS_PER_STATEMENT,
    PostgresEventStore,
    ensure_replicas,
    hold_writers,
    positioned,
    send_events,
)
from engramdb.storage.postgres.indexes import VectorIndexes
from engramdb.storage.postgres.queries import (
    PARTITION,
    create_record,
    record_select,
    record_select_list,
    record_where,
    redact_events,
    redact_scope_events,
    scope_clauses,
    upsert_record,
)
from engramdb.storage.postgres.rebuild import PostgresRebuild
from engramdb.storage.postgres.schema import MIGRATIONS, RECORD_TABLES, SERVICE_ROLE, table_for
from engramdb.storage.postgres.search import PostgresSearch
from engramdb.storage.postgres.tenancy import (
    ADMIN,
    NOBODY,
    Context,
    context_for,
    tenant_uuid,
    user_uuid,
)
from engramdb.storage.postgres.vectors import StoredVector, dimensions_of
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

#: Serialises migrations of concurrently starting processes.
_MIGRATION_LOCK = 0x656E6772616D00


def _scopes(ops: Sequence[Op]) -> list[Scope]:
    return [op.record.scope if isinstance(op, Put) else op.scope for op in ops]


def _written_row(
    record: Record, vector: bytes | None, model: str, parts: bytes | None = None
) -> tuple[Any, ...]:
    tenant, user = record.scope.tenant, record.scope.user or ""
    return (
        tenant_uuid(tenant),
        user_uuid(tenant, user),
        *record_row(record),
        None if vector is None else StoredVector(vector),
        None if vector is None else model,
        None if vector is None else parts,
    )


def _identity(record: Record) -> tuple[str, ...]:
    return (record.namespace, *record.scope.columns(), record.key)


def _runs(ops: Sequence[Op]) -> Iterator[list[Put] | Op]:
    """``ops`` in order, consecutive puts gathered into runs that one INSERT can write: one
    table, one kind of write, no key twice (a second write of a key must see the first)."""
    run: list[Put] = []
    keys: set[tuple[str, ...]] = set()
    for op in ops:
        if run and not (
            isinstance(op, Put)
            and op.record.namespace == run[0].record.namespace
            and op.if_absent == run[0].if_absent
            and _identity(op.record) not in keys
            and len(run) < ROWS_PER_STATEMENT
        ):
            yield run
            run, keys = [], set()
        if isinstance(op, Put):
            run.append(op)
            keys.add(_identity(op.record))
        else:
            yield op
    if run:
        yield run


def _put_statement(puts: list[Put]) -> tuple[str, list[Any]]:
    """The one statement writing ``puts`` (one run of :func:`_runs`), returning the records
    as stored."""
    first = puts[0]
    write = create_record if first.if_absent else upsert_record
    params = [v for op in puts for v in _written_row(op.record, op.vector, op.model, op.parts)]
    return write(first.record.namespace, len(puts)), params


async def _stored(puts: list[Put], cursor: Cursor) -> list[Record]:
    """The records ``puts`` stored, in their order (a create whose key a live record holds
    stored none: ``KeyTakenError``)."""
    stored = {_identity(record): record for record in map(row_record, await cursor.fetchall())}
    for op in puts:
        if _identity(op.record) not in stored:
            raise key_taken(op.record)
    return [stored[_identity(op.record)] for op in puts]


def _statement(op: Op) -> tuple[str, Sequence[Any]]:
    """The statement of one op that is not a put."""
    if isinstance(op, Delete):
        return (
            f"DELETE FROM {table_for(op.namespace)} WHERE {PARTITION} AND key = %s",
            (op.namespace, *op.scope.columns(), op.key),
        )
    if isinstance(op, Expect):
        return _locked_select(op.namespace), (op.namespace, *op.scope.columns(), op.key)
    if isinstance(op, Hide):
        return (
            f"UPDATE {table_for(op.namespace)} SET hidden_at = %s, version = version + 1 "
            f"WHERE {PARTITION} AND key = %s",
            (optional_time_text(op.at), op.namespace, *op.scope.columns(), op.key),
        )
    if isinstance(op, Redact):
        scope_sql, scope_params = scope_clauses(ScopeFilter(op.scope, op.levels))
        sql, params = redact_events(op.namespace, scope_sql, op.key)
        return sql, [*params, *scope_params]
    if isinstance(op, RedactScope):
        scope_sql, scope_params = scope_clauses(ScopeFilter(op.scope, op.levels))
        return redact_scope_events(scope_sql, len(op.keep)), [*scope_params, *op.keep]
    raise TypeError(f"not a storage op: {op!r}")


Queued = list[tuple[list[Put] | Op, Cursor]]


async def _send(
    conn: Connection, ops: Sequence[Op], events: Sequence[EventEnvelope]
) -> tuple[Queued, list[Cursor]]:
    """Queue every statement of ``ops`` and ``events`` on ``conn`` (in pipeline mode): each
    run or op with its cursor, and the events' cursors."""
    await hold_writers(conn)
    await ensure_replicas(
        conn,
        [
            *(
                (op.record.scope.tenant, op.record.scope.user or "")
                for op in ops
                if isinstance(op, Put)
            ),
            *((e.scope.tenant, "") for e in events),
        ],
    )
    sent = [
        (
            run,
            await conn.execute(
                *(_put_statement(run) if isinstance(run, list) else _statement(run))
            ),
        )
        for run in _runs(ops)
    ]
    return sent, await send_events(conn, events)


def _refusable(ops: Sequence[Op]) -> bool:
    """Whether a result of ``ops`` may fail the commit (a create whose key is taken, a version
    not the expected one): their results must be read before it commits."""
    return any(isinstance(op, Expect) or (isinstance(op, Put) and op.if_absent) for op in ops)


async def _results(
    sent: Queued, appended: Sequence[Cursor], events: Sequence[EventEnvelope]
) -> CommitResult:
    """What the statements ``_send`` queued did, once their results are back. An op's result
    that fails the commit (a taken key, an unexpected version) raises."""
    stored: list[Record] = []
    deleted = hidden = redacted = 0
    for run, cursor in sent:
        if isinstance(run, list):
            stored += await _stored(run, cursor)
        elif isinstance(run, Expect):
            row = await cursor.fetchone()
            check_expected(run, None if row is None else row_record(row).version)
        elif isinstance(run, Delete):
            deleted += cursor.rowcount
        elif isinstance(run, Hide):
            hidden += cursor.rowcount
        else:
            redacted += cursor.rowcount
    return CommitResult(
        events=await positioned(events, appended),
        stored=stored,
        deleted=deleted,
        hidden=hidden,
        redacted=redacted,
    )


async def _apply(
    conn: Connection,
    pipeline: AsyncPipeline,
    ops: Sequence[Op],
    events: Sequence[EventEnvelope],
) -> CommitResult:
    """Queue every statement of ``ops`` and ``events`` on ``conn`` (in pipeline mode), then
    read their results after one round trip, before the caller's transaction commits (so a
    result that fails the commit rolls back whatever was queued after it)."""
    sent, appended = await _send(conn, ops, events)
    await pipeline.sync()
    return await _results(sent, appended, events)


def _locked_select(namespace: str) -> str:
    """The record of a key, its row locked until the transaction ends (a concurrent writer of
    it waits, then sees what this transaction wrote); parameters: the partition, the key."""
    return (
        f"SELECT {record_select_list()} FROM {table_for(namespace)} r "
        f"WHERE {PARTITION} AND key = %s FOR UPDATE"
    )


async def _locked(conn: Connection, namespace: str, scope: Scope, key: str) -> Record | None:
    """The record ``key``, its row locked until the transaction ends."""
    cursor = await conn.execute(_locked_select(namespace), (namespace, *scope.columns(), key))
    row = await cursor.fetchone()
    return None if row is None else row_record(row)


async def _holds_no_privilege(conn: Connection) -> bool:
    cursor = await conn.execute(
        "SELECT NOT has_table_privilege('engram_migrations', 'SELECT') "
        "AND pg_has_role((SELECT oid FROM pg_roles WHERE rolname = %s), 'MEMBER')",
        (SERVICE_ROLE,),
    )
    return bool((await cursor.fetchone() or (False,))[0])


async def migrate(url: str, *, connect_timeout: float = 10.0) -> list[str]:
    """Apply pending migrations to the database at ``url``, as its connecting user (who must
    be allowed to create the extension, roles and tables); returns the names applied.

    Raises:
        StorageError: the server cannot be reached.
        MigrationError: a migration failed (nothing of it was applied) or the database was
            migrated by a newer Engram.
    """
    where = redacted_url(url)
    conn = await connect(url, connect_timeout)
    try:
        async with conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            # Checked first: a login that may not create tables can still open a migrated one.
            cursor = await conn.execute("SELECT to_regclass('engram_migrations')")
            if (await cursor.fetchone() or (None,))[0] is None:
                await conn.execute(
                    "CREATE TABLE engram_migrations ("
                    "name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())"
                )
            elif await _holds_no_privilege(conn):
                # A service login (see ``logins``) reads the version as the role it may become.
                await conn.execute(f"SET LOCAL ROLE {SERVICE_ROLE}")
            cursor = await conn.execute("SELECT name FROM engram_migrations ORDER BY name")
            applied = [row[0] for row in await cursor.fetchall()]
            ran = []
            for migration in pending(MIGRATIONS, applied):
                for statement in migration.statements:
                    await conn.execute(statement)
                await conn.execute(
                    "INSERT INTO engram_migrations (name) VALUES (%s)", (migration.name,)
                )
                ran.append(migration.name)
            return ran
    except psycopg.Error as exc:
        raise MigrationError(
            f"cannot migrate PostgreSQL database {where}: {exc}", url=where, sqlstate=exc.sqlstate
        ) from exc


class PostgresBackend:
    """Memory tables and event log in one PostgreSQL database, isolated per tenant."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self.url = redacted_url(url)
        self._pool = PostgresPool(url, min_size=min_size, max_size=max_size)
        self._indexes = VectorIndexes(self._pool)
        self._events = PostgresEventStore(self._pool)
        self._search = PostgresSearch(self._pool, self._indexes)

    @classmethod
    async def open(
        cls, url: str, *, min_size: int = 1, max_size: int = 10, connect_timeout: float = 10.0
    ) -> PostgresBackend:
        """Apply pending migrations to the database at ``url`` and open a connection pool.

        Raises:
            MigrationError: the schema could not be brought up to date.
            StorageError: the server cannot be reached within ``connect_timeout`` seconds.
        """
        await migrate(url, connect_timeout=connect_timeout)
        backend = cls(url, min_size=min_size, max_size=max_size)
        await backend._pool.open(connect_timeout)
        if not await backend._pool.can_become(ADMIN.role):
            backend._search.statistics = NOBODY
        return backend

    @property
    def events(self) -> PostgresEventStore:
        """The event log."""
        return self._events

    @property
    def search(self) -> PostgresSearch:
        """Candidate retrieval for hybrid recall."""
        return self._search

    async def commit(self, ops: Sequence[Op], events: Sequence[EventEnvelope]) -> CommitResult:
        """Apply ``ops`` and append ``events`` atomically, as the tenant they concern."""
        ops, events = list(ops), list(events)
        for op in ops:
            if isinstance(op, Put) and op.vector is not None:
                table = table_for(op.record.namespace)
                await self._indexes.ensure(table, op.model, dimensions_of(op.vector))
        context = context_for([*_scopes(ops), *(e.scope for e in events)])
        if not _refusable(ops):
            # No result can fail the commit: it goes in the statements' round trip.
            return await self._pool.write_once(
                context,
                lambda conn: _send(conn, ops, events),
                lambda sent: _results(*sent, events),
            )
        async with self._pool.pipelined(context) as (conn, pipeline):
            return await _apply(conn, pipeline, ops, events)

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
        """``search.put_vectors`` of whole-text vectors (and ``parts``), with ``deletes``,
        begun before this returns; every transaction of the events' tenant begun after it
        comes after it (``QueuedWrites``). Not a durable one (``hold_writers``): the records'
        durable pending-parts records have them computed again if a crash of the server loses
        them (and those deletes with them)."""
        context = context_for(e.scope for e in events) if events else ADMIN
        then = [_statement(op) for op in deletes]
        return self._pool.queue(
            context,
            lambda: self._search.put_vectors(
                model,
                vectors,
                events,
                parts=parts,
                versions=versions,
                durable=False,
                then=then,
            ),
        )

    def bulk_load(self, index_memory_mb: int) -> AbstractAsyncContextManager[None]:
        """While this runs, a model's first vectors in a table note its HNSW index instead of
        creating it; each noted index is built from the full table when this ends."""
        return self._indexes.deferring(index_memory_mb)

    async def amend(
        self, namespace: str, scope: Scope, key: str, decide: Amend, *, writer: Scope | None = None
    ) -> CommitResult:
        """Lock and read the record ``key`` (``SELECT … FOR UPDATE``) and commit what
        ``decide`` makes of it, in one transaction: a concurrent amend of the key waits for
        this one and decides on what it wrote."""
        async with self._pool.transaction(context_for([scope, writer or scope])) as conn:
            # The writers' lock first, as every commit takes it, so no lock order inverts.
            await hold_writers(conn)
            ops, events = decide(await _locked(conn, namespace, scope, key))
            if any(isinstance(op, Put) and op.vector is not None for op in ops):
                raise ValueError("an amend stores no vectors")
            async with conn.pipeline() as pipeline:
                return await _apply(conn, pipeline, list(ops), list(events))

    async def get(self, namespace: str, scope: Scope, key: str) -> Record | None:
        """The record ``key`` in partition ``scope``, expired or not."""
        async with self._pool.transaction(context_for([scope])) as conn:
            cursor = await conn.execute(
                f"SELECT {record_select_list()} FROM {table_for(namespace)} r "
                f"WHERE {PARTITION} AND key = %s",
                (namespace, *scope.columns(), key),
            )
            row = await cursor.fetchone()
        return None if row is None else row_record(row)

    async def scan(self, query: RecordQuery) -> list[Record]:
        """Records matching ``query`` ordered by key."""
        sql, params = record_select(query)
        rows = await self._pool.read(context_for([query.scope]), Read(sql, params))
        return [row_record(r) for r in rows]

    async def keys(self, query: RecordQuery) -> list[str]:
        """Keys of the records matching ``query``, ordered like :meth:`scan`."""
        sql, params = record_select(query, columns="key")
        async with self._pool.transaction(context_for([query.scope])) as conn:
            return [r[0] for r in await (await conn.execute(sql, params)).fetchall()]

    async def count(self, query: RecordQuery) -> int:
        """How many records match ``query``."""
        where, params = record_where(query)
        async with self._pool.transaction(context_for([query.scope])) as conn:
            cursor = await conn.execute(
                f"SELECT count(*) FROM {table_for(query.namespace)} WHERE {where}", params
            )
            row = await cursor.fetchone()
        return int(row[0]) if row else 0

    async def rebuild(
        self, namespace: str, scope: ScopeFilter | None, source: EventQuery, fold: Fold
    ) -> int:
        """Recompute ``namespace`` within ``scope`` from the events ``source`` selects, in
        stages that hold writers off only for short transactions (``staged_rebuild``); vectors
        of records whose text is unchanged are kept."""
        return await staged_rebuild(PostgresRebuild(self._pool, namespace, scope, source, fold))

    async def delete_tenant(self, tenant: str) -> bool:
        """Delete tenant ``tenant`` and, by cascade, its users, every memory and every event.

        Runs as the tenant itself: row-level security lets it delete nothing else. Returns
        whether the tenant existed.
        """
        async with self._pool.transaction(Context(SERVICE_ROLE, tenant)) as conn:
            await hold_writers(conn)
            cursor = await conn.execute("DELETE FROM tenants WHERE id = %s", (tenant_uuid(tenant),))
            return cursor.rowcount > 0

    async def stats(self) -> BackendStats:
        """Record and event counts of every tenant and the database size in bytes."""
        counts = " UNION ALL ".join(
            f"SELECT namespace, count(*) FROM {table} GROUP BY namespace" for table in RECORD_TABLES
        )
        async with self._pool.transaction(ADMIN) as conn:
            by_ns = {
                str(ns): int(n)
                for ns, n in await (
                    await conn.execute(f"SELECT * FROM ({counts}) AS c ORDER BY 1")
                ).fetchall()
            }
            cursor = await conn.execute(
                "SELECT (SELECT count(*) FROM events), pg_database_size(current_database())"
            )
            row = await cursor.fetchone()
        assert row is not None
        return BackendStats(self.url, sum(by_ns.values()), int(row[0]), by_ns, int(row[1]))

    async def close(self) -> None:
        """Close the connection pool; idempotent."""
        await self._pool.close()
