"""Graph memory as the engine offers it (``mem.graph``): events written with every change,
typed errors that write nothing, entity resolution and merges, scoping, search, snapshots."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import (
    EngramError,
    EntityNotFoundError,
    RelationNotFoundError,
    UsageError,
    ValidationError,
    ValueTooLargeError,
)
from engramdb.core.types import RecallQuery, utc_now
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.providers.graph import GraphEntity, GraphMemoryProvider, GraphRelation
from engramdb.providers.graph.store import relation_record
from engramdb.providers.graph.working import STALE_AFTER_S
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import Put
from tests.graph.conftest import entity


async def test_each_change_is_logged_with_its_event(
    graph: GraphMemoryProvider, plain_engine: Engine
) -> None:
    after = await plain_engine.events.last_position()
    alice = await graph.add_entity(engramdb.GraphEntity(name="Alice", entity_type="person"))
    acme = await graph.add_entity(GraphEntity(name="Acme", entity_type="organization"))
    relation = await graph.add_relation(alice.key, acme.key, "works_for", {"role": "cto"})
    await graph.add_relation(acme.key, alice.key, "related_to")
    assert await graph.delete(alice.key) is True
    events = await plain_engine.events.read(EventQuery(after=after))
    summary = [(e.event_type, e.payload.get("content_type"), e.provider_id) for e in events]
    assert summary == [
        ("memory.written", "entity", "graph"),
        ("memory.written", "entity", "graph"),
        ("memory.linked", None, "graph.relations"),
        ("memory.linked", None, "graph.relations"),
        ("memory.deleted", None, "graph.relations"),
        ("memory.deleted", None, "graph.relations"),
        ("memory.deleted", None, "graph"),
    ]
    linked = events[2].payload
    assert (linked["source_key"], linked["target_key"], linked["relation"]) == (
        alice.key,
        acme.key,
        "works_for",
    )
    assert linked["key"] == relation.relation_id
    assert relation.source_event_id == events[2].event_id
    # One transaction: the three deletions share a correlation id.
    assert len({e.trace.correlation_id for e in events[4:]}) == 1
    assert await graph.get_entity(alice.key) is None
    assert await graph.get_relations(acme.key, "both", history=True) == []
    assert await graph.read(alice.key) is None


async def test_a_relation_to_a_missing_entity_is_a_typed_error_that_writes_nothing(
    graph: GraphMemoryProvider, plain_engine: Engine
) -> None:
    await entity(graph, "alice")
    before = await plain_engine.events.count()
    with pytest.raises(EntityNotFoundError) as raised:
        await graph.add_relation("alice", "nobody", "knows")
    assert raised.value.details == {"entity_id": "nobody"}
    assert isinstance(raised.value, UsageError)
    assert raised.value.code == "entity_not_found"
    with pytest.raises(EntityNotFoundError):
        await graph.add_relation("nobody", "alice", "knows")
    with pytest.raises(EntityNotFoundError):
        await graph.merge_entities("alice", "nobody")
    with pytest.raises(RelationNotFoundError):
        await graph.delete_relation("rel-nothing")
    with pytest.raises(ValidationError):
        await graph.add_relation("alice", "alice", "Not A Type")
    assert await plain_engine.events.count() == before
    assert await graph.get_relations("alice", "both", history=True) == []
    # Reads are forgiving.
    assert await graph.get_entity("nobody") is None
    assert await graph.get_relations("nobody") == []


async def test_same_named_entities_of_one_type_merge(graph: GraphMemoryProvider) -> None:
    first = await graph.add_entity(GraphEntity(name="Acme, Inc.", entity_type="organization"))
    second = await graph.add_entity(
        GraphEntity(name="acme inc", entity_type="organization", properties={"hq": "Lisbon"})
    )
    assert second.key == first.key
    merged = await graph.get_entity(first.key)
    assert merged is not None
    assert merged.name == "Acme, Inc."
    assert merged.aliases == ["acme inc"]
    assert merged.properties == {"hq": "Lisbon"}
    # Found by its alias too; another type is another entity.
    third = await graph.add_entity(GraphEntity(name="ACME INC", entity_type="organization"))
    assert third.key == first.key
    band = await graph.add_entity(GraphEntity(name="Acme Inc", entity_type="band"))
    assert band.key != first.key
    found = await graph.find_entity("acme, inc", "organization")
    assert found is not None
    assert found.entity_id == first.key
    unresolved = await graph.add_entity(
        GraphEntity(name="Acme Inc", entity_type="organization"), resolve=False
    )
    assert unresolved.key != first.key


async def test_same_as_merges_two_entities_and_moves_their_relations(
    graph: GraphMemoryProvider,
) -> None:
    for name in ("bob", "robert", "acme", "carol"):
        await entity(graph, name)
    await graph.add_relation("robert", "acme", "works_for")
    await graph.add_relation("carol", "robert", "knows")
    await graph.add_relation("bob", "robert", "knows")  # would loop on bob: dropped
    await graph.add_relation("bob", "robert", "same_as")
    assert await graph.get_entity("robert") is None
    bob = await graph.get_entity("bob")
    assert bob is not None
    assert bob.aliases == ["robert"]
    out = [(r.relation_type, r.target_id) for r in await graph.get_relations("bob")]
    assert out == [("works_for", "acme")]
    incoming = [
        (r.source_id, r.relation_type) for r in await graph.get_relations("bob", "incoming")
    ]
    assert incoming == [("carol", "knows")]


async def test_graphs_are_scoped_and_outlive_the_session(plain_engine: Engine) -> None:
    mine = plain_engine.scope(tenant="acme", user="alice", session="s-1").graph
    await mine.add_entity(GraphEntity(entity_id="secret", name="Secret", entity_type="project"))
    later = plain_engine.scope(tenant="acme", user="alice", session="s-2").graph
    assert await later.get_entity("secret") is not None
    for other in (
        plain_engine.scope(tenant="globex", user="alice").graph,
        plain_engine.scope(tenant="acme", user="bob").graph,
    ):
        assert await other.get_entity("secret") is None
        assert await other.search_entities("secret") == []
        with pytest.raises(EntityNotFoundError):
            await other.add_relation("secret", "secret", "knows")


async def test_entities_are_found_by_name_property_and_meaning(
    db_path: Path, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(db_path, config=EngineConfig(embedder=embedder)) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        graph = mem.graph
        await graph.add_entity(
            GraphEntity(name="Rex", entity_type="animal", properties={"breed": "golden retriever"})
        )
        await graph.add_entity(GraphEntity(name="Lisbon", entity_type="location"))
        await graph.add_entity(GraphEntity(name="Ana", entity_type="person"))
        by_name = await graph.search_entities("Lisbon")
        assert by_name[0][0].name == "Lisbon"
        by_property = await graph.search_entities("retriever")
        assert by_property[0][0].name == "Rex"
        by_meaning = await graph.search_entities("a pet dog")
        assert by_meaning[0][0].name == "Rex"
        assert all(0.0 <= score <= 1.0 for _, score in by_meaning)
        people = await graph.search_entities("Ana Lisbon", entity_types=["person"])
        assert [e.name for e, _ in people] == ["Ana"]
        # Unified recall through the manager reaches the graph too.
        report = await mem.manager.recall_report(
            RecallQuery(query="Lisbon", provider_ids=["graph"])
        )
        assert [r.entry.value["name"] for r in report.results][:1] == ["Lisbon"]


async def test_the_provider_api_stores_entities_and_plain_entries(
    graph: GraphMemoryProvider,
) -> None:
    stored = await graph.write(
        "alice", GraphEntity(name="Alice", entity_type="person"), content_type="entity"
    )
    assert stored.key == "alice"
    assert await graph.read("alice") == stored
    assert (await graph.get_entity("alice")) is not None
    await graph.write("note", {"text": "plain"}, content_type="fact")
    assert await graph.list_keys() == ["alice", "note"]
    assert await graph.list_keys(content_types=["entity"]) == ["alice"]
    with pytest.raises(ValidationError):
        await graph.write("alice", "not an entity now")
    with pytest.raises(ValidationError):
        await graph.write("bob", "a string", content_type="entity")
    with pytest.raises(ValidationError):
        await graph.write("bob", {"name": ""}, content_type="entity")
    caps = graph.capabilities()
    assert (caps.provider_id, caps.supports_graph, caps.content_types) == (
        "graph",
        True,
        ["entity"],
    )


async def test_json_snapshot_is_written_atomically(
    graph: GraphMemoryProvider, tmp_path: Path
) -> None:
    await entity(graph, "alice")
    await entity(graph, "acme", "organization")
    await graph.add_relation("alice", "acme", "works_for")
    target = tmp_path / "out" / "graph.json"
    target.parent.mkdir()
    target.write_text("old snapshot")
    assert await graph.export_json(target) == target
    data = json.loads(target.read_text())
    assert [n["id"] for n in data["nodes"]] == ["acme", "alice"]
    ((link),) = data["links"]
    assert (link["source"], link["target"], link["relation_type"]) == ("alice", "acme", "works_for")
    assert sorted(p.name for p in target.parent.iterdir()) == ["graph.json"]


def test_graph_errors_belong_to_the_one_tree() -> None:
    for error in (
        engramdb.EntityNotFoundError,
        engramdb.RelationNotFoundError,
        engramdb.InvalidTraversalError,
    ):
        assert issubclass(error, engramdb.GraphMemoryError)
        assert issubclass(error, EngramError)
    assert issubclass(engramdb.InvalidTraversalError, ValidationError)


async def test_another_process_commits_are_seen(db_path: Path, plain_engine: Engine) -> None:
    mine = plain_engine.scope(tenant="acme", user="alice").graph
    await entity(mine, "alice")
    assert await mine.get_entity("bob") is None
    # A second engine on the same file stands for another process.
    async with engramdb.open(db_path, config=EngineConfig(embedder=None)) as other_engine:
        theirs = other_engine.scope(tenant="acme", user="alice").graph
        await entity(theirs, "bob")
        await theirs.add_relation("bob", "alice", "knows")
    await asyncio.sleep(STALE_AFTER_S)
    assert await mine.get_entity("bob") is not None
    assert [r.source_id for r in await mine.get_relations("alice", "incoming")] == ["bob"]


async def test_the_engine_export_includes_the_graph(
    graph: GraphMemoryProvider, plain_engine: Engine
) -> None:
    await entity(graph, "alice")
    await entity(graph, "bob")
    relation = await graph.add_relation("alice", "bob", "knows")
    exported = [item async for item in plain_engine.export()]
    records = {(i["provider_id"], i["key"]) for i in exported if i["kind"] == "record"}
    assert {("graph", "alice"), ("graph", "bob")} <= records
    assert ("graph.relations", relation.relation_id) in records


async def test_a_batch_is_written_whole_or_not_at_all(
    graph: GraphMemoryProvider, plain_engine: Engine
) -> None:
    await entity(graph, "alice")
    await entity(graph, "bob")
    before = await plain_engine.events.count()
    fine = GraphRelation(source_id="alice", target_id="bob", relation_type="knows")
    huge = GraphRelation(
        source_id="bob", target_id="alice", relation_type="knows", properties={"x": "y" * 2**21}
    )
    with pytest.raises(ValueTooLargeError):
        await graph.add_relations([fine, huge])
    assert await plain_engine.events.count() == before
    assert await graph.get_relations("alice", "both", history=True) == []
    with pytest.raises(EntityNotFoundError):
        await graph.add_relations([fine, GraphRelation(source_id="bob", target_id="zed")])
    assert await graph.get_relations("alice", "both", history=True) == []


async def test_concurrent_writers_resolve_to_one_entity(graph: GraphMemoryProvider) -> None:
    entries = await asyncio.gather(
        *(graph.add_entity(GraphEntity(name="Dana", entity_type="person")) for _ in range(8))
    )
    assert len({e.key for e in entries}) == 1
    assert [e.name for e, _ in await graph.search_entities("Dana")] == ["Dana"]


async def test_merge_entities_keeps_one_and_its_names(graph: GraphMemoryProvider) -> None:
    await graph.add_entity(GraphEntity(entity_id="nyc", name="New York", entity_type="location"))
    await graph.add_entity(GraphEntity(entity_id="big", name="Big Apple", entity_type="location"))
    await entity(graph, "alice")
    await graph.add_relation("alice", "big", "lives_in")
    merged = await graph.merge_entities("nyc", "big")
    assert merged.aliases == ["Big Apple"]
    assert await graph.merge_entities("nyc", "nyc") == merged
    assert [r.target_id for r in await graph.get_relations("alice")] == ["nyc"]
    found = await graph.find_entity("big apple", "location")
    assert found is not None
    assert found.entity_id == "nyc"
    with pytest.raises(ValidationError):
        await graph.write("x", {"name": "X"}, content_type="entity", metadata={"a": 1})


async def test_reindex_recomputes_the_entities_vectors(
    db_path: Path, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(db_path, config=EngineConfig(embedder=embedder)) as engine:
        graph = engine.scope(tenant="acme", user="alice").graph
        await graph.add_entity(GraphEntity(name="Rex", entity_type="animal"))
        await graph.add_entity(GraphEntity(name="Lisbon", entity_type="location"))
        before = await graph.search_entities("a dog")
        assert await engine.reindex() == 2
        assert await graph.search_entities("a dog") == before


async def test_a_stored_relation_without_its_entity_is_left_out_of_the_graph(
    graph: GraphMemoryProvider, plain_engine: Engine
) -> None:
    await entity(graph, "alice")
    dangling = GraphRelation(source_id="alice", target_id="gone", relation_type="knows")
    record = relation_record(graph.scope, dangling, utc_now())
    await plain_engine.backend.commit([Put(record)], [])
    graph.graphs.drop()
    assert await graph.get_relations("alice", history=True) == []
    assert await graph.get_entity("gone") is None
