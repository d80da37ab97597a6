"""A rebuild holds writers off only briefly and loses nothing written while it runs: another
connection writes in the middle of the rebuild's fold, on every backend a second connection can
share."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import StorageBusyError
from engramdb.core.events import EventEnvelope, MemoryDeleted, MemoryWritten
from engramdb.core.scope import Scope
from engramdb.core.types import MemoryTier
from engramdb.engine import EngineConfig
from engramdb.providers.projection import PROJECTED_TYPES, ProjectionSpec, fold, written_record
from engramdb.storage.backend import Backend, EventQuery, Fold
from engramdb.storage.records import Delete, Op, Put, Record, RecordQuery
from engramdb.storage.registry import open_backend
from engramdb.storage.sqlite import SqliteBackend
from tests.postgres.database import database_url

SPEC = ProjectionSpec("ns")
ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="globex", user="bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SOURCE = EventQuery(event_types=PROJECTED_TYPES, provider_id="ns")
#: Where the package under test is imported from, for child processes.
SOURCE_ROOT = str(Path(engramdb.__file__).parents[1])
#: The first batch of episodes a rebuild folds; doubled until a rebuild is long enough.
EPISODES = 2500
#: How long one rebuild must take for writers' waits to be judged against it: machines differ
#: several times over in how fast they fold, and a writer may wait out one short transaction
#: and SQLite's busy-handler sleeps after it, which a rebuild of a few tenths of a second
#: cannot tell from a writer held for half of it.
REBUILD_AT_LEAST_S = 1.0


def written(key: str, value: object, scope: Scope = ALICE, minutes: int = 0) -> EventEnvelope:
    envelope = MemoryWritten(key=key, value=value, value_type="str", provider_id="ns").to_envelope(
        scope=scope
    )
    return envelope.model_copy(update={"occurred_at": T0 + timedelta(minutes=minutes)})


def put(envelope: EventEnvelope) -> Put:
    event = MemoryWritten.from_envelope(envelope)
    return Put(written_record(SPEC, envelope.scope, event, envelope.occurred_at))


def deleted(key: str, scope: Scope = ALICE) -> EventEnvelope:
    return MemoryDeleted(key=key, provider_id="ns").to_envelope(scope=scope)


def commit_elsewhere(url: str, ops: list[Op], events: list[EventEnvelope]) -> None:
    """Commit on a connection of another backend instance, from another thread (as another
    process would), giving up after a few seconds."""
    failure: list[BaseException] = []

    async def write() -> None:
        other = await open_backend(url)
        try:
            await asyncio.wait_for(other.commit(ops, events), 5)
        finally:
            await other.close()

    def run() -> None:
        try:
            asyncio.run(write())
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]


def folding_then(meanwhile: Callable[[], None]) -> Fold:
    """The namespace's fold, which runs ``meanwhile`` after its first fold (the snapshot's),
    while the rebuild is under way."""
    calls = 0

    def folded(events: Iterator[EventEnvelope]) -> list[Record]:
        nonlocal calls
        calls += 1
        records = fold(events, SPEC)
        if calls == 1:
            meanwhile()
        return records

    return folded


async def state(backend: Backend) -> list[Record]:
    return await backend.scan(RecordQuery("ns", None, hidden=None))


async def test_writes_made_while_a_rebuild_folds_are_kept(target: str) -> None:
    url = database_url() if target.startswith("postgresql") else target
    backend = await open_backend(target)
    try:
        first = [written("a", "one"), written("b", "two"), written("c", "gone", BOB)]
        await backend.commit([put(e) for e in first], first)
        later = written("a", "three", minutes=5)
        fresh = written("d", "four", BOB, minutes=5)
        # Mid-rebuild, another connection overwrites, creates and deletes.
        fold_while_others_write = folding_then(
            lambda: commit_elsewhere(
                url,
                [put(later), put(fresh), Delete("ns", BOB, "c")],
                [later, fresh, deleted("c", BOB)],
            )
        )
        stored = await backend.rebuild("ns", None, SOURCE, fold_while_others_write)
        after = {(r.scope, r.key): r.value for r in await state(backend)}
        assert after == {(ALICE, "a"): "three", (ALICE, "b"): "two", (BOB, "d"): "four"}
        assert stored == 3
        # What is stored is what a quiet rebuild of the whole log makes of it.
        before = await state(backend)
        await backend.rebuild("ns", None, SOURCE, lambda events: fold(events, SPEC))
        assert await state(backend) == before
    finally:
        await backend.close()


async def test_a_repair_planned_before_a_write_to_its_key_gives_way_to_the_write(
    target: str,
) -> None:
    url = database_url() if target.startswith("postgresql") else target
    backend = await open_backend(target)
    try:
        first = [written("a", "one"), written("b", "two")]
        await backend.commit([put(e) for e in first], first)
        # Both records drift from the log, so the rebuild plans to repair both.
        drifted = [put(written(k, "drift")) for k in ("a", "b")]
        await backend.commit(drifted, [])
        newer = written("a", "three", minutes=5)

        def others_write() -> None:
            # A write to one key (with its event), and a change without any to the other.
            commit_elsewhere(url, [put(newer)], [newer])
            commit_elsewhere(url, [put(written("b", "drift again"))], [])

        fold_while_others_write = folding_then(others_write)

        assert await backend.rebuild("ns", None, SOURCE, fold_while_others_write) == 2
        after = {r.key: r.value for r in await state(backend)}
        assert after == {"a": "three", "b": "two"}
    finally:
        await backend.close()


async def test_a_tenant_deleted_during_a_rebuild_stays_deleted(target: str) -> None:
    if not target.startswith("postgresql"):
        pytest.skip("deleting a whole tenant without events is a PostgreSQL operation")
    backend = await open_backend(target)
    try:
        theirs = [written("x", "theirs", BOB)]
        await backend.commit([put(e) for e in theirs], theirs)
        await backend.commit([Delete("ns", BOB, "x")], [])  # drifted: the rebuild restores it

        async def delete_tenant() -> None:
            other = await open_backend(database_url())
            try:
                deleting = other.delete_tenant("globex")  # type: ignore[attr-defined]
                await asyncio.wait_for(deleting, 5)
            finally:
                await other.close()

        folds: list[int] = []

        def fold_while_the_tenant_goes(events: Iterator[EventEnvelope]) -> list[Record]:
            records = fold(events, SPEC)
            folds.append(len(records))
            thread = threading.Thread(target=asyncio.run, args=(delete_tenant(),))
            thread.start()
            thread.join()
            return records

        await backend.rebuild("ns", None, SOURCE, fold_while_the_tenant_goes)
        assert folds == [1]  # nothing was written meanwhile: nothing to fold again
        assert await state(backend) == []
        assert await backend.events.read() == []
    finally:
        await backend.close()


async def test_a_rebuild_repairs_records_that_drifted_from_the_log(backend: Backend) -> None:
    events = [written("a", "one"), written("b", "two"), written("c", "three")]
    await backend.events.append(events)
    await backend.rebuild("ns", None, SOURCE, lambda e: fold(e, SPEC))
    rebuilt = await state(backend)
    ids = {r.key: r.id for r in rebuilt}
    # A record the log does not hold, one changed behind the log's back, one lost.
    stray = put(written("zz", "stray")).record
    changed = put(written("a", "edited")).record
    await backend.commit([Put(stray), Put(changed), Delete("ns", ALICE, "c")], [])
    assert await backend.rebuild("ns", None, SOURCE, lambda e: fold(e, SPEC)) == 3
    assert await state(backend) == rebuilt
    # Records the rebuild left as they were keep their row ids.
    assert {r.key: r.id for r in await state(backend)}["b"] == ids["b"]


#: A second process: opens the database, says so, rebuilds everything, says so.
REBUILDER = """
import asyncio, sys
import engramdb
from engramdb.engine import EngineConfig

