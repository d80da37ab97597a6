"""``SqliteWorker.write``: writes queued together share one commit, each all or nothing."""

from __future__ import annotations

import asyncio
import sqlite3
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
