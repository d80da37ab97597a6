"""``rebuild()`` reproduces the graph exactly from the log: entities (merged ones included),
relations, invalidations and deletions — and so does reopening the database."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import engramdb
from engramdb.engine import Engine, EngineConfig
from engramdb.providers.graph import GraphEntity, GraphMemoryProvider, GraphTraversal
from engramdb.storage.records import RecordQuery


async def build(graph: GraphMemoryProvider) -> None:
    alice = (await graph.add_entity(GraphEntity(name="Alice", entity_type="person"))).key
    await graph.add_entity(
        GraphEntity(name="alice", entity_type="person", properties={"age": 41})
    )  # merged into Alice
    ally = (await graph.add_entity(GraphEntity(name="Ally", entity_type="person"))).key
    bob = (await graph.add_entity(GraphEntity(name="Bob", entity_type="person"))).key
    acme = (await graph.add_entity(GraphEntity(name="Acme", entity_type="organization"))).key
    lisbon = (await graph.add_entity(GraphEntity(name="Lisbon", entity_type="location"))).key
    berlin = (await graph.add_entity(GraphEntity(name="Berlin", entity_type="location"))).key
    temp = (await graph.add_entity(GraphEntity(name="Temp", entity_type="project"))).key
    await graph.add_relation(alice, lisbon, "lives_in", valid_at=datetime(2020, 1, 1, tzinfo=UTC))
    await graph.add_relation(alice, berlin, "lives_in", valid_at=datetime(2024, 1, 1, tzinfo=UTC))
    await graph.add_relation(ally, acme, "works_for", {"since": 2019})
    await graph.add_relation(bob, ally, "knows", weight=0.5)
    await graph.add_relation(alice, ally, "same_as")  # Ally's relations move to Alice
    await graph.add_relation(bob, temp, "works_with")
    await graph.delete(temp)  # the entity and its relation go
    dropped = await graph.add_relation(bob, acme, "related_to")
    await graph.delete_relation(dropped.relation_id)
    knows = await graph.get_relations(bob, relation_type="knows")
    await graph.invalidate_relation(knows[0].relation_id)
    await graph.write("note", "plain entries live beside the entities")


async def state(engine: Engine, graph: GraphMemoryProvider) -> dict[str, Any]:
    working = await graph.working_graph()
    records = {
        namespace: [
            (r.key, r.value, r.content_type, r.created_at, r.updated_at, r.text, r.thread)
            for r in await engine.backend.scan(RecordQuery(namespace, graph.partition))
        ]
        for namespace in ("graph", "graph.relations")
    }
    entities = {node: working.entity(node) for node in sorted(working.graph.nodes)}
    relations = {node: await graph.get_relations(node, "both", history=True) for node in entities}
    walks = [
        [e.entity_id for e in await graph.traverse(GraphTraversal(start_entity_id=n, max_depth=3))]
        for n in entities
    ]
    search = await graph.search("Alice")
    return {
        "records": records,
        "entities": entities,
        "relations": relations,
        "walks": walks,
        "search": search,
    }


async def test_rebuild_reproduces_the_graph_exactly(plain_engine: Engine, db_path: Path) -> None:
    graph = plain_engine.scope(tenant="acme", user="alice", session="s-1").graph
    other = plain_engine.scope(tenant="globex", user="zed").graph
    await build(graph)
    await other.add_entity(GraphEntity(name="Zed", entity_type="person"))
    before = await state(plain_engine, graph)
    assert len(before["entities"]) == 5  # Alice (with Ally and alice), Bob, Acme, two cities
    alice = next(e for e in before["entities"].values() if e.name == "Alice")
    assert sorted(alice.aliases) == ["Ally", "alice"]
    assert alice.properties == {"age": 41}
    assert sum(len(v) for v in before["relations"].values()) > 0

    report = await plain_engine.rebuild()
    assert report.records["graph"] == 7  # five entities here, a note, Zed in globex
    assert await state(plain_engine, graph) == before

    await graph.rebuild()
    assert await state(plain_engine, graph) == before

    await plain_engine.close()
    async with engramdb.open(db_path, config=EngineConfig(embedder=None)) as reopened:
        again = reopened.scope(tenant="acme", user="alice", session="s-2").graph
        assert await state(reopened, again) == before
        zed = await reopened.scope(tenant="globex", user="zed").graph.search_entities("zed")
        assert [e.name for e, _ in zed] == ["Zed"]