async def main() -> None:
    async with engramdb.open(sys.argv[1], config=EngineConfig(embedder=None)) as engine:
        print("started", flush=True)
        await engine.rebuild()
        print("done", flush=True)

asyncio.run(main())
"""


async def a_log_slow_to_rebuild(engine: engramdb.Engine) -> int:
    """Append episodes, doubling their number, until a rebuild of ``engine``'s store in step
    with its log takes ``REBUILD_AT_LEAST_S`` on this machine; returns how many were appended."""
    alice = Scope(tenant="acme", user="alice")
    appended = 0
    while True:
        await engine.events.append(
            [
                MemoryWritten(
                    key=f"e{n:06}",
                    value=f"turn {n} about the trip",
                    value_type="str",
                    provider_id="episodic",
                ).to_envelope(scope=alice)
                for n in range(appended, appended + max(appended, EPISODES))
            ]
        )
        appended += max(appended, EPISODES)
        await engine.rebuild()
        # Timed: what the other process does, fold a store in step with its log.
        started = time.monotonic()
        await engine.rebuild()
        if time.monotonic() - started >= REBUILD_AT_LEAST_S or appended >= 64 * EPISODES:
            return appended


async def test_writes_go_on_while_another_process_rebuilds(target: str) -> None:
    url = database_url() if target.startswith("postgresql") else target
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        episodes = await a_log_slow_to_rebuild(engine)
        manager = engine.scope(tenant="acme", user="bob").manager
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            REBUILDER,
            url,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": SOURCE_ROOT},
        )
        assert child.stdout is not None
        assert await child.stdout.readline() == b"started\n"
        started = time.monotonic()
        finished = asyncio.ensure_future(child.stdout.readline())
        waits: list[float] = []
        keys: list[str] = []
        while not finished.done():
            key = f"note-{len(keys)}"
            sent = time.monotonic()
            await manager.store(key, "written during the rebuild", tier=MemoryTier.PERSISTENT)
            waits.append(time.monotonic() - sent)
            keys.append(key)
            await asyncio.sleep(0.02)
        assert await finished == b"done\n"
        took = time.monotonic() - started
        assert await child.wait() == 0
        # No writer waited out the rebuild (a relative bound: bench/bench_rebuild_writers.py
        # measures the wait), and no write made meanwhile was lost.
        assert max(waits) < took / 2, (max(waits), took)
        for key in keys:
            assert await manager.read(key) is not None, key
        assert (await engine.stats()).records == episodes + len(keys)


async def test_a_sqlite_write_waits_for_another_connections_lock_then_fails_typed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "locked.db"
    backend = await SqliteBackend.open(path, busy_timeout_s=0.3)
    try:
        holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        holder.execute("BEGIN IMMEDIATE")
        event = written("a", "one")
        with pytest.raises(StorageBusyError) as raised:
            await backend.commit([put(event)], [event])
        assert raised.value.details["waited_s"] == 0.3
        # Held for less than the wait, the lock only delays the write.
        releasing = threading.Timer(0.1, lambda: holder.execute("COMMIT"))
        releasing.start()
        await backend.commit([put(event)], [event])
        releasing.join()
        holder.close()
        assert [e.event_id for e in await backend.events.read()] == [event.event_id]
    finally:
        await backend.close()
