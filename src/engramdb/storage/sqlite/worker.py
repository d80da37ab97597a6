"""``SqliteWorker``: one SQLite connection owned by one thread, driven from asyncio.

SQLite connections are not safe to share between threads, and one writer at a time is all
SQLite allows anyway; so every call runs on a single dedicated thread, in submission order.
Driver errors are translated to ``StorageError`` here, at the boundary. A write waits for
another connection's write lock (another process's, say) up to ``busy_timeout_s``; only past
that does it fail, with ``StorageBusyError``.

Writes that queue while the thread is busy are committed together (group commit): each in a
savepoint of one transaction, so each is still all or nothing and one that fails leaves the
others be, and the one commit (one sync of the log to disk, under ``synchronous=FULL``) makes
them all durable before any of their callers hears back.

A write queued as not ``durable`` (one whose loss in a power cut the store makes good itself,
such as a vector computed again from a durable note) commits, when no durable write shares its
transaction, without waiting for that sync: the log is written in order, so the next durable
commit's sync takes it to disk too. Under ``synchronous=FULL`` that sync is most of a small
commit's time, and the thread would otherwise spend it while the next write waits.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, TypeVar

from engramdb.core.errors import EngineClosedError, StorageBusyError, StorageError
from engramdb.storage.sqlite.text_tokens import register_text_functions

T = TypeVar("T")
Synchronous = Literal["full", "normal"]
#: How long a statement waits for another connection's lock before it fails.
BUSY_TIMEOUT_S = 30.0


_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}
#: Most writes committed together: a long queue is committed in several groups.
MAX_GROUP = 64


class _QueuedWrite:
    """A write waiting for the worker thread, and the future its caller awaits."""

    __slots__ = ("durable", "fn", "future", "loop")

    def __init__(
        self,
        fn: Callable[[sqlite3.Connection], Any],
        loop: asyncio.AbstractEventLoop,
        durable: bool,
    ) -> None:
        self.fn = fn
        self.loop = loop
        self.durable = durable
        self.future: asyncio.Future[Any] = loop.create_future()

    def settle(self, value: Any, failed: bool) -> None:
        """Hand the outcome to the caller (from the worker thread)."""
        self.loop.call_soon_threadsafe(_set_outcome, self.future, value, failed)


def _set_outcome(future: asyncio.Future[Any], value: Any, failed: bool) -> None:
    if future.cancelled():
        return
    if failed:
        future.set_exception(value)
    else:
        future.set_result(value)


class SqliteWorker:
    """A SQLite connection (WAL mode) behind a one-thread executor."""

    def __init__(
        self,
        path: str,
        *,
        synchronous: Synchronous = "full",
        busy_timeout_s: float = BUSY_TIMEOUT_S,
    ) -> None:
        self.path = path
        self.busy_timeout_s = busy_timeout_s
        self._synchronous = synchronous
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._closed = False
        #: Writes waiting for the worker thread (appended by the loop, taken by the thread).
        self._writes: deque[_QueuedWrite] = deque()

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        # SQLite's busy handler retries a locked database until this runs out.
        conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_s * 1000)}")
        if self.path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            # Truncate the WAL after checkpoints so an idle database does not keep megabytes.
            conn.execute("PRAGMA journal_size_limit = 1048576")
        # FULL makes every acknowledged commit durable across power loss; NORMAL (WAL) trades
        # the last commits before a power cut for speed and never corrupts the file.
        conn.execute(f"PRAGMA synchronous = {self._synchronous.upper()}")
        conn.execute("PRAGMA foreign_keys = ON")
        # Forgotten content is overwritten on disk, not just unlinked from the b-tree.
        conn.execute("PRAGMA secure_delete = ON")
        register_text_functions(conn)
        return conn

    async def open(self) -> None:
        """Connect (on the worker thread)."""
        loop = asyncio.get_running_loop()
        try:
            self._conn = await loop.run_in_executor(self._executor, self._connect)
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot open SQLite database {self.path}: {exc}") from exc

    async def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` on the worker thread (reads, or self-managed writes)."""
        conn = self._open_connection()
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, conn)
        except sqlite3.Error as exc:
            raise self._translated(exc) from exc

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside ``BEGIN IMMEDIATE … COMMIT``; any exception rolls back all it did
        (and nothing else). Writes queued meanwhile share the transaction and its commit."""
        future = self.queue(fn)
        try:
            result: T = await future
        except sqlite3.Error as exc:
            raise self._translated(exc) from exc
        return result

    def queue(
        self, fn: Callable[[sqlite3.Connection], T], *, durable: bool = True
    ) -> asyncio.Future[T]:
        """``write``, queued before this returns: every call made on this worker afterwards
        runs after it. The future holds its result, or the driver's untranslated error.
        ``durable=False``: its commit need not wait for the log's sync (module docstring)."""
        self._open_connection()
        queued = _QueuedWrite(fn, asyncio.get_running_loop(), durable)
        self._writes.append(queued)
        self._executor.submit(self._commit_queued)
        return queued.future

    def _commit_queued(self) -> None:
        """On the worker thread: commit the writes queued so far (none if an earlier call
        took them), each in a savepoint of one transaction."""
        group: list[_QueuedWrite] = []
        while self._writes and len(group) < MAX_GROUP:
            group.append(self._writes.popleft())
        if not group:
            return
        conn = self._conn
        alone = len(group) == 1
        outcomes: list[tuple[Any, bool]] = []
        try:
            if conn is None:
                raise EngineClosedError("the SQLite backend is closed", path=self.path)
            relaxed = self._synchronous == "full" and not any(q.durable for q in group)
            with _unsynced(conn) if relaxed else contextlib.nullcontext():
                conn.execute("BEGIN IMMEDIATE")
                try:
                    for queued in group:
                        outcomes.append(_in_savepoint(conn, queued.fn, alone))
                    conn.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                    raise
        except BaseException as exc:
            # Nothing of the group is stored: every caller hears why.
            outcomes = [(exc, True)] * len(group)
        for queued, (value, failed) in zip(group, outcomes, strict=True):
            queued.settle(value, failed)

    def _open_connection(self) -> sqlite3.Connection:
        if self._closed or self._conn is None:
            raise EngineClosedError("the SQLite backend is closed", path=self.path)
        return self._conn

    def _translated(self, exc: sqlite3.Error) -> StorageError:
        # The primary result code (the low byte) of an extended one: BUSY_SNAPSHOT is BUSY.
        if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY:
            return StorageBusyError(
                f"the SQLite database {self.path} stayed locked by another connection for "
                f"{self.busy_timeout_s:g} s (a long rebuild or import?); nothing was written",
                path=self.path,
                waited_s=self.busy_timeout_s,
            )
        return StorageError(f"SQLite error: {exc}", path=self.path)

    async def close(self) -> None:
        """Close the connection and stop the thread; idempotent."""
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        if conn is not None:
            loop = asyncio.get_running_loop()
            await loop.run_in_executor(self._executor, conn.close)
        self._executor.shutdown(wait=True)


@contextlib.contextmanager
def _unsynced(conn: sqlite3.Connection) -> Iterator[None]:
    """Commits made inside do not wait for the log's sync (``synchronous=FULL`` again after)."""
    conn.execute("PRAGMA synchronous = NORMAL")
    try:
        yield
    finally:
        conn.execute("PRAGMA synchronous = FULL")


def _in_savepoint(
    conn: sqlite3.Connection, fn: Callable[[sqlite3.Connection], Any], alone: bool
) -> tuple[Any, bool]:
    """``fn(conn)`` as one write of a group: its result, or the exception that undid all it
    did (a write alone in its transaction needs no savepoint: a failure rolls it all back)."""
    if alone:
        return fn(conn), False
    conn.execute("SAVEPOINT engram_write")
    try:
        result = fn(conn)
    except Exception as exc:
        conn.execute("ROLLBACK TO engram_write")
        conn.execute("RELEASE engram_write")
        return exc, True
    conn.execute("RELEASE engram_write")
    return result, False
