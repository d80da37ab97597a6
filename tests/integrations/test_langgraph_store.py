"""LangGraph's own store tests (libs/checkpoint/tests/test_store.py and the checks its
PostgreSQL and SQLite stores share), rewritten for ``EngramStore`` and run on both Engram
backends: namespace listing, namespace validation, batches, filters, vector search."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchOp,
)

from engramdb.engine import Engine
from engramdb.integrations.langgraph import EngramStore
from tests.integrations.langgraph_fixtures import character_store


@pytest.fixture
def store(any_engine: Engine) -> EngramStore:
    return EngramStore(any_engine, tenant="acme", user="alice")


@pytest.fixture
def vector_store(any_engine: Engine) -> EngramStore:
    return character_store(any_engine)


async def fill(store: EngramStore, namespaces: list[tuple[str, ...]]) -> None:
    for i, namespace in enumerate(namespaces):
        await store.aput(namespace, f"id_{i}", {"data": f"value_{i:02d}"})


async def test_list_namespaces_by_prefix_suffix_depth_and_page(store: EngramStore) -> None:
    await fill(
        store,
        [
            ("a", "b", "c"),
            ("a", "b", "d", "e"),
            ("a", "b", "d", "i"),
            ("a", "b", "f"),
            ("a", "c", "f"),
            ("b", "a", "f"),
            ("users", "123"),
            ("users", "456", "settings"),
            ("admin", "users", "789"),
        ],
    )
    below_ab = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f")]
    assert await store.alist_namespaces(prefix=("a", "b")) == below_ab
    assert await store.alist_namespaces(suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert await store.alist_namespaces(prefix=("a",), suffix=("f",)) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert await store.alist_namespaces(prefix=("a", "b"), max_depth=3) == [
        ("a", "b", "c"),
        ("a", "b", "d"),
        ("a", "b", "f"),
    ]
    assert await store.alist_namespaces(prefix=("a", "b"), limit=2) == below_ab[:2]
    assert await store.alist_namespaces(prefix=("a", "b"), offset=2) == below_ab[2:]
    assert await store.alist_namespaces(prefix=("a", "*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
    ]
    assert await store.alist_namespaces(suffix=("*", "f")) == [
        ("a", "b", "f"),
        ("a", "c", "f"),
        ("b", "a", "f"),
    ]
    assert await store.alist_namespaces(prefix=("nonexistent",)) == []
    assert await store.alist_namespaces(prefix=("users", "123")) == [("users", "123")]


async def test_list_namespaces_with_wildcards(store: EngramStore) -> None:
    await fill(
        store,
        [
            ("users", "123"),
            ("users", "456"),
            ("users", "789", "settings"),
            ("admin", "users", "789"),
            ("guests", "123"),
            ("guests", "456", "preferences"),
        ],
    )
    assert await store.alist_namespaces(prefix=("users", "*")) == [
        ("users", "123"),
        ("users", "456"),
        ("users", "789", "settings"),
    ]
    assert await store.alist_namespaces(suffix=("*", "preferences")) == [
        ("guests", "456", "preferences")
    ]
    assert await store.alist_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    await store.aput(("admin", "users", "settings", "789"), "foo", {"data": "some_val"})
    assert await store.alist_namespaces(prefix=("*", "users"), suffix=("settings", "*")) == [
        ("admin", "users", "settings", "789")
    ]


async def test_list_namespaces_pagination(store: EngramStore) -> None:
    await fill(store, [("namespace", f"sub_{i:02d}") for i in range(20)])
    for offset in (0, 5, 15):
        page = await store.alist_namespaces(prefix=("namespace",), limit=5, offset=offset)
        assert page == [("namespace", f"sub_{i:02d}") for i in range(offset, offset + 5)]


async def test_list_namespaces_max_depth_and_no_conditions(store: EngramStore) -> None:
    assert await store.alist_namespaces() == []
    namespaces = [("a", "b", "c", "d"), ("a", "b", "c", "e"), ("a", "b", "f"), ("a", "g")]
    await fill(store, [*namespaces, ("h", "i", "j", "k")])
    assert await store.alist_namespaces(max_depth=2) == [("a", "b"), ("a", "g"), ("h", "i")]
    assert await store.alist_namespaces() == sorted([*namespaces, ("h", "i", "j", "k")])


async def test_namespace_rules(store: EngramStore) -> None:
    doc = {"foo": "bar"}
    for bad in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
        with pytest.raises(InvalidNamespaceError):
            await store.aput(bad, "foo", doc)
        with pytest.raises(InvalidNamespaceError):
            await asyncio.to_thread(store.put, bad, "foo", doc)
    bad_ops: list[Op] = [PutOp((), "k", doc), PutOp(("a.b",), "k", doc), SearchOp(("x", ""))]
    for bad_op in bad_ops:
        with pytest.raises(InvalidNamespaceError):
            await store.abatch([bad_op])
    # "langgraph" is only reserved as the root label, and only by the convenience methods.
    for namespace in [("foo", "langgraph", "foo"), ("langgraph", "foo")]:
        await store.abatch([PutOp(namespace, "bar", doc)])
        assert (got := await store.aget(namespace, "bar")) is not None
        assert got.value == doc
        assert (await store.asearch(namespace))[0].value == doc
        await store.adelete(namespace, "bar")
        assert await store.aget(namespace, "bar") is None
    assert await store.alist_namespaces() == []


async def test_basic_put_get_update_delete(store: EngramStore) -> None:
    namespace = ("test", "documents")
    assert await store.aget(namespace, "doc1") is None
    await store.aput(namespace, "doc1", {"title": "Test Document", "content": "Hello World"})
    first = await store.aget(namespace, "doc1")
    assert first is not None
    assert (first.namespace, first.key) == (namespace, "doc1")
    assert first.value == {"title": "Test Document", "content": "Hello World"}
    assert first.created_at == first.updated_at
    await store.aput(namespace, "doc1", {"title": "Updated", "content": "Hello again"})
    second = await store.aget(namespace, "doc1")
    assert second is not None
    assert second.value["title"] == "Updated"
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    assert await store.aget(("test",), "doc1") is None  # another namespace
    await store.adelete(namespace, "doc1")
    assert await store.aget(namespace, "doc1") is None
    await store.adelete(namespace, "never-there")  # deleting what is absent is fine


async def test_batch_order_and_results(store: EngramStore) -> None:
    await store.aput(("test", "foo"), "key1", {"data": "value1"})
    await store.aput(("test", "bar"), "key2", {"data": "value2"})
    results = await store.abatch(
        [
            GetOp(("test", "foo"), "key1"),
            PutOp(("test", "bar"), "key2", {"data": "value2-new"}),
            SearchOp(("test",), filter={"data": "value2-new"}),
            ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
            GetOp(("test",), "missing"),
            PutOp(("test", "baz"), "key3", {"data": "first"}),
            PutOp(("test", "baz"), "key3", {"data": "last"}),  # the last put of a key wins
        ]
    )
    assert len(results) == 7
    assert isinstance(results[0], Item)
    assert results[0].value == {"data": "value1"}
    assert results[1] is None
    assert [item.key for item in results[2]] == ["key2"]  # type: ignore[union-attr]
    assert results[3] == [("test", "bar"), ("test", "baz"), ("test", "foo")]
    assert results[4] is None
    assert (got := await store.aget(("test", "baz"), "key3"))
    assert got.value == {"data": "last"}
    # the same through the synchronous batch, from a worker thread
    again = await asyncio.to_thread(store.batch, [GetOp(("test", "bar"), "key2")])
    assert isinstance(again[0], Item)
    assert again[0].value == {"data": "value2-new"}


async def test_search_filters_limit_offset(store: EngramStore) -> None:
    docs: list[tuple[str, dict[str, Any]]] = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5, "tags": ["a", "b"]}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0, "meta": {"kind": "car"}}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0, "tags": ["a"]}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5, "meta": {"kind": "car"}}),
    ]
    for key, value in docs:
        await store.aput(("fruit", "shop"), key, value)
    await store.aput(("other",), "doc5", {"color": "red"})

    async def keys(**kwargs: Any) -> list[str]:
        return sorted(item.key for item in await store.asearch(("fruit",), **kwargs))

    assert await keys() == ["doc1", "doc2", "doc3", "doc4"]
    assert await keys(filter={"color": "red"}) == ["doc1", "doc2"]
    assert await keys(filter={"color": {"$eq": "red"}}) == ["doc1", "doc2"]
    assert await keys(filter={"color": {"$ne": "red"}}) == ["doc3", "doc4"]
    assert await keys(filter={"score": {"$gt": 3.5}}) == ["doc1", "doc3"]
    assert await keys(filter={"score": {"$gte": 3.5}}) == ["doc1", "doc3", "doc4"]
    assert await keys(filter={"score": {"$lt": 3.5}}) == ["doc2"]
    assert await keys(filter={"score": {"$lte": 3.5}}) == ["doc2", "doc4"]
    assert await keys(filter={"score": {"$gt": 3.0, "$lt": 4.5}}) == ["doc3", "doc4"]
    assert await keys(filter={"meta": {"kind": "car"}}) == ["doc2", "doc4"]  # nested
    assert await keys(filter={"tags": ["a", "b"]}) == ["doc1"]  # exact list
    assert await keys(filter={"color": "red", "score": {"$lt": 4}}) == ["doc2"]
    assert await keys(filter={"missing": {"$gt": 1}}) == []
    page1 = await store.asearch(("fruit",), limit=2)
    page2 = await store.asearch(("fruit",), limit=2, offset=2)
    assert len(page1) == len(page2) == 2
    assert {i.key for i in page1}.isdisjoint(i.key for i in page2)
    assert await store.asearch(("fruit",), offset=4) == []
    assert len(await store.asearch(())) == 5  # an empty prefix is every namespace


async def test_search_with_engram_hybrid_ranks_the_relevant_item_first(
    store: EngramStore,
) -> None:
    await store.aput(("memories",), "m1", {"text": "Alice moved to Lisbon last spring"})
    await store.aput(("memories",), "m2", {"text": "Alice is allergic to peanuts"})
    await store.aput(("memories",), "m3", {"text": "The quarterly report is due Friday"})
    await store.aput(("memories",), "m4", {"text": "Lisbon too"}, index=False)
    hits = await store.asearch(("memories",), query="which city does Alice live in?")
    assert hits[0].key == "m1"
    assert hits[0].score is not None
    assert 0 < hits[0].score <= 1
    assert hits[-1].key == "m4"
    assert hits[-1].score is None
    food = await store.asearch(("memories",), query="peanut allergy", limit=1)
    assert [hit.key for hit in food] == ["m2"]


async def test_vector_insert_with_auto_embedding(vector_store: EngramStore) -> None:
    docs = [
        ("doc1", {"text": "short text"}),
        ("doc2", {"text": "longer text document"}),
        ("doc3", {"text": "longest text document here"}),
        ("doc4", {"description": "text in description field"}),
        ("doc5", {"content": "text in content field"}),
        ("doc6", {"body": "text in body field"}),
    ]
    for key, value in docs:
        await vector_store.aput(("test",), key, value)
    results = await vector_store.asearch(("test",), query="long text")
    assert {"doc2", "doc3"} <= {r.key for r in results}
    assert all(r.score is not None for r in results)
    assert [r.score for r in results] == sorted((r.score or 0.0 for r in results), reverse=True)


async def test_vector_update_with_embedding(vector_store: EngramStore) -> None:
    await vector_store.aput(("test",), "doc1", {"text": "zany zebra Xerxes"})
    await vector_store.aput(("test",), "doc2", {"text": "something about dogs"})
    await vector_store.aput(("test",), "doc3", {"text": "text about birds"})
    initial = await vector_store.asearch(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1"
    initial_score = initial[0].score
    assert initial_score is not None
    await vector_store.aput(("test",), "doc1", {"text": "new text about dogs"})
    after = await vector_store.asearch(("test",), query="Zany Xerxes")
    after_score = next(r.score for r in after if r.key == "doc1")
    assert after_score is not None
    assert after_score < initial_score
    new = await vector_store.asearch(("test",), query="new text about dogs")
    assert (next(r.score for r in new if r.key == "doc1") or 0.0) > after_score
    await vector_store.aput(("test",), "doc4", {"text": "new text about dogs"}, index=False)
    top = await vector_store.asearch(("test",), query="new text about dogs", limit=3)
    assert "doc4" not in [r.key for r in top]


async def test_vector_search_with_filters(vector_store: EngramStore) -> None:
    docs = [
        ("doc1", {"text": "red apple", "color": "red", "score": 4.5}),
        ("doc2", {"text": "red car", "color": "red", "score": 3.0}),
        ("doc3", {"text": "green apple", "color": "green", "score": 4.0}),
        ("doc4", {"text": "blue car", "color": "blue", "score": 3.5}),
    ]
    for key, value in docs:
        await vector_store.aput(("test",), key, value)
    results = await vector_store.asearch(("test",), query="apple", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc1"]
    assert len(results) == 2
    results = await vector_store.asearch(("test",), query="car", filter={"color": "red"})
    assert [r.key for r in results][:1] == ["doc2"]
    assert len(results) == 2
    results = await vector_store.asearch(
        ("test",), query="bbbbluuu", filter={"score": {"$gt": 3.2}}
    )
    assert [r.key for r in results][:1] == ["doc4"]
    assert len(results) == 3
    results = await vector_store.asearch(
        ("test",), query="apple", filter={"score": {"$gte": 4.0}, "color": "green"}
    )
    assert [r.key for r in results] == ["doc3"]


async def test_concurrent_writes_and_filtered_searches(vector_store: EngramStore) -> None:
    colors = ["red", "blue", "green", "yellow", "purple"]
    things = ["apple", "car", "house", "book", "phone"]
    scores = [3.0, 3.5, 4.0, 4.5, 5.0]
    docs = [
        (
            f"doc{i}",
            {
                "text": f"{colors[i % 5]} {things[i % 5]}",
                "color": colors[i % 5],
                "score": scores[i % 5],
                "index": i,
            },
        )
        for i in range(50)
    ]
    await asyncio.gather(*[vector_store.aput(("test",), k, v) for k, v in docs])
    await asyncio.gather(*[vector_store.adelete(("test",), k) for k, _ in docs])
    await asyncio.gather(*[vector_store.aput(("test",), k, v) for k, v in docs])
    queries: list[tuple[str, dict[str, Any]]] = [
        ("apple", {"color": "red"}),
        ("phone", {"score": {"$gt": 4.99}}),
        ("book", {"score": {"$lte": 3.5}}),
        ("car", {"score": {"$lt": 5.1}, "color": "blue"}),
        ("house", {"index": {"$gt": 25}}),
    ]
    found = await asyncio.gather(
        *[vector_store.asearch(("test",), query=q, filter=f, limit=100) for q, f in queries]
    )
    assert [len(r) for r in found] == [10, 10, 20, 10, 24]
    assert all(r.value["color"] == "red" for r in found[0])
    assert all(r.value["score"] > 4.99 for r in found[1])
    assert all(r.value["index"] > 25 for r in found[4])


async def test_vector_search_pagination_and_edge_cases(vector_store: EngramStore) -> None:
    for i in range(5):
        await vector_store.aput(("test",), f"doc{i}", {"text": f"test document number {i}"})
    page1 = await vector_store.asearch(("test",), query="test", limit=2)
    page2 = await vector_store.asearch(("test",), query="test", limit=2, offset=2)
    assert len(page1) == len(page2) == 2
    assert {r.key for r in page1}.isdisjoint(r.key for r in page2)
    assert len(await vector_store.asearch(("test",), query="test", limit=10)) == 5
    for query in ["", None, "test " * 100, "test!@#$%^&*()"]:
        assert len(await vector_store.asearch(("test",), query=query)) == 5
