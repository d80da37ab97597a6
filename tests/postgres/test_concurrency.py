"""Many writers on one pool: positions in commit order, and rebuilds that lose no write."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.backend import EventQuery
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.records import Put, Record, RecordQuery
from tests.postgres.conftest import secret, written

TENANTS = [Scope(tenant=f"t{n}", user="u", agent="a") for n in range(4)]


def put_and_event(scope: Scope, key: str) -> tuple[Put, EventEnvelope]:
    put = secret("episodic", scope)
    return Put(replace(put.record, key=key)), written(scope, key)


async def test_concurrent_commits_get_every_position_once_in_order(url: str) -> None:
    backend = await PostgresBackend.open(url, max_size=4)
    try:

        async def write(n: int) -> None:
            put, event = put_and_event(TENANTS[n % 4], f"k{n}")
            await backend.commit([put], [event])

        await asyncio.gather(*(write(n) for n in range(40)))
        positions = [e.position for e in await backend.events.read()]
        assert positions == list(range(1, 41))
        for scope in TENANTS:
            assert await backend.count(RecordQuery("episodic", scope)) == 10
    finally:
        await backend.close()


async def test_a_rebuild_during_writes_loses_none_of_them(url: str) -> None:
    backend = await PostgresBackend.open(url, max_size=4)
    scope = TENANTS[0]
    partition = ScopeFilter(scope)

    def fold(events: Iterator[EventEnvelope]) -> list[Record]:
        return [put_and_event(scope, e.payload["key"])[0].record for e in events]

    try:

        async def write(n: int) -> None:
            put, event = put_and_event(scope, f"k{n}")
            await backend.commit([put], [event])

        async def rebuild() -> None:
            await backend.rebuild("episodic", partition, EventQuery(scope=partition), fold)

        await asyncio.gather(*(write(n) for n in range(30)), *(rebuild() for _ in range(3)))
        keys = await backend.keys(RecordQuery("episodic", scope))
        assert sorted(keys) == sorted(f"k{n}" for n in range(30))
    finally:
        await backend.close()
