"""A rebuild holds writers off only briefly and loses nothing written while it runs: another
connection writes in the middle of the rebuild's fold, on every backend a second connection can
share."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from engramdb.core.events import EventEnvelope, MemoryDeleted, MemoryWritten
from engramdb.core.scope import Scope
from engramdb.providers.projection import PROJECTED_TYPES, ProjectionSpec, fold, written_record
from engramdb.storage.backend import Backend, EventQuery
from engramdb.storage.records import Delete, Op, Put, Record, RecordQuery
from engramdb.storage.registry import open_backend
from tests.postgres.database import database_url, empty_database

SPEC = ProjectionSpec("ns")
ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="globex", user="bob")
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SOURCE = EventQuery(event_types=PROJECTED_TYPES, provider_id="ns")


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


@pytest.fixture(params=["sqlite-file", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A database two connections can share, empty."""
    return str(tmp_path / "shared.db") if request.param == "sqlite-file" else empty_database()


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
        calls = 0

        def fold_while_others_write(events: Iterator[EventEnvelope]) -> list[Record]:
            nonlocal calls
            calls += 1
            records = fold(events, SPEC)
            if calls == 1:
                # Mid-rebuild, another connection overwrites, creates and deletes.
                commit_elsewhere(
                    url,
                    [put(later), put(fresh), Delete("ns", BOB, "c")],
                    [later, fresh, deleted("c", BOB)],
                )
            return records

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
