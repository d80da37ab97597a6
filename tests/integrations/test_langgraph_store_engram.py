"""What ``EngramStore`` adds to LangGraph's store contract, on both backends: TTLs (a default,
expiry, refresh on read, sweeping), synchronous calls from worker threads and on the blocking
engine of ``open_sync``, events for every write, a rebuild from the log, scope isolation,
typed errors that write nothing; and the pure key encoding and matching rules."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import HumanMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore, GetOp, Item, PutOp

import engramdb
from engramdb.core.errors import InvalidKeyError, UsageError, ValidationError
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.integrations.langgraph import EngramStore
from engramdb.integrations.langgraph.keys import namespace_prefix, record_key, split_record_key
from engramdb.integrations.langgraph.matching import matches, namespace_matches
from engramdb.orchestrator.store_items import NAMESPACE
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import Record
from tests.integrations.langgraph_fixtures import CharacterEmbeddings, character_store


async def stored(store: EngramStore, namespace: tuple[str, ...], key: str) -> Record | None:
    return await store.engine.backend.get(NAMESPACE, store.partition, record_key(namespace, key))


async def test_default_ttl_and_per_item_ttl(any_engine: Engine) -> None:
    store = EngramStore(any_engine, tenant="acme", ttl={"default_ttl": 5.0})
    await store.aput(("a",), "default", {"n": 1})
    await store.aput(("a",), "own", {"n": 2}, ttl=1.5)
    await store.aput(("a",), "forever", {"n": 3}, ttl=None)
    assert [(await stored(store, ("a",), k)).ttl_ms for k in ("default", "own", "forever")] == [  # type: ignore[union-attr]
        300_000,
        90_000,
        None,
    ]
    await store.aput(("a",), "brief", {"n": 4}, ttl=0.001)  # 60 ms
    await asyncio.sleep(0.3)
    assert await store.aget(("a",), "brief") is None
    assert [i.key for i in await store.asearch(("a",))] == ["default", "forever", "own"]
    assert await any_engine.sweep_expired() == 1
    assert await stored(store, ("a",), "brief") is None


async def test_reads_refresh_the_ttl_unless_told_not_to(any_engine: Engine) -> None:
    store = character_store(any_engine)
    await store.aput(("a",), "k", {"text": "remember me"}, ttl=10.0)
    before = await stored(store, ("a",), "k")
    assert before is not None
    assert before.expires_at is not None
    item = await store.aget(("a",), "k", refresh_ttl=False)
    assert (await stored(store, ("a",), "k")) == before
    await asyncio.sleep(0.01)
    refreshed_item = await store.aget(("a",), "k")
    after_get = await stored(store, ("a",), "k")
    assert after_get is not None
    assert after_get.expires_at is not None
    assert after_get.expires_at > before.expires_at
    # the item itself did not change: same value, same times
    assert item is not None
    assert refreshed_item is not None
    assert (refreshed_item.value, refreshed_item.updated_at) == (item.value, item.updated_at)
    await asyncio.sleep(0.01)
    [hit] = await store.asearch(("a",), query="remember")
    after_search = await stored(store, ("a",), "k")
    assert after_search is not None
    assert after_search.expires_at is not None
    assert after_search.expires_at > after_get.expires_at
    assert hit.score is not None
    assert hit.updated_at == item.updated_at


async def test_refresh_on_read_off_by_config_keeps_engram_vectors(any_engine: Engine) -> None:
    store = EngramStore(
        any_engine, tenant="acme", ttl={"default_ttl": 10.0, "refresh_on_read": False}
    )
    await store.aput(("a",), "k", {"text": "Alice lives in Lisbon"})
    before = await stored(store, ("a",), "k")
    await store.aget(("a",), "k")
    assert await stored(store, ("a",), "k") == before
    await store.aget(("a",), "k", refresh_ttl=True)
    after = await stored(store, ("a",), "k")
    assert after is not None
    assert before is not None
    assert after.expires_at != before.expires_at
    model = any_engine.indexer.model
    assert after.id is not None
    vectors = await any_engine.backend.search.vector_sets(store._query(ids=(after.id,)), model)
    assert after.id in vectors  # the refresh kept the item's vector
    [hit] = await store.asearch(("a",), query="where does Alice live")
    assert hit.score is not None
    assert hit.score > 0


async def test_synchronous_calls_from_a_worker_thread(any_engine: Engine) -> None:
    store = EngramStore(any_engine, tenant="acme", user="alice")

    def in_a_node() -> list[str]:
        store.put(("users", "alice"), "city", {"text": "Lisbon"})
        store.put(("users", "alice"), "food", {"text": "Thai curry"})
        store.delete(("users", "alice"), "food")
        got = store.get(("users", "alice"), "city")
        assert got is not None
        assert got.value == {"text": "Lisbon"}
        found = store.search(("users",), query="Lisbon")
        return [i.key for i in found] + [str(ns) for ns in store.list_namespaces()]

    assert await asyncio.to_thread(in_a_node) == ["city", "('users', 'alice')"]
    with pytest.raises(UsageError, match="async methods"):
        store.get(("users", "alice"), "city")  # on the loop's own thread
    outside = await asyncio.to_thread(EngramStore, any_engine)  # no loop to run on
    with pytest.raises(UsageError, match="event loop"):
        await asyncio.to_thread(outside.get, ("users",), "city")


def whole(item: Item) -> tuple[object, ...]:
    return (item.namespace, item.key, item.value, item.created_at, item.updated_at)


async def test_every_write_is_an_event_and_a_rebuild_restores_the_store(
    any_engine: Engine,
) -> None:
    store = EngramStore(any_engine, tenant="acme", user="alice")
    await store.abatch(
        [
            PutOp(("docs", "a"), "one", {"text": "first"}),
            PutOp(("docs", "b"), "two", {"text": "second"}, index=False),
            PutOp(("docs", "b"), "three", {"text": "third"}, ttl=60.0),
        ]
    )
    await store.aput(("docs", "a"), "one", {"text": "first, again"})
    await store.adelete(("docs", "b"), "two")
    await store.adelete(("docs", "b"), "never-there")
    events = await any_engine.events.read(EventQuery(provider_id=NAMESPACE))
    kinds = [e.event_type for e in events if e.event_type != "memory.indexed"]
    assert kinds == ["memory.written"] * 4 + ["memory.deleted"]
    assert all(e.scope.tenant == "acme" and e.scope.user == "alice" for e in events)
    before = [
        (i.namespace, i.key, i.value, i.created_at, i.updated_at) for i in await store.asearch(())
    ]
    ranked = [(i.key, i.score) for i in await store.asearch(("docs",), query="first")]
    report = await any_engine.rebuild()
    assert report.records[NAMESPACE] == 2
    after = [
        (i.namespace, i.key, i.value, i.created_at, i.updated_at) for i in await store.asearch(())
    ]
    assert after == before
    await any_engine.reindex()
    assert [(i.key, i.score) for i in await store.asearch(("docs",), query="first")] == ranked


async def test_scopes_see_nothing_of_each_other(any_engine: Engine) -> None:
    alice = EngramStore(any_engine, tenant="acme", user="alice")
    bob = EngramStore(any_engine, tenant="acme", user="bob")
    globex = EngramStore(any_engine, tenant="globex", user="alice")
    await alice.aput(("prefs",), "theme", {"text": "dark"})
    for other in (bob, globex):
        assert await other.aget(("prefs",), "theme") is None
        assert await other.asearch(("prefs",), query="dark") == []
        assert await other.alist_namespaces() == []
        await other.adelete(("prefs",), "theme")
    assert await alice.aget(("prefs",), "theme") is not None


async def test_bad_input_is_a_typed_error_and_writes_nothing(any_engine: Engine) -> None:
    store = EngramStore(any_engine, tenant="acme")
    events = await any_engine.events.count()
    good = PutOp(("a",), "fine", {"text": "ok"})
    for bad in [
        PutOp(("a",), "k" * 600, {"text": "key too long"}),
        PutOp(("a",), "k", ["not", "a", "dict"]),  # type: ignore[arg-type]
        PutOp(("a",), "k", {"n": float("nan")}),
        PutOp(("a",), "k", {"n": 1}, ttl=-1.0),
    ]:
        with pytest.raises(ValidationError):
            await store.abatch([good, bad])
    with pytest.raises(InvalidKeyError):
        await store.aput(("a",), "k" * 600, {"n": 1})
    with pytest.raises(ValidationError):
        await store.aput(("a", "lone \udc80 surrogate"), "k", {"n": 1})
    with pytest.raises(InvalidKeyError):
        await store.aget(("a",), "lone \udc80 surrogate")
    with pytest.raises(ValidationError):
        await store.aput(("a",), "k", {"text": "a NUL \x00 inside"})
    with pytest.raises(ValidationError, match="operator"):
        await store.asearch(("a",), filter={"n": {"$regex": "x"}})
    with pytest.raises(ValidationError):
        await store.alist_namespaces(max_depth=0)
    with pytest.raises(ValidationError):
        await store.asearch(("a",), limit=-1)
    own = EngramStore(
        any_engine, tenant="acme", index={"dims": 500, "embed": CharacterEmbeddings(7)}
    )
    with pytest.raises(ValidationError, match="dims"):
        await own.aput(("a",), "k", {"text": "vector of 500"})
    assert await any_engine.events.count() == events
    assert await store.aget(("a",), "fine") is None


async def test_open_a_database_as_a_store(tmp_path: object) -> None:
    path = f"{tmp_path}/store.db"
    config = EngineConfig(embedder=None)  # full text alone
    async with EngramStore.open(path, tenant="acme", user="alice", config=config) as store:
        await store.aput(("notes",), "n1", {"text": "buy oat milk"}, index=["text"])
        await store.aput(("notes",), "n2", {"text": "call the dentist"})
    async with EngramStore.open(path, tenant="acme", user="alice", config=config) as store:
        [hit, other] = await store.asearch(("notes",), query="milk")
        assert (hit.key, other.key, other.score) == ("n1", "n2", None)
        assert hit.score is not None
        assert (await store.abatch([GetOp(("notes",), "n2")]))[0] is not None


labels = st.text(min_size=1, max_size=12).filter(lambda s: "." not in s and "\x00" not in s)


@given(st.lists(labels, min_size=1, max_size=4), st.text(max_size=12))
def test_record_keys_round_trip_and_nest_by_prefix(namespace: list[str], key: str) -> None:
    encoded = record_key(namespace, key)
    assert split_record_key(encoded) == (tuple(namespace), key)
    for depth in range(len(namespace) + 1):
        assert encoded.startswith(namespace_prefix(namespace[:depth]))
    assert not record_key([*namespace[:-1], namespace[-1] + "x"], key).startswith(
        namespace_prefix(namespace)
    )


def test_matching_rules() -> None:
    value = {"n": 3, "s": "x", "nested": {"a": [1, 2]}, "flag": True}
    assert matches(value, {"nested": {"a": [1, 2]}, "n": {"$gte": 3, "$lt": 4}})
    assert not matches(value, {"nested": {"a": [1]}})
    assert not matches(value, {"s": {"$gt": 1}})  # ordering a string holds for nothing
    assert not matches(value, {"flag": {"$gt": 0}})
    assert matches(value, {"missing": {"$ne": 1}})
    assert namespace_matches(("a", "b", "c"), "prefix", ("a", "*"))
    assert namespace_matches(("a", "b", "c"), "suffix", ("*", "c"))
    assert not namespace_matches(("a",), "prefix", ("a", "b"))


async def test_the_ttl_sweeper_removes_expired_items(any_engine: Engine) -> None:
    store = EngramStore(any_engine, tenant="acme", ttl={"sweep_interval_minutes": 1})
    await store.aput(("a",), "brief", {"n": 1}, ttl=0.001)
    await store.aput(("a",), "kept", {"n": 2})
    await asyncio.sleep(0.2)
    assert await stored(store, ("a",), "brief") is not None  # expired, not yet swept
    assert await asyncio.to_thread(store.sweep_ttl) == 1
    assert await stored(store, ("a",), "brief") is None
    await store.aput(("a",), "brief", {"n": 1}, ttl=0.001)
    await store.start_ttl_sweeper(0.002)  # every 120 ms
    for _ in range(50):
        if await stored(store, ("a",), "brief") is None:
            break
        await asyncio.sleep(0.1)
    assert await store.stop_ttl_sweeper()
    assert await stored(store, ("a",), "brief") is None
    assert await stored(store, ("a",), "kept") is not None
    expired = await any_engine.events.read(EventQuery(event_types=("memory.expired",)))
    assert len(expired) == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_blocking_engine_serves_a_synchronous_graph(
    backend: str, tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    from tests.postgres.database import empty_database

    target = str(tmp_path / "engram.db") if backend == "sqlite" else empty_database()

    def note(state: MessagesState, *, store: BaseStore) -> dict[str, Any]:
        said = str(state["messages"][-1].content)
        store.put(("notes",), str(len(store.search(("notes",)))), {"text": said})
        return {}

    graph = StateGraph(MessagesState).add_node(note).add_edge(START, "note")
    with engramdb.open_sync(target, config=EngineConfig(embedder=embedder)) as engram:
        store = EngramStore(engram, tenant="acme", user="alice")
        agent = graph.compile(store=store)
        for said in ["I moved to Lisbon", "I love Thai curry"]:
            agent.invoke({"messages": [HumanMessage(said)]})
        assert [i.value["text"] for i in store.search(("notes",), query="where do I live?")][
            :1
        ] == ["I moved to Lisbon"]
        assert store.list_namespaces() == [("notes",)]
        store.delete(("notes",), "0")
        assert store.get(("notes",), "0") is None
