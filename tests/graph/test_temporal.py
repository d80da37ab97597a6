"""Time-aware facts: an exclusive relation is ended, not deleted, by the fact that contradicts
it; queries answer for now by default and for any past moment with ``as_of``."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import RelationNotFoundError, ValidationError
from engramdb.core.types import utc_now
from engramdb.engine import Engine, EngineConfig
from engramdb.providers.graph import GraphEntity, GraphMemoryProvider, GraphTraversal
from engramdb.storage.backend import EventQuery
from tests.graph.conftest import entity


def day(year: int, month: int = 1) -> datetime:
    return datetime(year, month, 1, tzinfo=UTC)


async def places(graph: GraphMemoryProvider, when: datetime | None = None) -> list[str]:
    found = await graph.get_relations("alice", relation_type="lives_in", as_of=when)
    return [r.target_id for r in found]


@pytest.fixture
async def people(graph: GraphMemoryProvider) -> GraphMemoryProvider:
    await entity(graph, "alice")
    for city in ("lisbon", "berlin", "paris"):
        await entity(graph, city, "location")
    return graph


async def test_a_move_ends_the_old_address_and_keeps_it(
    people: GraphMemoryProvider, plain_engine: Engine
) -> None:
    lisbon = await people.add_relation("alice", "lisbon", "lives_in", valid_at=day(2020))
    berlin = await people.add_relation("alice", "berlin", "lives_in", valid_at=day(2024))
    assert await places(people) == ["berlin"]
    assert await places(people, day(2022)) == ["lisbon"]
    assert await places(people, day(2024, 6)) == ["berlin"]
    assert await places(people, day(2019)) == []
    history = await people.get_relations("alice", relation_type="lives_in", history=True)
    (old,) = [r for r in history if r.relation_id == lisbon.relation_id]
    assert old.invalid_at == day(2024)
    assert old.expired_at is not None
    assert old.recorded_at is not None
    assert old.recorded_at <= old.expired_at
    assert berlin.invalid_at is None
    assert berlin.expired_at is None
    (event,) = await plain_engine.events.read(EventQuery(event_types=("memory.invalidated",)))
    assert event.payload["key"] == lisbon.relation_id
    assert event.payload["superseded_by"] == berlin.relation_id
    assert event.payload["provider_id"] == "graph.relations"


async def test_a_fact_learned_late_about_the_past_ends_before_the_next_one(
    people: GraphMemoryProvider,
) -> None:
    await people.add_relation("alice", "lisbon", "lives_in", valid_at=day(2020))
    await people.add_relation("alice", "berlin", "lives_in", valid_at=day(2024))
    paris = await people.add_relation("alice", "paris", "lives_in", valid_at=day(2010))
    assert paris.invalid_at == day(2020)
    assert await places(people, day(2015)) == ["paris"]
    assert await places(people, day(2021)) == ["lisbon"]
    assert await places(people) == ["berlin"]


async def test_the_same_fact_twice_is_stored_once(
    people: GraphMemoryProvider, plain_engine: Engine
) -> None:
    first = await people.add_relation("alice", "lisbon", "lives_in", valid_at=day(2020))
    linked = EventQuery(event_types=("memory.linked",))
    before = await plain_engine.events.count(linked)
    again = await people.add_relation("alice", "lisbon", "lives_in", valid_at=day(2021))
    assert again == first
    assert await plain_engine.events.count(linked) == before


async def test_only_exclusive_types_contradict(people: GraphMemoryProvider) -> None:
    await entity(people, "bob")
    await entity(people, "carol")
    await people.add_relation("alice", "bob", "knows", valid_at=day(2020))
    await people.add_relation("alice", "carol", "knows", valid_at=day(2021))
    assert [r.target_id for r in await people.get_relations("alice")] == ["bob", "carol"]


async def test_exclusive_types_are_declared_per_engine(db_path: Path) -> None:
    config = EngineConfig(embedder=None, exclusive_relations=frozenset({"drives"}))
    async with engramdb.open(db_path, config=config) as engine:
        graph = engine.scope(tenant="acme", user="alice").graph
        await entity(graph, "alice")
        await entity(graph, "car-1", "vehicle")
        await entity(graph, "car-2", "vehicle")
        await entity(graph, "lisbon", "location")
        await entity(graph, "porto", "location")
        await graph.add_relation("alice", "car-1", "drives", valid_at=day(2020))
        await graph.add_relation("alice", "car-2", "drives", valid_at=day(2022))
        driven = await graph.get_relations("alice", relation_type="drives")
        assert [r.target_id for r in driven] == ["car-2"]
        # lives_in is not exclusive in this database: both addresses hold.
        await graph.add_relation("alice", "lisbon", "lives_in", valid_at=day(2020))
        await graph.add_relation("alice", "porto", "lives_in", valid_at=day(2022))
        assert len(await graph.get_relations("alice", relation_type="lives_in")) == 2


async def test_a_fact_can_be_ended_explicitly(people: GraphMemoryProvider) -> None:
    lisbon = await people.add_relation("alice", "lisbon", "lives_in", valid_at=day(2020))
    ended = await people.invalidate_relation(lisbon.relation_id, at=day(2023))
    assert ended.invalid_at == day(2023)
    assert await places(people) == []
    assert await places(people, day(2022)) == ["lisbon"]
    with pytest.raises(RelationNotFoundError):
        await people.invalidate_relation("rel-missing")
    with pytest.raises(ValidationError):
        await people.invalidate_relation(lisbon.relation_id, at=day(2019))


async def test_bad_times_are_typed_errors_and_write_nothing(
    people: GraphMemoryProvider, plain_engine: Engine
) -> None:
    before = await plain_engine.events.count()
    with pytest.raises(ValidationError):
        await people.add_relation(
            "alice", "lisbon", "lives_in", valid_at=day(2020), invalid_at=day(2019)
        )
    with pytest.raises(ValidationError):
        await people.add_relation("alice", "lisbon", "lives_in", valid_at=datetime(2020, 1, 1))
    assert await plain_engine.events.count() == before
    assert await people.get_relations("alice", history=True) == []


async def test_contradictions_within_one_batch_come_out_as_if_written_one_by_one(
    people: GraphMemoryProvider,
) -> None:
    from engramdb.providers.graph import GraphRelation

    stored = await people.add_relations(
        [
            GraphRelation(
                source_id="alice", target_id="lisbon", relation_type="lives_in", valid_at=day(2020)
            ),
            GraphRelation(
                source_id="alice", target_id="berlin", relation_type="lives_in", valid_at=day(2024)
            ),
        ]
    )
    assert stored[0].invalid_at == day(2024)
    assert await places(people) == ["berlin"]
    assert await places(people, day(2021)) == ["lisbon"]
    assert isinstance(await people.get_entity("alice"), GraphEntity)


async def test_known_at_answers_as_engram_knew_it_then(people: GraphMemoryProvider) -> None:
    await people.add_relation("alice", "lisbon", "lives_in", valid_at=day(2020))
    learned_lisbon = utc_now()
    await people.add_relation("alice", "berlin", "lives_in", valid_at=day(2024))
    # Before the move was learned, Engram believed Alice still lived in Lisbon, even "now".
    believed = await people.get_relations(
        "alice", relation_type="lives_in", known_at=learned_lisbon
    )
    assert [r.target_id for r in believed] == ["lisbon"]
    assert await places(people) == ["berlin"]
    before_anything = await people.get_relations("alice", known_at=day(2019))
    assert before_anything == []
    walk = GraphTraversal(start_entity_id="alice", pattern="neighbors", known_at=learned_lisbon)
    assert [e.entity_id for e in await people.traverse(walk)] == ["lisbon"]
    with pytest.raises(ValidationError):
        GraphTraversal(start_entity_id="alice", known_at=datetime(2020, 1, 1))
