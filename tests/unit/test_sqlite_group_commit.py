"""``SqliteWorker.write``: writes queued together share one commit, each all or nothing."""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from engramdb.core.errors import StorageError
from engramdb.storage.sqlite.worker import SqliteWorker


class Refused(Exception):
    """A write's own failure (a version check, say)."""


async def opened(tmp_path: Path) -> SqliteWorker:
    worker = SqliteWorker(str(tmp_path / "w.db"))
    await worker.open()
    await worker.run(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
    return worker


def insert(*numbers: int, fail: Exception | None = None) -> Callable[[sqlite3.Connection], int]:
    """A write inserting ``numbers``, then raising ``fail`` if given."""

    def write(conn: sqlite3.Connection) -> int:
        for n in numbers:
            conn.execute("INSERT INTO t (n) VALUES (?)", (n,))
        if fail is not None:
            raise fail
        return len(numbers)

    return write


async def stored(worker: SqliteWorker) -> list[int]:
    rows = await worker.run(lambda conn: conn.execute("SELECT n FROM t ORDER BY n").fetchall())
    return [n for (n,) in rows]


async def test_a_failed_write_among_others_undoes_only_itself(tmp_path: Path) -> None:
    worker = await opened(tmp_path)
    try:
        results = await asyncio.gather(
            worker.write(insert(1, 2)),
            worker.write(insert(3, 4, fail=Refused("no"))),
            worker.write(insert(5)),
            # A driver error (a duplicate key) after a part of the write went in.
            worker.write(insert(6, 1)),
            worker.write(insert(7)),
            return_exceptions=True,
        )
        assert [results[0], results[2], results[4]] == [2, 1, 1]
        assert isinstance(results[1], Refused)
        assert isinstance(results[3], StorageError)
        assert await stored(worker) == [1, 2, 5, 7]
    finally:
        await worker.close()


async def test_many_queued_writes_are_all_committed(tmp_path: Path) -> None:
    worker = await opened(tmp_path)
    try:
        counts = await asyncio.gather(*(worker.write(insert(n)) for n in range(200)))
        assert counts == [1] * 200
        assert await stored(worker) == list(range(200))
    finally:
        await worker.close()
    # Durable: a new connection reads every one of them.
    with sqlite3.connect(tmp_path / "w.db") as conn:
        assert conn.execute("SELECT count(*) FROM t").fetchone() == (200,)


async def test_a_lone_failed_write_leaves_nothing(tmp_path: Path) -> None:
    worker = await opened(tmp_path)
    try:
        with pytest.raises(Refused):
            await worker.write(insert(1, 2, fail=Refused("no")))
        assert await stored(worker) == []
    finally:
        await worker.close()


def synchronous_seen(conn: sqlite3.Connection) -> int:
    """A write that reports the ``synchronous`` level its transaction commits under."""
    conn.execute("INSERT INTO t (n) VALUES ((SELECT coalesce(max(n), 0) + 1 FROM t))")
    level: int = conn.execute("PRAGMA synchronous").fetchone()[0]
    return level


async def test_a_write_that_need_not_be_durable_skips_the_sync_unless_a_durable_one_shares_it(
    tmp_path: Path,
) -> None:
    full, normal = 2, 1
    worker = await opened(tmp_path)
    try:
        # Alone, each commits at its own level; the connection is back at FULL after either.
        assert await worker.queue(synchronous_seen, durable=False) == normal
        assert await worker.write(synchronous_seen) == full
        # Queued together (the thread held until all three are in) they share one
        # transaction, which a durable write makes durable.
        release = threading.Event()
        held = asyncio.ensure_future(worker.run(lambda _: release.wait(5)))
        await asyncio.sleep(0.05)
        shared = [
            worker.queue(synchronous_seen, durable=False),
            worker.queue(synchronous_seen),
            worker.queue(synchronous_seen, durable=False),
        ]
        release.set()
        await held
        assert await asyncio.gather(*shared) == [full, full, full]
        assert await worker.queue(synchronous_seen, durable=False) == normal
        level = await worker.run(lambda conn: conn.execute("PRAGMA synchronous").fetchone()[0])
        assert level == full
        assert await stored(worker) == [1, 2, 3, 4, 5, 6]
    finally:
        await worker.close()


async def test_a_store_opened_with_normal_sync_stays_normal(tmp_path: Path) -> None:
    worker = SqliteWorker(str(tmp_path / "n.db"), synchronous="normal")
    await worker.open()
    try:
        await worker.run(lambda conn: conn.execute("CREATE TABLE t (n INTEGER PRIMARY KEY)"))
        assert await worker.write(synchronous_seen) == 1
        assert await worker.queue(synchronous_seen, durable=False) == 1
    finally:
        await worker.close()
