"""Every graph endpoint through the client SDK (``MemoryClient.graph``), against a real
``engram serve`` process: entities, time-aware relations, all five traversal patterns,
search, extraction from text, and the typed errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from engramdb.core.errors import (
    EntityNotFoundError,
    InvalidTraversalError,
    PermissionDeniedError,
    RelationNotFoundError,
)
from engramdb.providers.graph import GraphEntity, GraphTraversal, TraversalPattern
from tests.service.conftest import Connect, LiveServer

DAY = timedelta(days=1)


async def test_entities_add_get_resolve_delete(connect: Connect, live_server: LiveServer) -> None:
    graph = connect(live_server.alice, agent_id="entities").graph
    ada = await graph.add_entity("Ada", "person", properties={"role": "engineer"})
    assert (ada.name, ada.entity_type, ada.properties) == ("Ada", "person", {"role": "engineer"})
    assert await graph.get_entity(ada.entity_id) == ada
    again = await graph.add_entity("ada", "person", aliases=["Ada L."])
    assert again.entity_id == ada.entity_id
    assert "Ada L." in again.aliases
    apart = await graph.add_entity("Ada", "person", resolve=False, entity_id="ada-2")
    assert apart.entity_id == "ada-2"
    assert await graph.delete_entity("ada-2")
    assert await graph.get_entity("ada-2") is None
    assert not await graph.delete_entity("ada-2")


async def test_relations_in_time(connect: Connect, live_server: LiveServer) -> None:
    graph = connect(live_server.alice, agent_id="relations").graph
    bob = await graph.add_entity("Bob", "person")
    acme = await graph.add_entity("Acme", "organization")
    globex = await graph.add_entity("Globex", "organization")
    start = datetime(2020, 1, 1, tzinfo=UTC)
    first = await graph.add_relation(
        bob.entity_id, acme.entity_id, "works_for", valid_at=start, sources=["episodic:1"]
    )
    assert (first.valid_at, first.sources) == (start, ["episodic:1"])
    moved = datetime(2024, 6, 1, tzinfo=UTC)
    await graph.add_relation(bob.entity_id, globex.entity_id, "works_for", valid_at=moved)

    now = await graph.get_relations(bob.entity_id, relation_type="works_for")
    assert [r.target_id for r in now] == [globex.entity_id]
    then = await graph.get_relations(bob.entity_id, as_of=moved - DAY)
    assert [r.target_id for r in then] == [acme.entity_id]
    every = await graph.get_relations(bob.entity_id, history=True)
    assert len(every) == 2
    incoming = await graph.get_relations(acme.entity_id, "incoming", as_of=moved - DAY)
    assert [r.source_id for r in incoming] == [bob.entity_id]
    assert await graph.get_relations(acme.entity_id, "both", known_at=start - DAY) == []

    knows = await graph.add_relation(bob.entity_id, acme.entity_id, "knows", {"since": 2019})
    await graph.delete_relation(knows.relation_id)
    with pytest.raises(RelationNotFoundError):
        await graph.delete_relation(knows.relation_id)
    with pytest.raises(EntityNotFoundError):
        await graph.add_relation(bob.entity_id, "nobody")
    with pytest.raises(EntityNotFoundError):
        await graph.get_relations("nobody")
    assert await graph.delete_entity(globex.entity_id)
    left = await graph.get_relations(bob.entity_id, history=True)
    assert [(r.relation_id, r.invalid_at) for r in left] == [(first.relation_id, moved)]


async def test_every_traversal_pattern(connect: Connect, live_server: LiveServer) -> None:
    graph = connect(live_server.alice, agent_id="traverse").graph
    a, b, c, d = [await graph.add_entity(n, "concept") for n in ("A", "B", "C", "D")]
    tool = await graph.add_entity("T", "tool")
    for source, target in ((a, b), (b, c), (c, d), (a, tool)):
        await graph.add_relation(source.entity_id, target.entity_id, "depends_on")
    await graph.add_relation(a.entity_id, d.entity_id, "related_to")

    def names(found: list[GraphEntity]) -> set[str]:
        return {e.name for e in found}

    neighbours = await graph.traverse(a.entity_id, "neighbors")
    assert names(neighbours.entities) == {"B", "T", "D"}
    assert neighbours.paths is None
    bfs = await graph.traverse(a.entity_id, "bfs", max_depth=2, relation_types=["depends_on"])
    assert names(bfs.entities) == {"B", "C", "T"}
    dfs = await graph.traverse(a.entity_id, "dfs", max_depth=3, entity_types=["concept"])
    assert names(dfs.entities) == {"B", "C", "D"}
    limited = await graph.traverse(a.entity_id, "bfs", limit=1)
    assert len(limited.entities) == 1
    back = await graph.traverse(d.entity_id, "neighbors", direction="incoming")
    assert names(back.entities) == {"A", "C"}

    shortest = await graph.traverse(
        GraphTraversal(
            start_entity_id=a.entity_id,
            pattern=TraversalPattern.SHORTEST_PATH,
            target_entity_id=d.entity_id,
            relation_types=["depends_on"],
            max_depth=5,
        )
    )
    assert shortest.paths is not None
    assert [e.name for e in shortest.paths[0].entities] == ["A", "B", "C", "D"]
    assert [r.relation_type for r in shortest.paths[0].relations] == ["depends_on"] * 3
    every = await graph.traverse(
        a.entity_id, "all_paths", target_entity_id=d.entity_id, max_depth=3
    )
    assert every.paths is not None
    assert sorted(len(p.entities) for p in every.paths) == [2, 4]
    past = await graph.traverse(a.entity_id, "neighbors", as_of=datetime(2000, 1, 1, tzinfo=UTC))
    assert past.entities == []

    with pytest.raises(InvalidTraversalError):
        await graph.traverse(a.entity_id, "shortest_path")
    with pytest.raises(EntityNotFoundError):
        await graph.traverse("nowhere", "bfs")


async def test_search_and_ingest(connect: Connect, live_server: LiveServer) -> None:
    graph = connect(live_server.alice, agent_id="ingest").graph
    added = await graph.ingest(
        "Carol works for Initech. Carol lives in Lisbon.",
        source="episodic:42",
        occurred_at=datetime(2025, 3, 1, tzinfo=UTC),
    )
    assert {e.name for e in added.entities} == {"Carol", "Initech", "Lisbon"}
    assert {r.relation_type for r in added.relations} == {"works_for", "lives_in"}
    assert all(r.sources == ["episodic:42"] for r in added.relations)
    mine = await graph.ingest("I live in Porto", speaker="Alice")
    assert {e.name for e in mine.entities} == {"Alice", "Porto"}

    hits = await graph.search("Initech")
    assert hits[0][0].name == "Initech"
    assert 0 < hits[0][1] <= 1
    places = await graph.search("Lisbon", entity_types=["location"], limit=5)
    assert places[0][0].name == "Lisbon"
    assert {e.entity_type for e, _ in places} == {"location"}
    assert await graph.search("Initech", entity_types=["tool"]) == []


async def test_graphs_are_scoped_and_readers_cannot_write(
    connect: Connect, live_server: LiveServer
) -> None:
    alice = connect(live_server.alice, agent_id="scoped").graph
    secret = await alice.add_entity("Secret project", "project")
    bob = connect(live_server.bob, agent_id="scoped").graph
    assert await bob.get_entity(secret.entity_id) is None
    reader = connect(live_server.reader, agent_id="scoped").graph
    assert await reader.get_entity(secret.entity_id) == secret
    with pytest.raises(PermissionDeniedError):
        await reader.add_entity("Nope")


async def test_invalidate_a_relation_and_merge_entities(
    connect: Connect, live_server: LiveServer
) -> None:
    graph = connect(live_server.alice, agent_id="invalidate-merge").graph
    eve = await graph.add_entity("Eve", "person")
    oslo = await graph.add_entity("Oslo", "location")
    since = datetime(2021, 3, 1, tzinfo=UTC)
    lives = await graph.add_relation(eve.entity_id, oslo.entity_id, "lives_in", valid_at=since)
    left = datetime(2025, 9, 1, tzinfo=UTC)
    ended = await graph.invalidate_relation(lives.relation_id, at=left)
    assert (ended.relation_id, ended.invalid_at) == (lives.relation_id, left)
    assert await graph.get_relations(eve.entity_id) == []
    held = await graph.get_relations(eve.entity_id, as_of=left - DAY)
    assert [r.target_id for r in held] == [oslo.entity_id]
    now = await graph.invalidate_relation(
        (await graph.add_relation(eve.entity_id, oslo.entity_id, "knows")).relation_id
    )
    assert now.invalid_at is not None
    with pytest.raises(RelationNotFoundError):
        await graph.invalidate_relation("no-such-relation")

    twin = await graph.add_entity("E. Smith", "person", resolve=False)
    acme = await graph.add_entity("Acme", "organization")
    await graph.add_relation(twin.entity_id, acme.entity_id, "works_for")
    kept = await graph.merge_entities(eve.entity_id, twin.entity_id)
    assert kept.entity_id == eve.entity_id
    assert "E. Smith" in kept.aliases
    assert await graph.get_entity(twin.entity_id) is None
    works = await graph.get_relations(eve.entity_id, relation_type="works_for")
    assert [r.target_id for r in works] == [acme.entity_id]
    with pytest.raises(EntityNotFoundError):
        await graph.merge_entities(eve.entity_id, "nobody")
