"""``PostgresPool``: a psycopg connection pool whose every transaction acts for one
``Context``; ``Reads``: a read-only transaction sent in pipeline mode, one round trip per batch.

Each transaction starts by switching role and setting the tenant and user with transaction-local
``set_config(…, true)``: when it ends, commit or rollback, the connection is back to the
connecting user with nothing set, so a pooled connection carries nothing of one request into the
next. Driver errors are translated to ``StorageError`` here, at the boundary.

A read goes in as few round trips as its statements allow: the transaction's start, the role
and tenant settings and the first statements travel together, and the commit travels with the
last ones (on a busy machine every round trip waits for the server process to be scheduled).
A read of one batch is the batch's own implicit transaction, with neither BEGIN nor COMMIT.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg import AsyncConnection, AsyncCursor, AsyncPipeline
from psycopg.types.string import TextLoader
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from engramdb.core.errors import EngineClosedError, StorageError
from engramdb.storage.postgres.queued_writes import QueuedWrites
from engramdb.storage.postgres.tenancy import Context
from engramdb.storage.postgres.vectors import register_vector

Connection = AsyncConnection[tuple[Any, ...]]
Cursor = AsyncCursor[tuple[Any, ...]]
Sent = TypeVar("Sent")
Done = TypeVar("Done")

_ENTER = (
    "SELECT set_config('role', %s, true), set_config('app.current_tenant', %s, true), "
    "set_config('app.current_user', %s, true)"
)


_OPEN = (psycopg.pq.TransactionStatus.INTRANS, psycopg.pq.TransactionStatus.INERROR)
_SNAPSHOT = "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
_BEGIN = {False: "BEGIN", True: "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY"}


@dataclass(frozen=True)
class Read:
    """One statement of a ``Reads`` batch; with ``binary`` its rows come in binary (pgvector
    values as float32 bytes); with ``prepare`` it is prepared on the connection at once,
    rather than after it ran a few times there (each pooled connection prepares its own)."""

    sql: str
    params: Sequence[Any] | Mapping[str, Any] = ()
    binary: bool = False
    prepare: bool = False


class Reads:
    """A read-only transaction whose statements are sent a batch at a time, in pipeline mode:
    each ``run`` is one round trip. The first batch carries the role and tenant settings
    before anything else, so no statement runs without them; the batch marked ``last``
    carries the commit, after which the transaction takes no more statements.

    The connection is in autocommit mode (see ``PostgresPool.reads``). A transaction of one
    batch is then the batch's implicit transaction (the server commits what the pipeline sent
    up to its sync), so it needs neither BEGIN nor COMMIT; settings made with ``set_config(…,
    true)`` last until its end. A snapshot, or a transaction of several batches, begins with
    an explicit BEGIN in its first batch."""

    def __init__(self, conn: Connection, enter: Sequence[Read], *, snapshot: bool = False) -> None:
        if not conn.autocommit:
            # psycopg would open a transaction of its own that no batch commits.
            raise ValueError("a pipelined read needs a connection in autocommit mode")
        self._conn = conn
        self._enter = list(enter)
        self._snapshot = snapshot
        self._started = False
        self._explicit = False
        self._done = False

    async def run(self, reads: Sequence[Read], *, last: bool = False) -> list[list[Any]]:
        """Each statement's rows, in order, after one round trip."""
        if self._done:
            raise RuntimeError("this read transaction has ended")
        conn = self._conn
        opening = []
        if not self._started:
            self._started = True
            self._explicit = self._snapshot or not last
            if self._explicit:
                opening.append(Read(_BEGIN[self._snapshot]))
        batch = [*opening, *self._enter, *reads]
        skip, self._enter = len(batch) - len(reads), []
        cursors = []
        # Leaving the pipeline sends it and reads every result: one round trip.
        async with conn.pipeline():
            for read in batch:
                cursor = conn.cursor(binary=read.binary)
                await cursor.execute(read.sql, read.params, prepare=read.prepare or None)
                cursors.append(cursor)
            if last:
                self._done = True
                if self._explicit:
                    await conn.execute("COMMIT")
        # Settings return a row and commands none: only statements with columns are read.
        rows = [
            await cursor.fetchall() if cursor.description is not None else [] for cursor in cursors
        ]
        return rows[skip:]

    async def one(self, read: Read) -> list[Any]:
        """The rows of one statement that ends the transaction."""
        (rows,) = await self.run([read], last=True)
        return rows

    async def end(self) -> None:
        """Roll back whatever the transaction left open (an error, or no ``last`` batch)."""
        self._done = True
        if self._conn.info.transaction_status in _OPEN:
            await self._conn.rollback()


