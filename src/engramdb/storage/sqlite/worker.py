"""``SqliteWorker``: one SQLite connection owned by one thread, driven from asyncio.

SQLite connections are not safe to share between threads, and one writer at a time is all
SQLite allows anyway; so every call runs on a single dedicated thread, in submission order.
Driver errors are translated to ``StorageError`` here, at the boundary. A write waits for
another connection's write lock (another process's, say) up to ``busy_timeout_s``; only past
that does it fail, with ``StorageBusyError``.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal, TypeVar

from engramdb.core.errors import EngineClosedError, StorageBusyError, StorageError
from engramdb.storage.sqlite.text_tokens import register_text_functions

T = TypeVar("T")
Synchronous = Literal["full", "normal"]
#: How long a statement waits for another connection's lock before it fails.
BUSY_TIMEOUT_S = 30.0


_BUSY = {sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED}


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
        if self._closed or self._conn is None:
            raise EngineClosedError("the SQLite backend is closed", path=self.path)
        conn = self._conn
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(self._executor, fn, conn)
        except sqlite3.Error as exc:
            # The primary result code (the low byte) of an extended one: BUSY_SNAPSHOT is BUSY.
            if getattr(exc, "sqlite_errorcode", 0) & 0xFF in _BUSY:
                raise StorageBusyError(
                    f"the SQLite database {self.path} stayed locked by another connection for "
                    f"{self.busy_timeout_s:g} s (a long rebuild or import?); nothing was written",
                    path=self.path,
                    waited_s=self.busy_timeout_s,
                ) from exc
            raise StorageError(f"SQLite error: {exc}", path=self.path) from exc

    async def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` inside ``BEGIN IMMEDIATE … COMMIT``; any exception rolls it all back."""

        def transaction(conn: sqlite3.Connection) -> T:
            conn.execute("BEGIN IMMEDIATE")
            try:
                result = fn(conn)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            return result

        return await self.run(transaction)

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
