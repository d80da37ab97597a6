"""Record versions on every backend: counted by each write, reproduced by a rebuild, checked
against a caller's expected version inside the write's transaction (a stale one writes
nothing), and a deleted record stays deleted."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from engramdb.core.errors import NotFoundError, ValidationError, VersionConflictError
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.storage.backend import Backend
from engramdb.storage.records import Record
from tests.conformance.conftest import SCOPE

NS = "event_sourced"


def provider(backend: Backend) -> EventSourcedProvider:
    return EventSourcedProvider(backend, SCOPE, provider_id=NS)


async def stored(backend: Backend, key: str) -> Record | None:
    return await backend.get(NS, provider(backend).partition, key)


async def test_every_write_counts_a_version_and_a_rebuild_reproduces_them(
    backend: Backend,
) -> None:
    memory = provider(backend)
    assert [(await memory.write("k", n)).version for n in range(3)] == [1, 2, 3]
    await memory.forget("k", "soft")
    await memory.restore("k")
    await memory.write("other", "x")
    await memory.write("gone", "x")
    await memory.delete("gone")
    await memory.write("gone", "again")
    before = {key: await stored(backend, key) for key in ("k", "other", "gone")}
    assert {key: r.version for key, r in before.items() if r} == {"k": 5, "other": 1, "gone": 1}
    await memory.rebuild()
    assert {key: await stored(backend, key) for key in before} == before


async def test_a_stale_expected_version_writes_nothing(backend: Backend) -> None:
    memory = provider(backend)
    await memory.write("k", "first")
    await memory.write("k", "second")
    events = await backend.events.count()
    with pytest.raises(VersionConflictError) as raised:
        await memory.write("k", "lost?", expected_version=1)
    assert raised.value.details | {"expected": 1, "current": 2} == raised.value.details
    with pytest.raises(VersionConflictError):
        await memory.delete("k", expected_version=1)
    with pytest.raises(NotFoundError):
        await memory.write("never", "x", expected_version=1)
    with pytest.raises(ValidationError):
        await memory.write("k", "x", expected_version=0)
    assert await backend.events.count() == events
    entry = await memory.read("k")
    assert entry is not None
    assert entry.value == "second"
    assert (await memory.write("k", "third", expected_version=2)).version == 3
    assert await memory.delete("k", expected_version=3)


async def test_an_update_merges_in_the_transaction_and_never_recreates(
    backend: Backend,
) -> None:
    memory = provider(backend)
    await memory.write("k", {"a": 0, "b": 0})

    def bump(field: str) -> Callable[[Record], WriteRequest]:
        def change(record: Record) -> WriteRequest:
            return WriteRequest("k", {**record.value, field: record.value[field] + 1})

        return change

    await asyncio.gather(*(memory.update("k", bump(f)) for f in ("a", "b") * 5))
    entry = await memory.read("k")
    assert entry is not None
    assert (entry.value, entry.version) == ({"a": 5, "b": 5}, 11)
    with pytest.raises(VersionConflictError):
        await memory.update("k", bump("a"), expected_version=3)
    await memory.delete("k")
    events = await backend.events.count()
    with pytest.raises(NotFoundError):
        await memory.update("k", bump("a"))
    with pytest.raises(NotFoundError):
        await memory.update("never", bump("a"))
    assert await stored(backend, "k") is None
    assert await backend.events.count() == events


async def test_of_concurrent_deletes_one_deletes_with_one_event(backend: Backend) -> None:
    memory = provider(backend)
    await memory.write("k", "x")
    events = await backend.events.count()
    results = await asyncio.gather(*(memory.delete("k") for _ in range(4)))
    assert sorted(results) == [False, False, False, True]
    assert await backend.events.count() == events + 1


async def test_of_concurrent_forgets_and_restores_one_acts_with_one_event(
    backend: Backend,
) -> None:
    memory = provider(backend)
    await memory.write("k", "x")
    events = await backend.events.count()
    assert sorted(await asyncio.gather(*(memory.forget("k") for _ in range(3)))) == [
        False,
        False,
        True,
    ]
    assert sorted(await asyncio.gather(*(memory.restore("k") for _ in range(3)))) == [
        False,
        False,
        True,
    ]
    assert await backend.events.count() == events + 2
    record = await stored(backend, "k")
    assert record is not None
    assert (record.hidden_at, record.version) == (None, 3)