async def _leave_autocommit(conn: Connection) -> None:
    """Give ``conn`` back to the pool as it lent it, out of autocommit mode; one still inside
    a transaction (its rollback failed) is closed, for the pool to replace."""
    if conn.closed:
        return
    if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
        await conn.set_autocommit(False)
    else:
        await conn.close()


def redacted_url(url: str) -> str:
    """``url`` without its password, for messages and ``Backend.url``."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info.pop("password", None)
    user = info.get("user")
    host = info.get("host", "")
    port = info.get("port")
    where = f"{host}:{port}" if port else str(host)
    return f"postgresql://{f'{user}@' if user else ''}{where}/{info.get('dbname', '')}"


async def connect(url: str, connect_timeout: float = 10.0) -> Connection:
    """One connection outside the pool (schema and role administration).

    Raises:
        StorageError: the server cannot be reached within ``connect_timeout`` seconds.
    """
    try:
        return await psycopg.AsyncConnection.connect(
            url, connect_timeout=max(1, int(connect_timeout))
        )
    except psycopg.Error as exc:
        where = redacted_url(url)
        raise StorageError(f"cannot connect to PostgreSQL at {where}: {exc}", url=where) from exc


async def _configure(conn: Connection) -> None:
    # Times and JSON come back as the text the shared row mapping parses: JSON exactly as
    # written (json, unlike jsonb, keeps the text), times in UTC (the session's time zone).
    conn.adapters.register_loader("json", TextLoader)
    conn.adapters.register_loader("timestamptz", TextLoader)
    await register_vector(conn)
    await conn.commit()


class PostgresPool:
    """Connections to one database, lent out one transaction at a time."""

    def __init__(self, url: str, *, min_size: int = 1, max_size: int = 10) -> None:
        self.url = url
        self._pool: AsyncConnectionPool[Connection] = AsyncConnectionPool(
            url,
            open=False,
            min_size=min_size,
            max_size=max_size,
            kwargs={"options": "-c TimeZone=UTC"},
            configure=_configure,
        )
        self._closed = False
        self.queued = QueuedWrites()

    async def open(self, connect_timeout: float = 10.0) -> None:
        """Connect, waiting for the first connection.

        Raises:
            StorageError: the server cannot be reached within ``connect_timeout`` seconds.
        """
        try:
            await self._pool.open(wait=True, timeout=connect_timeout)
        except PoolTimeout as exc:
            await self._pool.close()
            raise StorageError(
                f"cannot connect to PostgreSQL at {redacted_url(self.url)}",
                url=redacted_url(self.url),
            ) from exc

    async def can_become(self, role: str) -> bool:
        """Whether the connecting user may switch to ``role``."""
        async with self.owner() as conn:
            cursor = await conn.execute("SELECT pg_has_role(current_user, %s, 'MEMBER')", (role,))
            row = await cursor.fetchone()
        return bool(row and row[0])

    @asynccontextmanager
    async def owner(self) -> AsyncIterator[Connection]:
        """A transaction as the connecting user itself, for schema changes only: no policy
        names it, so forced row-level security shows it no rows unless it is a superuser
        (who bypasses it) or owns the tables (and may switch it off); a service login may
        read no table at all this way (see ``logins``)."""
        async with self._borrow(None) as conn, conn.transaction():
            yield conn

    @asynccontextmanager
    async def transaction(
        self, context: Context, *, snapshot: bool = False
    ) -> AsyncIterator[Connection]:
        """A transaction as ``context``: all or nothing, isolated by row-level security.
        With ``snapshot`` it only reads, and every statement sees the database as the first
        one did (``REPEATABLE READ``)."""
        tenant, user = context.settings()
        async with self._borrow(context) as conn, conn.transaction():
            if snapshot:
                await conn.execute(_SNAPSHOT)
            await conn.execute(_ENTER, (context.role, tenant, user))
            yield conn

    @asynccontextmanager
    async def pipelined(self, context: Context) -> AsyncIterator[tuple[Connection, AsyncPipeline]]:
        """A transaction as ``context`` (see ``transaction``) in pipeline mode: its statements
        are only queued, and everything up to ``pipeline.sync()`` (results and errors) comes
        back in one round trip; the commit is one more."""
        tenant, user = context.settings()
        async with self._borrow(context) as conn, conn.pipeline() as pipeline, conn.transaction():
            await conn.execute(_ENTER, (context.role, tenant, user))
            yield conn, pipeline

    async def write_once(
        self,
        context: Context,
        send: Callable[[Connection], Awaitable[Sent]],
        finish: Callable[[Sent], Awaitable[Done]],
    ) -> Done:
        """A write transaction as ``context`` in one round trip: ``send`` queues its
        statements (in pipeline mode), the commit is queued after them, and ``finish`` reads
        what ``send`` returned (its cursors) once every result is back. An error of any
        statement rolls it all back. For writes no result of which may refuse the commit."""
        tenant, user = context.settings()
        async with self._borrow(context) as conn:
            try:
                async with conn.pipeline():
                    await conn.execute(_ENTER, (context.role, tenant, user))
                    sent = await send(conn)
                    await conn.execute("COMMIT")
                return await finish(sent)
            finally:
                if conn.info.transaction_status in _OPEN:
                    await conn.rollback()

    @asynccontextmanager
    async def reads(self, context: Context, *, snapshot: bool = False) -> AsyncIterator[Reads]:
        """A read-only transaction as ``context`` (see ``transaction``), sent a batch of
        statements at a time."""
        tenant, user = context.settings()
        enter = [Read(_ENTER, (context.role, tenant, user))]
        async with self._borrow(context) as conn:
            # Without autocommit, psycopg would begin the transaction itself and wait for the
            # server's answer before sending the first batch: a round trip more per read.
            await conn.set_autocommit(True)
            try:
                reads = Reads(conn, enter, snapshot=snapshot)
                try:
                    yield reads
                finally:
                    await reads.end()
            finally:
                await _leave_autocommit(conn)

    async def read(self, context: Context, read: Read) -> list[Any]:
        """The rows of one statement, read as ``context`` in one round trip."""
        (rows,) = await self.read_all(context, [read])
        return rows

    async def read_all(self, context: Context, reads: Sequence[Read]) -> list[list[Any]]:
        """The rows of each statement, read as ``context`` in one transaction and one round
        trip."""
        async with self.reads(context) as transaction:
            return await transaction.run(reads, last=True)

    def queue(self, context: Context, write: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Begin ``write`` (which borrows its own connections) now; every transaction lent
        out for ``context``'s tenant after this returns begins after it ends
        (``QueuedWrites``)."""
        if self._closed:
            raise EngineClosedError("the PostgreSQL backend is closed", url=redacted_url(self.url))
        return self.queued.queue(context.tenant, write)

    @asynccontextmanager
    async def _borrow(self, context: Context | None) -> AsyncIterator[Connection]:
        """A connection for a transaction as ``context``, once the writes queued before it for
        that tenant are done; ``None``: the connecting user's, for schema changes, which wait
        for no queued write (one may be waiting for the schema change)."""
        if self._closed:
            raise EngineClosedError("the PostgreSQL backend is closed", url=redacted_url(self.url))
        if context is not None:
            await self.queued.settle(context.tenant)
        try:
            async with self._pool.connection() as conn:
                yield conn
        except psycopg.Error as exc:
            raise StorageError(
                f"PostgreSQL error: {exc}",
                url=redacted_url(self.url),
                sqlstate=exc.sqlstate,
            ) from exc
        except PoolTimeout as exc:
            raise StorageError(
                "no PostgreSQL connection available", url=redacted_url(self.url)
            ) from exc

    async def close(self) -> None:
        """Close every connection; idempotent."""
        if self._closed:
            return
        # What writers were told is stored must be, before the connections go.
        await self.queued.drain()
        self._closed = True
        await self._pool.close()
