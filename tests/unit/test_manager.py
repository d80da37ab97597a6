"""``MemoryManager``: routing, registration through events, partial failure, timeouts, merge."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb.core.errors import (
    DuplicateProviderError,
    InvalidValueError,
    NoProviderForTierError,
    PartialRecallWarning,
    ProviderNotFoundError,
    ProviderReadOnlyError,
    RecallError,
    RecallQueryError,
    StorageError,
    ValidationError,
)
from engramdb.core.scope import Scope
from engramdb.core.types import (
    MemoryEntry,
    MemoryTier,
    ProviderCapabilities,
    RecallQuery,
    RecallResult,
    RecallScope,
)
from engramdb.engine import Engine
from engramdb.manager.manager import MemoryManager
from engramdb.manager.registry import ProviderRegistry
from engramdb.providers.base import MemoryProvider
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.working import WorkingMemoryProvider, WorkingStore
from engramdb.storage.backend import EventQuery

REGISTERED = ("memory.provider.registered",)
BUILT_IN = (
    "working",
    "event_sourced",
    "episodic",
    "semantic",
    "semantic_public",
    "procedural",
    "conversation",
    "workspace",
    "graph",
)


class ScriptedProvider(MemoryProvider):
    """A search-only test provider whose results, delay and failure are set by the test."""

    def __init__(
        self,
        provider_id: str,
        tier: MemoryTier,
        results: dict[str, float] | None = None,
        *,
        delay: float = 0.0,
        error: Exception | None = None,
        read_only: bool = False,
    ) -> None:
        self.provider_id, self.tier, self.results = provider_id, tier, results or {}
        self.delay, self.error, self.read_only = delay, error, read_only
        self.writes: list[str] = []

    def capabilities(self) -> ProviderCapabilities:
        return ProviderCapabilities(
            provider_id=self.provider_id,
            tier=self.tier,
            supports_search=True,
            read_only=self.read_only,
        )

    async def write(self, key: str, value: Any, **options: Any) -> MemoryEntry:
        self.writes.append(key)
        return MemoryEntry(key=key, value=value, provider_id=self.provider_id)

    async def read(self, key: str) -> MemoryEntry | None:
        return None

    async def delete(self, key: str) -> bool:
        return False

    async def search(self, query: str, **options: Any) -> list[RecallResult]:
        await asyncio.sleep(self.delay)
        if self.error is not None:
            raise self.error
        return [
            RecallResult(
                entry=MemoryEntry(key=k, value=k, provider_id=self.provider_id),
                score=s,
                provider_id=self.provider_id,
                tier=self.tier,
            )
            for k, s in self.results.items()
        ]

    async def list_keys(self, **options: Any) -> list[str]:
        return sorted(self.results)


def query(text: str = "q", **fields: Any) -> RecallQuery:
    return RecallQuery(query=text, **fields)


async def test_store_routes_by_tier_and_by_provider_id() -> None:
    working = WorkingMemoryProvider()
    other = ScriptedProvider("other", MemoryTier.PERSISTENT)
    manager = MemoryManager([working, other])
    entry = await manager.store("a", 1)
    assert entry.provider_id == "working"
    entry = await manager.store("b", 2, tier=MemoryTier.PERSISTENT)
    assert entry.provider_id == "other"
    await manager.store("c", 3, provider_id="other")
    assert other.writes == ["b", "c"]
    with pytest.raises(NoProviderForTierError):
        await manager.store("d", 4, tier=MemoryTier.INDEXED)
    with pytest.raises(ProviderNotFoundError, match="registered: other, working"):
        await manager.store("e", 5, provider_id="nope")


async def test_read_only_providers_refuse_writes_and_are_skipped_by_routing() -> None:
    frozen = ScriptedProvider("frozen", MemoryTier.PERSISTENT, read_only=True)
    writable = ScriptedProvider("writable", MemoryTier.PERSISTENT)
    manager = MemoryManager([frozen, writable])
    with pytest.raises(ProviderReadOnlyError):
        await manager.store("k", 1, provider_id="frozen")
    assert (await manager.store("k", 1, tier=MemoryTier.PERSISTENT)).provider_id == "writable"
    assert frozen.writes == []


async def test_read_asks_tiers_in_order(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice", session="s-1")
    await mem.manager.store("k", "durable", tier=MemoryTier.PERSISTENT)
    assert (await mem.manager.read("k")).value == "durable"  # type: ignore[union-attr]
    await mem.manager.store("k", "scratch", tier=MemoryTier.WORKING)
    assert (await mem.manager.read("k")).value == "scratch"  # type: ignore[union-attr]
    assert (await mem.manager.read("k", provider_id="event_sourced")).value == "durable"  # type: ignore[union-attr]
    assert await mem.manager.delete("k") == ["working", "event_sourced"]
    assert await mem.manager.read("k") is None


async def test_registration_is_an_event_and_the_registry_is_its_projection(db_path: Path) -> None:
    async with engramdb.open(db_path) as engine:
        registered = await engine.events.read(EventQuery(event_types=REGISTERED))
        assert [e.payload["provider_id"] for e in registered] == [*BUILT_IN]
        mem = engine.scope(tenant="acme")
        extra = ScriptedProvider("extra", MemoryTier.INDEXED)
        await mem.manager.register_provider(extra)
        await mem.manager.register_provider(extra)
        # Other scopes register the same built-ins again: unchanged, so no new events.
        await engine.scope(tenant="other").manager.providers()
        assert await engine.events.count(EventQuery(event_types=REGISTERED)) == len(BUILT_IN) + 1
    async with engramdb.open(db_path) as engine:
        # Reopening registers nothing new, and the registry still knows the extra provider
        # from the log, although no instance of it runs in this engine.
        assert await engine.events.count(EventQuery(event_types=REGISTERED)) == len(BUILT_IN) + 1
        known = engine.registry.all()
        assert sorted(known) == sorted([*BUILT_IN, "extra"])
        assert known["extra"].tier is MemoryTier.INDEXED
        with pytest.raises(ProviderNotFoundError):
            await engine.scope().manager.get_provider("extra")


async def test_changed_capabilities_are_registered_again(engine: Engine) -> None:
    registry = ProviderRegistry(engine.events)
    await registry.refresh()
    caps = ProviderCapabilities(provider_id="p", tier=MemoryTier.PERSISTENT)
    assert await registry.register(caps) is True
    assert await registry.register(caps) is False
    assert await registry.register(caps.model_copy(update={"read_only": True})) is True
    fresh = ProviderRegistry(engine.events)
    await fresh.refresh()
    assert fresh.get("p") == caps.model_copy(update={"read_only": True})


async def test_two_instances_under_one_id_are_refused() -> None:
    manager = MemoryManager()
    first = WorkingMemoryProvider()
    await manager.register_provider(first)
    await manager.register_provider(first)  # the same instance again is fine
    with pytest.raises(DuplicateProviderError):
        await manager.register_provider(WorkingMemoryProvider())


async def test_recall_tolerates_a_failing_provider() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("good", MemoryTier.PERSISTENT, {"a": 0.9}),
            ScriptedProvider("bad", MemoryTier.INDEXED, error=RuntimeError("index offline")),
        ]
    )
    report = await manager.recall_report(query())
    assert [r.entry.key for r in report.results] == ["a"]
    assert report.asked == ["good", "bad"]
    assert [(f.provider_id, f.error, f.message) for f in report.failures] == [
        ("bad", "RuntimeError", "index offline")
    ]


async def test_recall_raises_only_when_every_provider_fails() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("x", MemoryTier.PERSISTENT, error=RuntimeError("down")),
            ScriptedProvider("y", MemoryTier.INDEXED, error=ValueError("broken")),
        ]
    )
    with pytest.raises(RecallError) as raised:
        await manager.recall(query())
    assert [f["provider_id"] for f in raised.value.details["failures"]] == ["x", "y"]
    assert await MemoryManager().recall(query()) == []


async def test_a_query_every_provider_refuses_is_the_callers_error() -> None:
    refused = InvalidValueError("metadata filter is not JSON-representable")
    manager = MemoryManager(
        [
            ScriptedProvider("x", MemoryTier.PERSISTENT, error=refused),
            ScriptedProvider("y", MemoryTier.INDEXED, error=refused),
        ]
    )
    with pytest.raises(RecallQueryError) as raised:
        await manager.recall(query())
    assert isinstance(raised.value, ValidationError)
    assert [(f["provider_id"], f["cause"]) for f in raised.value.details["failures"]] == [
        ("x", "request"),
        ("y", "request"),
    ]


async def test_a_recall_that_fails_partly_on_the_system_is_a_runtime_error() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("x", MemoryTier.PERSISTENT, error=InvalidValueError("bad filter")),
            ScriptedProvider("y", MemoryTier.INDEXED, error=StorageError("disk full")),
        ]
    )
    with pytest.raises(RecallError) as raised:
        await manager.recall(query())
    assert [f["cause"] for f in raised.value.details["failures"]] == ["request", "runtime"]


async def test_a_partial_failure_is_reported_not_hidden() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("good", MemoryTier.PERSISTENT),
            ScriptedProvider("bad", MemoryTier.INDEXED, error=InvalidValueError("bad filter")),
        ]
    )
    report = await manager.recall_report(query())
    assert (report.results, [(f.provider_id, f.cause) for f in report.failures]) == (
        [],
        [("bad", "request")],
    )
    with pytest.warns(PartialRecallWarning, match=r"bad \(InvalidValueError: bad filter\)"):
        assert await manager.recall(query()) == []


@pytest.mark.parametrize(
    "filters",
    [{"tag": float("nan")}, {"tag": [float("inf")]}, {"tag": {"x": -float("inf")}}, {'a"b': 1}],
)
async def test_filters_no_backend_can_evaluate_are_refused_before_any_provider(
    engine: Engine, filters: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError, match="metadata_filters"):
        RecallQuery(query="q", metadata_filters=filters)
    await engine.scope().persistent.write("k", "kept", metadata={"tag": 1})
    hits = await engine.scope().manager.recall(
        RecallQuery(query="kept", metadata_filters={"tag": 1})
    )
    assert [r.entry.key for r in hits] == ["k"]


async def test_slow_provider_times_out_without_holding_the_others_back() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("fast", MemoryTier.PERSISTENT, {"a": 0.5}),
            ScriptedProvider("slow", MemoryTier.INDEXED, {"b": 1.0}, delay=5.0),
        ],
        recall_timeout_s=0.05,
    )
    loop = asyncio.get_running_loop()
    started = loop.time()
    report = await manager.recall_report(query())
    assert loop.time() - started < 2.0
    assert [r.entry.key for r in report.results] == ["a"]
    assert [(f.provider_id, f.error) for f in report.failures] == [("slow", "TimeoutError")]
    report = await manager.recall_report(query(timeout_s=0.01))
    assert [f.provider_id for f in report.failures] == ["slow"]


async def test_recall_merges_by_relevance_and_prefers_the_higher_tier_on_duplicates() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("indexed", MemoryTier.INDEXED, {"shared": 0.95, "deep": 0.9}),
            ScriptedProvider("durable", MemoryTier.PERSISTENT, {"shared": 0.3, "low": 0.1}),
        ]
    )
    results = await manager.recall(query())
    assert [(r.entry.key, r.provider_id, r.score) for r in results] == [
        ("shared", "durable", 0.95),
        ("deep", "indexed", 0.9),
        ("low", "durable", 0.1),
    ]


async def test_scores_are_normalised_and_limit_applies() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("raw", MemoryTier.PERSISTENT, {"x": 12.0, "y": 7.0, "z": 2.0}),
        ]
    )
    results = await manager.recall(query(limit=2))
    assert [(r.entry.key, r.score) for r in results] == [("x", 1.0), ("y", 0.5)]


async def test_scope_and_provider_filters_choose_who_is_asked() -> None:
    manager = MemoryManager(
        [
            ScriptedProvider("w", MemoryTier.WORKING, {"a": 0.1}),
            ScriptedProvider("p", MemoryTier.PERSISTENT, {"b": 0.2}),
        ]
    )
    assert (await manager.recall_report(query(scope=RecallScope.WORKING))).asked == ["w"]
    assert (await manager.recall_report(query(provider_ids=["p"]))).asked == ["p"]
    with pytest.raises(ProviderNotFoundError):
        await manager.recall(query(provider_ids=["nope"]))


async def test_working_memory_of_the_current_session_ranks_first(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice", session="s-1")
    await mem.persistent.write("trip", "flight to Lisbon on Friday, Lisbon hotel booked")
    for n in range(5):  # BM25 needs a corpus in which Lisbon is rare
        await mem.persistent.write(f"other{n}", f"unrelated note number {n}")
    await mem.working_provider.write("note", "Lisbon?")
    await mem.working_provider.write("aside", "Lisbon hotel Lisbon hotel")
    results = await mem.manager.recall(query("Lisbon hotel"))
    # Both working entries are of this session: they lead, by score, before everything else.
    assert [r.entry.key for r in results][:3] == ["aside", "note", "trip"]
    elsewhere = engine.scope(tenant="acme", user="alice", session="s-2")
    others = await elsewhere.manager.recall(query("Lisbon hotel"))
    assert others[0].entry.key == "trip"


async def test_registered_tier_routes_even_when_a_provider_instance_differs(
    engine: Engine,
) -> None:
    store = WorkingStore()
    manager = MemoryManager(
        [
            WorkingMemoryProvider(store, Scope(tenant="t")),
            EventSourcedProvider(engine.backend, Scope(tenant="t")),
        ],
        registry=engine.registry,
    )
    caps = await manager.providers()
    assert {pid: c.tier for pid, c in caps.items()} == {
        "working": MemoryTier.WORKING,
        "event_sourced": MemoryTier.PERSISTENT,
    }
    assert await manager.list_keys() == []
    await manager.store("k", "v", tier=MemoryTier.PERSISTENT)
    assert await manager.list_keys(tier=MemoryTier.PERSISTENT) == ["k"]
    assert await manager.list_keys(provider_id="working") == []
