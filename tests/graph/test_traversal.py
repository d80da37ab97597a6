"""The five traversal patterns on a graph where depth, direction, filters and time change the
answer, cycles included."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest

from engramdb.core.errors import InvalidTraversalError, ValidationError
from engramdb.providers.graph import GraphMemoryProvider, GraphTraversal, TraversalPattern
from engramdb.providers.graph.traversal import Walk, dfs
from tests.graph.conftest import entity

#: a → b → c → a is a cycle; d points at a; c works for org and knows e; e knows f;
#: b lives in city; a works with c directly.
EDGES = [
    ("a", "b", "knows"),
    ("b", "c", "knows"),
    ("c", "a", "knows"),
    ("d", "a", "knows"),
    ("c", "org", "works_for"),
    ("c", "e", "knows"),
    ("e", "f", "knows"),
    ("b", "city", "lives_in"),
    ("a", "c", "works_with"),
]
TYPES = {"org": "organization", "city": "location"}


@pytest.fixture
async def built(graph: GraphMemoryProvider) -> GraphMemoryProvider:
    for name in ("a", "b", "c", "d", "e", "f", "org", "city"):
        await entity(graph, name, TYPES.get(name, "person"))
    for source, target, kind in EDGES:
        await graph.add_relation(source, target, kind)
    return graph


async def ids(graph: GraphMemoryProvider, **query: object) -> list[str]:
    found = await graph.traverse(GraphTraversal.model_validate(query))
    return [e.entity_id for e in found]


async def test_neighbors_follow_direction_and_filters(built: GraphMemoryProvider) -> None:
    assert await ids(built, start_entity_id="a", pattern="neighbors") == ["b", "c"]
    assert await ids(built, start_entity_id="a", pattern="neighbors", direction="incoming") == [
        "c",
        "d",
    ]
    both = await ids(built, start_entity_id="a", pattern="neighbors", direction="both")
    assert both == ["b", "c", "d"]
    only_work = await ids(
        built, start_entity_id="c", pattern="neighbors", relation_types=["works_for"]
    )
    assert only_work == ["org"]
    orgs = await ids(built, start_entity_id="c", pattern="neighbors", entity_types=["organization"])
    assert orgs == ["org"]
    assert await ids(built, start_entity_id="a", pattern="neighbors", limit=1) == ["b"]


async def test_bfs_stops_by_depth_not_by_how_many_it_visited(built: GraphMemoryProvider) -> None:
    knows = ["knows"]
    by_depth = [
        await ids(built, start_entity_id="a", relation_types=knows, max_depth=depth)
        for depth in range(5)
    ]
    assert by_depth == [[], ["b"], ["b", "c"], ["b", "c", "e"], ["b", "c", "e", "f"]]
    # Nearest first, then by id; the cycle back to a is not walked twice.
    assert await ids(built, start_entity_id="a", max_depth=2) == ["b", "c", "city", "e", "org"]
    assert await ids(built, start_entity_id="a", max_depth=10) == [
        "b",
        "c",
        "city",
        "e",
        "org",
        "f",
    ]
    assert await ids(built, start_entity_id="f", direction="incoming", max_depth=3) == [
        "e",
        "c",
        "a",
        "b",
    ]
    people = await ids(built, start_entity_id="a", max_depth=3, entity_types=["person"])
    assert people == ["b", "c", "e", "f"]
    assert await ids(built, start_entity_id="a", max_depth=3, limit=3) == ["b", "c", "city"]


async def test_dfs_goes_deep_first_within_the_depth(built: GraphMemoryProvider) -> None:
    # a → b → c → e reaches e at depth 3; a → c → e reaches it again at depth 2, so f
    # (a → c → e → f) is within 3 hops and found too.
    found = await ids(built, start_entity_id="a", pattern="dfs", max_depth=3)
    assert found == ["b", "c", "e", "org", "city", "f"]
    assert await ids(built, start_entity_id="a", pattern="dfs", max_depth=1) == ["b", "c"]
    assert await ids(built, start_entity_id="a", pattern="dfs", max_depth=4) == [
        "b",
        "c",
        "e",
        "f",
        "org",
        "city",
    ]
    directed = await ids(
        built, start_entity_id="a", pattern="dfs", max_depth=4, direction="incoming"
    )
    assert directed == ["c", "b", "d"]
    people = await ids(built, start_entity_id="a", pattern="dfs", entity_types=["location"])
    assert people == ["city"]


async def test_dfs_walks_again_from_a_shorter_path(graph: GraphMemoryProvider) -> None:
    # s reaches t first through the long branch (a1 sorts before b), at depth 3, where t may
    # not be expanded; the short branch reaches t at depth 2, and u behind it is in range.
    for name in ("s", "a1", "a2", "b", "t", "u"):
        await entity(graph, name)
    for source, target in [("s", "a1"), ("a1", "a2"), ("a2", "t"), ("s", "b"), ("b", "t")]:
        await graph.add_relation(source, target, "knows")
    await graph.add_relation("t", "u", "knows")
    found = await ids(graph, start_entity_id="s", pattern="dfs", max_depth=3)
    assert found == ["a1", "a2", "t", "b", "u"]


async def test_dfs_runs_inside_a_running_event_loop(built: GraphMemoryProvider) -> None:
    asyncio.get_running_loop()  # this test body runs on the loop
    query = GraphTraversal(start_entity_id="a", pattern=TraversalPattern.DFS, max_depth=2)
    first, second = await asyncio.gather(built.traverse(query), built.traverse(query))
    assert (
        [e.entity_id for e in first]
        == [e.entity_id for e in second]
        == ["b", "c", "city", "e", "org"]
    )
    # The walk itself is a plain function: callable from synchronous code on the loop.
    graph = await built.working_graph()
    walk = Walk(graph, "outgoing", None, datetime.now(tz=UTC))
    assert dfs(walk, "a", 1, lambda _: True, 10) == ["b", "c"]


async def test_shortest_path_honours_depth_direction_and_filters(
    built: GraphMemoryProvider,
) -> None:
    def query(**fields: object) -> GraphTraversal:
        return GraphTraversal.model_validate(
            {"start_entity_id": "a", "pattern": "shortest_path", **fields}
        )

    assert await ids(built, **query(target_entity_id="f", max_depth=4).model_dump()) == [
        "a",
        "c",
        "e",
        "f",
    ]
    assert await ids(built, **query(target_entity_id="f", max_depth=2).model_dump()) == []
    knows_only = query(target_entity_id="f", max_depth=4, relation_types=["knows"])
    assert await ids(built, **knows_only.model_dump()) == ["a", "b", "c", "e", "f"]
    # d points at a: from a it is reachable only against the arrows.
    assert await ids(built, **query(target_entity_id="d", max_depth=5).model_dump()) == []
    back = query(target_entity_id="d", max_depth=5, direction="both")
    assert await ids(built, **back.model_dump()) == ["a", "d"]
    # Paths may pass only through the allowed entity types (their ends excepted).
    via_people = query(target_entity_id="city", max_depth=3, entity_types=["person"])
    assert await ids(built, **via_people.model_dump()) == ["a", "b", "city"]
    via_nobody = query(target_entity_id="f", max_depth=4, entity_types=["organization"])
    assert await ids(built, **via_nobody.model_dump()) == []
    (path,) = await built.paths(query(target_entity_id="f", max_depth=4))
    assert [e.entity_id for e in path.entities] == ["a", "c", "e", "f"]
    assert [r.relation_type for r in path.relations] == ["works_with", "knows", "knows"]


async def test_all_paths_lists_simple_paths_up_to_the_depth(built: GraphMemoryProvider) -> None:
    def query(**fields: object) -> GraphTraversal:
        return GraphTraversal.model_validate(
            {"start_entity_id": "a", "target_entity_id": "c", "pattern": "all_paths", **fields}
        )

    paths = await built.paths(query(max_depth=2))
    assert [[e.entity_id for e in p.entities] for p in paths] == [["a", "b", "c"], ["a", "c"]]
    assert [[e.entity_id for e in p.entities] for p in await built.paths(query(max_depth=1))] == [
        ["a", "c"]
    ]
    knows = await built.paths(query(max_depth=5, relation_types=["knows"]))
    assert [[e.entity_id for e in p.entities] for p in knows] == [["a", "b", "c"]]
    both = await built.paths(query(max_depth=3, direction="both"))
    assert [[e.entity_id for e in p.entities] for p in both] == [
        ["a", "b", "c"],
        ["a", "c"],
    ]
    assert len(await built.paths(query(max_depth=3, limit=1))) == 1
    assert await ids(built, **query(max_depth=2).model_dump()) == ["a", "b", "c"]


async def test_traversals_see_the_graph_as_of_a_moment(graph: GraphMemoryProvider) -> None:
    for name in ("ann", "old", "new"):
        await entity(graph, name)
    then = datetime(2020, 1, 1, tzinfo=UTC)
    await graph.add_relation(
        "ann", "old", "knows", valid_at=then, invalid_at=datetime(2022, 1, 1, tzinfo=UTC)
    )
    await graph.add_relation("ann", "new", "knows", valid_at=datetime(2023, 1, 1, tzinfo=UTC))
    assert await ids(graph, start_entity_id="ann", pattern="neighbors") == ["new"]
    past = await ids(
        graph, start_entity_id="ann", pattern="neighbors", as_of=datetime(2021, 1, 1, tzinfo=UTC)
    )
    assert past == ["old"]
    before = await ids(graph, start_entity_id="ann", as_of=datetime(2019, 1, 1, tzinfo=UTC))
    assert before == []


async def test_bad_traversals_are_typed_errors(built: GraphMemoryProvider) -> None:
    with pytest.raises(InvalidTraversalError):
        GraphTraversal(start_entity_id="a", pattern=TraversalPattern.SHORTEST_PATH)
    with pytest.raises(InvalidTraversalError):
        GraphTraversal(start_entity_id="a", max_depth=-1)
    with pytest.raises(InvalidTraversalError):
        GraphTraversal(start_entity_id="a", limit=0)
    with pytest.raises(ValidationError):
        GraphTraversal(start_entity_id="a", relation_types=["Not A Type"])
    with pytest.raises(InvalidTraversalError):
        await built.paths(GraphTraversal(start_entity_id="a"))
    # Reads are forgiving: an unknown start or target finds nothing.
    assert await ids(built, start_entity_id="nobody") == []
    assert await ids(built, start_entity_id="a", pattern="all_paths", target_entity_id="x") == []
