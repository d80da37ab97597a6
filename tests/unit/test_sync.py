"""The blocking wrappers run the async core on a private loop thread."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import InvalidKeyError
from engramdb.engine import EngineConfig
from engramdb.providers.graph import GraphEntity, GraphRelation, GraphTraversal, TraversalPattern
from engramdb.storage.backend import EventQuery


def test_sync_engine_round_trip(tmp_path: Path) -> None:
    with engramdb.open_sync(tmp_path / "sync.db") as engram:
        mem = engram.scope(tenant="acme", user="alice")
        mem.store("user.city", "Lisbon", tier=engramdb.MemoryTier.PERSISTENT)
        mem.store("scratch", "thinking about Lisbon")
        assert mem.read("user.city").value == "Lisbon"  # type: ignore[union-attr]
        # Both match the whole query (score 1.0); the tie goes to the higher tier.
        assert [r.entry.key for r in mem.recall("lisbon")] == ["scratch", "user.city"]
        assert mem.list_keys() == ["scratch", "user.city"]
        with pytest.raises(InvalidKeyError):
            mem.store("", "x")
        assert mem.delete("scratch") == ["working"]
        written = engram.events(EventQuery(event_types=("memory.written",)))
        assert [e.payload["key"] for e in written] == ["user.city"]
        assert {ns: n for ns, n in engram.rebuild().records.items() if n} == {"event_sourced": 1}


async def test_awaiting_open_gives_an_engine(tmp_path: Path) -> None:
    engine = await engramdb.open(tmp_path / "a.db")
    try:
        assert await engine.scope().persistent.list_keys() == []
    finally:
        await engine.close()
        await engine.close()


def test_sync_graph(tmp_path: Path) -> None:
    with engramdb.open_sync(tmp_path / "graph.db", config=EngineConfig(embedder=None)) as engram:
        graph = engram.scope(tenant="acme", user="alice").graph
        ada = graph.add_entity(GraphEntity(name="Ada", entity_type="person")).key
        acme = graph.add_entities([GraphEntity(name="Acme", entity_type="organization")])[0].key
        globex = graph.add_entity(GraphEntity(name="Globex", entity_type="organization")).key
        assert graph.get_entity(ada).name == "Ada"  # type: ignore[union-attr]
        assert graph.find_entity("acme", "organization").entity_id == acme  # type: ignore[union-attr]
        was = datetime(2020, 1, 1, tzinfo=UTC)
        first = graph.add_relation(ada, acme, "works_for", valid_at=was)
        (knows,) = graph.add_relations([GraphRelation(source_id=ada, target_id=globex)])
        assert [r.target_id for r in graph.get_relations(ada, relation_type="works_for")] == [acme]
        assert graph.invalidate_relation(first.relation_id).invalid_at is not None
        assert graph.get_relations(ada, as_of=was) == [graph.get_relations(ada, history=True)[0]]
        start = GraphTraversal(start_entity_id=ada, pattern=TraversalPattern.NEIGHBORS)
        assert [e.name for e in graph.traverse(start)] == ["Globex"]
        path = GraphTraversal(
            start_entity_id=ada, pattern=TraversalPattern.SHORTEST_PATH, target_entity_id=globex
        )
        assert [e.name for e in graph.paths(path)[0].entities] == ["Ada", "Globex"]
        graph.delete_relation(knows.relation_id)
        added = graph.ingest("Bob works for Initech")
        assert {e.name for e in added.entities} == {"Bob", "Initech"}
        assert graph.search_entities("Initech")[0][0].name == "Initech"
        assert graph.merge_entities(acme, globex).entity_id == acme
        assert graph.export_json(tmp_path / "graph.json").exists()
        assert graph.delete(ada)
        assert graph.get_entity(ada) is None
