"""The storage contract (``Backend`` and ``EventStore``), run against every backend."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from engramdb.core.errors import ConflictError, StorageError
from engramdb.core.events import EventEnvelope, MemoryWritten
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.orchestrator.trace import TurnTraced
from engramdb.storage.backend import Backend, EventQuery
from engramdb.storage.records import Delete, Op, Put, Record, RecordQuery, RedactScope

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="acme", user="bob")
GLOBEX = Scope(tenant="globex", user="alice")


def record(key: str, scope: Scope = ALICE, **fields: object) -> Record:
    base = Record(
        namespace="ns",
        scope=scope,
        key=key,
        value={"v": key},
        content_type="fact",
        metadata={},
        created_at=T0,
        text=key,
    )
    return replace(base, **fields)  # type: ignore[arg-type]


def event(key: str, scope: Scope = ALICE) -> EventEnvelope:
    return MemoryWritten(key=key, value=key, value_type="str", provider_id="ns").to_envelope(
        scope=scope
    )


async def test_commit_stores_records_and_events_together(backend: Backend) -> None:
    result = await backend.commit([Put(record("a")), Put(record("b"))], [event("a"), event("b")])
    assert [r.key for r in result.stored] == ["a", "b"]
    assert [e.position for e in result.events] == [1, 2]
    assert await backend.get("ns", ALICE, "a") == record("a")
    assert [e.event_id for e in await backend.events.read()] == [e.event_id for e in result.events]


async def test_upsert_keeps_created_at_and_sets_updated_at(backend: Backend) -> None:
    await backend.commit([Put(record("a"))], [])
    later = T0 + timedelta(hours=1)
    result = await backend.commit([Put(record("a", value="new", created_at=later))], [])
    stored = result.stored[0]
    assert stored.created_at == T0
    assert stored.updated_at == later
    assert stored.value == "new"
    assert await backend.get("ns", ALICE, "a") == stored


async def test_failed_commit_leaves_neither_state_nor_event(backend: Backend) -> None:
    first = await backend.commit([Put(record("a"))], [event("a")])
    duplicate_event = first.events[0].model_copy(update={"position": None})
    with pytest.raises(StorageError):
        await backend.commit([Put(record("b")), Delete("ns", ALICE, "a")], [duplicate_event])
    assert await backend.get("ns", ALICE, "b") is None
    assert await backend.get("ns", ALICE, "a") is not None
    assert await backend.events.count() == 1


async def test_a_large_commit_keeps_its_order_and_each_write_of_a_key(backend: Backend) -> None:
    # More records and events than one statement takes, across partitions, namespaces and
    # kinds of write, with a key written twice and a delete between two writes.
    keys = [f"k{n:04d}" for n in range(1200)]
    ops: list[Op] = [
        *(Put(record(k, ALICE if n % 3 else BOB)) for n, k in enumerate(keys)),
        Put(record("k0001", value="second")),
        Put(replace(record("other"), namespace="ns2")),
        Put(record("made"), if_absent=True),
        Delete("ns", BOB, "k0000"),
        Put(record("k0000", BOB, value="after delete")),
    ]
    events = [event(k) for k in keys]
    result = await backend.commit(ops, events)
    assert [(r.namespace, r.key) for r in result.stored] == [
        *(("ns", k) for k in keys),
        ("ns", "k0001"),
        ("ns2", "other"),
        ("ns", "made"),
        ("ns", "k0000"),
    ]
    assert [result.stored[1].value, result.stored[1200].value] == [{"v": "k0001"}, "second"]
    assert [e.event_id for e in result.events] == [e.event_id for e in events]
    assert [e.position for e in result.events] == list(range(1, 1201))
    assert [e.event_id for e in await backend.events.read()] == [e.event_id for e in events]
    assert result.deleted == 1
    stored = await backend.get("ns", ALICE, "k0001")
    assert stored is not None
    assert (stored.value, stored.version) == ("second", 2)
    again = await backend.get("ns", BOB, "k0000")
    assert again is not None
    assert (again.value, again.version) == ("after delete", 1)
    assert await backend.count(RecordQuery(namespace="ns", scope=ALICE)) == 801
    # A create that finds its key taken among many writes fails the whole commit.
    with pytest.raises(ConflictError):
        await backend.commit(
            [
                *(Put(record(f"new{n}"), if_absent=True) for n in range(600)),
                Put(record("k0002"), if_absent=True),
            ],
            [event("new")],
        )
    assert await backend.get("ns", ALICE, "new0") is None
    assert await backend.events.count() == 1200


async def test_delete_counts_only_records_that_existed(backend: Backend) -> None:
    await backend.commit([Put(record("a"))], [])
    result = await backend.commit([Delete("ns", ALICE, "a"), Delete("ns", ALICE, "zz")], [])
    assert result.deleted == 1
    assert await backend.get("ns", ALICE, "a") is None


async def test_partitions_and_namespaces_are_separate(backend: Backend) -> None:
    await backend.commit(
        [
            Put(record("k", ALICE)),
            Put(record("k", BOB)),
            Put(record("k", GLOBEX)),
            Put(replace(record("k"), namespace="other")),
        ],
        [],
    )
    assert (await backend.get("ns", BOB, "k")).scope == BOB  # type: ignore[union-attr]
    assert [r.scope for r in await backend.scan(RecordQuery("ns", ALICE))] == [ALICE]
    tenant_wide = ScopeFilter(Scope(tenant="acme"), ("tenant",))
    assert {r.scope for r in await backend.scan(RecordQuery("ns", tenant_wide))} == {ALICE, BOB}
    assert await backend.count(RecordQuery("ns", None)) == 3
    assert await backend.count(RecordQuery("other", None)) == 1


async def test_scan_filters(backend: Backend) -> None:
    now = T0 + timedelta(days=1)
    await backend.commit(
        [
            Put(
                record(
                    "user.city",
                    content_type="profile",
                    metadata={"src": "chat"},
                    text="user.city lisbon",
                )
            ),
            Put(record("user.pet", metadata={"src": "form"}, text="user.pet dog 100%")),
            Put(record("task", expires_at=T0 + timedelta(hours=1), text="task call mom")),
        ],
        [],
    )

    async def keys(**fields: object) -> list[str]:
        return [r.key for r in await backend.scan(RecordQuery("ns", ALICE, **fields))]  # type: ignore[arg-type]

    assert await keys() == ["task", "user.city", "user.pet"]
    assert await keys(prefix="user.") == ["user.city", "user.pet"]
    assert await keys(keys=("task", "user.pet", "nope")) == ["task", "user.pet"]
    assert await keys(keys=()) == []
    assert await keys(content_types=("profile",)) == ["user.city"]
    assert await keys(metadata={"src": "form"}) == ["user.pet"]
    assert await keys(text_any=("lisbon", "mom")) == ["task", "user.city"]
    assert await keys(text_any=("100%",)) == ["user.pet"]
    assert await keys(text_any=("0%_",)) == []
    assert await keys(alive_at=now) == ["user.city", "user.pet"]
    assert await keys(expired_at=now) == ["task"]
    assert await keys(limit=1, offset=1) == ["user.city"]
    assert await backend.count(RecordQuery("ns", ALICE, prefix="user.")) == 2
    assert await backend.keys(RecordQuery("ns", ALICE, prefix="user.")) == ["user.city", "user.pet"]
    assert await backend.keys(RecordQuery("ns", ALICE, alive_at=now, limit=1)) == ["user.city"]


async def test_rebuild_replaces_only_the_chosen_namespace_and_scope(backend: Backend) -> None:
    await backend.commit(
        [Put(record("old", ALICE)), Put(record("bob", BOB))], [event("x"), event("y", BOB)]
    )
    seen: list[str] = []

    def fold(events: Iterator[EventEnvelope]) -> list[Record]:
        seen.extend(e.payload["key"] for e in events)
        return [record("new", ALICE)]

    alice_only = ScopeFilter(ALICE)
    stored = await backend.rebuild("ns", alice_only, EventQuery(scope=ScopeFilter(ALICE)), fold)
    assert stored == 1
    assert seen == ["x"]
    assert [r.key for r in await backend.scan(RecordQuery("ns", ALICE))] == ["new"]
    assert [r.key for r in await backend.scan(RecordQuery("ns", BOB))] == ["bob"]


async def test_rebuild_that_fails_changes_nothing(backend: Backend) -> None:
    await backend.commit([Put(record("keep"))], [event("keep")])

    def broken(events: Iterator[EventEnvelope]) -> list[Record]:
        raise RuntimeError("fold failed")

    with pytest.raises(RuntimeError):
        await backend.rebuild("ns", None, EventQuery(), broken)
    assert await backend.get("ns", ALICE, "keep") is not None


async def test_event_store_reads_by_type_scope_provider_and_position(backend: Backend) -> None:
    appended = await backend.events.append([event("a"), event("b", BOB), event("c", GLOBEX)])
    other = MemoryWritten(key="d", value=1, value_type="int", provider_id="zz").to_envelope(
        scope=ALICE
    )
    await backend.events.append([other])
    assert [e.position for e in appended] == [1, 2, 3]
    assert await backend.events.last_position() == 4
    read = await backend.events.read()
    assert read[:3] == appended
    assert [e.payload["key"] for e in await backend.events.read(EventQuery(after=2))] == ["c", "d"]
    by_scope = EventQuery(scope=ScopeFilter(Scope(tenant="acme"), ("tenant",)))
    assert [e.payload["key"] for e in await backend.events.read(by_scope)] == ["a", "b", "d"]
    assert [e.payload["key"] for e in await backend.events.read(EventQuery(provider_id="zz"))] == [
        "d"
    ]
    assert await backend.events.read(EventQuery(event_types=("memory.deleted",))) == []
    assert await backend.events.count(EventQuery(event_types=("memory.written",))) == 4
    assert [e.payload["key"] for e in await backend.events.read(EventQuery(limit=2))] == ["a", "b"]


async def test_event_stream_pages_through_the_whole_log(backend: Backend) -> None:
    await backend.events.append([event(f"k{i}") for i in range(25)])
    streamed = [e.payload["key"] async for e in backend.events.stream(batch_size=7)]
    assert streamed == [f"k{i}" for i in range(25)]
    limited = [
        e.position async for e in backend.events.stream(EventQuery(after=3, limit=9), batch_size=4)
    ]
    assert limited == list(range(4, 13))


async def test_envelopes_round_trip_exactly(backend: Backend) -> None:
    original = event("a").model_copy(update={"payload": {"key": "a", "nested": {"x": [1, 2.5]}}})
    (stored,) = await backend.events.append([original])
    (read,) = await backend.events.read()
    assert read == stored
    assert read.model_copy(update={"position": None}) == original


async def test_stats_count_what_is_stored(backend: Backend) -> None:
    await backend.commit([Put(record("a")), Put(replace(record("b"), namespace="x"))], [event("a")])
    stats = await backend.stats()
    assert stats.records == 2
    assert stats.events == 1
    assert stats.records_by_namespace == {"ns": 1, "x": 1}


async def test_closed_backend_refuses_work(backend: Backend) -> None:
    from engramdb.core.errors import EngineClosedError

    await backend.close()
    with pytest.raises(EngineClosedError):
        await backend.get("ns", ALICE, "a")
    await backend.close()


async def test_text_search_ranks_within_the_partition_whatever_others_hold(
    backend: Backend,
) -> None:
    crowd = [Put(record(f"b{n}", BOB, text="apple apple apple pie")) for n in range(40)]
    mine = [
        Put(record("a1", ALICE, text="apple pie recipe")),
        Put(record("a2", ALICE, text="an apple a day")),
        Put(record("a3", ALICE, text="pears only")),
    ]
    await backend.commit([*crowd, *mine], [])
    hits = await backend.search.text(RecordQuery("ns", ALICE), '"apple" OR "pie"', 2)
    assert [r.key for r, _ in hits] == ["a1", "a2"]
    assert hits[0][1] > hits[1][1] > 0
    many = await backend.search.text(RecordQuery("ns", BOB), '"apple"', 5)
    assert len(many) == 5
    assert {r.scope for r, _ in many} == {BOB}
    # The same hits as ids, whichever way the backend found them.
    for scope, match, limit, found in (
        (ALICE, '"apple" OR "pie"', 2, hits),
        (BOB, '"apple"', 5, many),
    ):
        ids = await backend.search.text_ids(RecordQuery("ns", scope), match, limit)
        assert ids == [(r.id, score) for r, score in found]


async def test_document_frequencies_count_the_partitions_records_holding_each_word(
    backend: Backend,
) -> None:
    texts = ["apple pie", "apple tart", "pear tart", "plum"]
    await backend.commit(
        [Put(record(f"k{n}", ALICE if n % 2 else BOB, text=t)) for n, t in enumerate(texts)], []
    )
    words = ["apple", "tart", "plum", "kiwi"]
    # Each partition counts its own records only.
    assert await backend.search.document_frequencies("ns", ALICE, words) == {
        "apple": 1,
        "tart": 1,
        "plum": 1,
        "kiwi": 0,
    }
    assert await backend.search.document_frequencies("ns", BOB, words) == {
        "apple": 1,
        "tart": 1,
        "plum": 0,
        "kiwi": 0,
    }
    assert await backend.search.document_frequencies("other", BOB, words) == dict.fromkeys(words, 0)
    assert await backend.search.document_count("ns", ALICE) == 2
    assert await backend.search.document_count("ns", BOB) == 2
    assert await backend.search.document_count("ns", GLOBEX) == 0


async def test_vectors_are_counted_per_model_and_dropped_all_but_one(backend: Backend) -> None:
    stored = (await backend.commit([Put(record(k)) for k in "abcd"], [])).stored
    ids = [r.id for r in stored if r.id is not None]
    one, two = np.array([1.0, 0.0], "<f4").tobytes(), np.array([0.0, 1.0], "<f4").tobytes()
    assert await backend.search.vector_counts() == {}
    assert await backend.search.edge_vector_models() == set()
    await backend.search.put_vectors("old", [(ids[0], one), (ids[1], one)], [])
    await backend.search.put_vectors("new", [(ids[2], two), (ids[3], two)], [])
    assert await backend.search.vector_counts() == {"new": 2, "old": 2}
    # The oldest record keeps the old model's vector: a model change shows at the edges.
    assert await backend.search.edge_vector_models() == {"old", "new"}
    await backend.search.drop_vectors("ns", keep_model="new")
    assert await backend.search.vector_counts() == {"new": 2}
    assert await backend.search.edge_vector_models() == {"new"}
    query = RecordQuery("ns", ALICE)
    assert [r.key for r in await backend.search.unvectored(query, "new")] == ["a", "b"]
    await backend.search.drop_vectors("ns")
    assert await backend.search.vector_counts() == {}


async def test_redact_scope_blanks_every_event_of_those_scopes_only(backend: Backend) -> None:
    in_session = Scope(tenant="acme", user="alice", session="s1")
    traced = TurnTraced(
        prompt="where in Lisbon?", token_limit=10, tokens_used=0, items_used=0, ms=1.0
    )
    await backend.events.append(
        [event("a"), event("s", in_session), traced.to_envelope(scope=ALICE)]
    )
    await backend.events.append([event("b", BOB), event("g", GLOBEX)])
    alice = ScopeFilter(ALICE, ("tenant", "user"))
    result = await backend.commit([RedactScope(ALICE, ("tenant", "user"))], [event("after")])
    assert result.redacted == 3
    blanked = [e.payload for e in await backend.events.read(EventQuery(scope=alice))]
    assert blanked[:3] == [
        {"key": "a", "provider_id": "ns", "redacted": 1},
        {"key": "s", "provider_id": "ns", "redacted": 1},
        {"key": None, "provider_id": "", "redacted": 1},
    ]
    assert blanked[3]["key"] == "after"  # appended by the same commit, after the blanking
    others = await backend.events.read(EventQuery(after=3, limit=2))
    assert [e.payload["value"] for e in others] == ["b", "g"]
    again = await backend.commit([RedactScope(ALICE, ("tenant", "user"))], [])
    assert again.redacted == 1  # only the event appended since


async def test_a_create_fails_on_a_live_key_and_writes_nothing(backend: Backend) -> None:
    made = await backend.commit([Put(record("a"), if_absent=True)], [event("a")])
    assert [r.key for r in made.stored] == ["a"]
    with pytest.raises(ConflictError) as raised:
        await backend.commit(
            [Put(record("b")), Put(record("a", value="again"), if_absent=True)], [event("b")]
        )
    assert raised.value.details == {"namespace": "ns", "key": "a"}
    assert await backend.get("ns", ALICE, "b") is None
    assert (await backend.get("ns", ALICE, "a")) == made.stored[0]
    assert await backend.events.count() == 1
    # Other partitions are other keys.
    await backend.commit([Put(record("a", BOB), if_absent=True)], [])


async def test_a_create_replaces_an_expired_record_as_new(backend: Backend) -> None:
    await backend.commit([Put(record("a", ttl_ms=1000, expires_at=T0 + timedelta(seconds=1)))], [])
    later = T0 + timedelta(hours=1)
    fresh = record("a", value="new", created_at=later)
    (stored,) = (await backend.commit([Put(fresh, if_absent=True)], [])).stored
    assert (stored.value, stored.created_at, stored.updated_at) == ("new", later, None)
    assert (stored.ttl_ms, stored.expires_at) == (None, None)


async def test_of_concurrent_creates_of_one_key_one_wins(backend: Backend) -> None:
    attempts = [
        backend.commit([Put(record("a", value=i), if_absent=True)], [event("a")]) for i in range(6)
    ]
    results = await asyncio.gather(*attempts, return_exceptions=True)
    won = [r for r in results if not isinstance(r, BaseException)]
    assert len(won) == 1
    assert all(isinstance(r, ConflictError) for r in results if r not in won)
    assert await backend.events.count() == 1
    assert (await backend.get("ns", ALICE, "a")) == won[0].stored[0]


async def test_redact_scope_leaves_the_kept_providers_alone(backend: Backend) -> None:
    shared = MemoryWritten(key="s", value="x", value_type="str", provider_id="zz").to_envelope(
        scope=ALICE
    )
    await backend.events.append([event("a"), shared])
    result = await backend.commit([RedactScope(ALICE, ("tenant", "user"), ("zz", "yy"))], [])
    assert result.redacted == 1
    payloads = [e.payload for e in await backend.events.read()]
    assert payloads[0] == {"key": "a", "provider_id": "ns", "redacted": 1}
    assert payloads[1]["value"] == "x"
