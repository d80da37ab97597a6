"""A write queued on the PostgreSQL pool (``QueuedWrites``): later transactions of its tenant,
and those spanning tenants, begin after it ends — failed or not — while other tenants' go on;
closing the pool waits for it."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from engramdb.storage.postgres import migrate
from engramdb.storage.postgres.connection import PostgresPool, Read
from engramdb.storage.postgres.event_store import hold_writers
from engramdb.storage.postgres.schema import SERVICE_ROLE
from engramdb.storage.postgres.tenancy import ADMIN, Context
from tests.postgres.database import empty_database

ACME = Context(SERVICE_ROLE, "acme")
GLOBEX = Context(SERVICE_ROLE, "globex")


@pytest.fixture
async def pool() -> AsyncIterator[PostgresPool]:
    url = empty_database()
    await migrate(url)
    opened = PostgresPool(url)
    await opened.open()
    try:
        yield opened
    finally:
        await opened.close()


def _held(pool: PostgresPool, gate: asyncio.Event, *, fails: bool = False) -> asyncio.Task[None]:
    async def write() -> None:
        await gate.wait()
        # The queued write's own transactions do not wait for it.
        await pool.read(ACME, Read("SELECT 1"))
        if fails:
            raise RuntimeError("the queued write failed")

    return pool.queue(ACME, write)


async def _settles(task: asyncio.Task[Any]) -> bool:
    done, _ = await asyncio.wait([task], timeout=0.3)
    return bool(done)


@pytest.mark.parametrize("fails", [False, True])
async def test_a_queued_write_holds_its_tenants_later_transactions_only(
    pool: PostgresPool, fails: bool
) -> None:
    gate = asyncio.Event()
    queued = _held(pool, gate, fails=fails)
    acme = asyncio.create_task(pool.read(ACME, Read("SELECT 1")))
    everyone = asyncio.create_task(pool.read(ADMIN, Read("SELECT 1")))
    globex = asyncio.create_task(pool.read(GLOBEX, Read("SELECT 1")))
    assert await _settles(globex)
    assert not await _settles(acme)
    assert not everyone.done()
    gate.set()
    assert await asyncio.wait_for(acme, 10) == [(1,)]
    assert await asyncio.wait_for(everyone, 10) == [(1,)]
    await asyncio.wait([queued])
    assert (queued.exception() is not None) is fails


async def test_closing_the_pool_waits_for_a_queued_write(pool: PostgresPool) -> None:
    gate = asyncio.Event()
    queued = _held(pool, gate)
    closing = asyncio.create_task(pool.close())
    assert not await _settles(closing)
    gate.set()
    await asyncio.wait_for(closing, 10)
    assert queued.done()
    assert queued.exception() is None


@pytest.mark.parametrize("durable", [True, False])
async def test_a_write_that_need_not_be_durable_does_not_wait_for_the_log_flush(
    pool: PostgresPool, durable: bool
) -> None:
    async def level(conn: Any) -> str:
        setting = await (await conn.execute("SHOW synchronous_commit")).fetchone()
        return str(setting[0])

    async with pool.transaction(ACME) as conn:
        await hold_writers(conn, durable=durable)
        assert await level(conn) == ("on" if durable else "off")
    # For that transaction alone: the connection's next one flushes the log again.
    async with pool.transaction(ACME) as conn:
        await hold_writers(conn)
        assert await level(conn) == "on"
