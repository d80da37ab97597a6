"""The five traversal patterns over a ``WorkingGraph``, as plain synchronous functions.

They never await, so they are safe to call from inside a running event loop and never yield
to it half-way through a walk. Every walk follows only relations that pass the ``Walk``'s
direction, relation types and moment; neighbours are visited in id order, so answers do not
depend on the order relations were added or loaded in.

* ``neighbors``: entities one hop away.
* ``bfs``: by distance, level by level, never past ``max_depth`` hops.
* ``dfs``: depth first (pre-order), never past ``max_depth`` hops; an entity first reached by
  a long path is walked again from a shorter one, so the depth bound hides nothing.
* ``shortest_path``: bidirectional breadth-first search, at most ``max_depth`` hops.
* ``all_paths``: every simple path of at most ``max_depth`` hops.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime

from engramdb.providers.graph.types import (
    Direction,
    GraphRelation,
    GraphTraversal,
    TraversalPattern,
)
from engramdb.providers.graph.working import WorkingGraph

#: Whether the walk may return (or pass through) an entity, by id.
EntityTest = Callable[[str], bool]
_REVERSED: dict[Direction, Direction] = {
    "outgoing": "incoming",
    "incoming": "outgoing",
    "both": "both",
}


@dataclass(frozen=True)
class Walk:
    """Which relations a traversal may follow: direction, types, and the moment they hold."""

    graph: WorkingGraph
    direction: Direction
    relation_types: frozenset[str] | None
    moment: datetime
    known_at: datetime | None = None

    def allows(self, relation: GraphRelation) -> bool:
        """Whether the walk may follow ``relation``."""
        if self.relation_types is not None and relation.relation_type not in self.relation_types:
            return False
        return relation.holds_at(self.moment, self.known_at)

    def steps(self, node: str) -> list[tuple[str, GraphRelation]]:
        """Each (neighbour, relation) reachable from ``node`` in one hop, in id order."""
        graph = self.graph.graph
        sides = []
        if self.direction != "incoming":
            sides.append(graph.succ[node])
        if self.direction != "outgoing":
            sides.append(graph.pred[node])
        found: list[tuple[str, GraphRelation]] = [
            (other, data["relation"])
            for side in sides
            for other, keyed in side.items()
            for data in keyed.values()
            if self.allows(data["relation"])
        ]
        found.sort(key=lambda step: (step[0], step[1].relation_id))
        return found

    def neighbours(self, node: str) -> list[str]:
        """Distinct neighbours of ``node``, in id order."""
        return list(dict.fromkeys(other for other, _ in self.steps(node)))

    def reversed(self) -> Walk:
        """The same walk in the opposite direction (for searching back from a target)."""
        return replace(self, direction=_REVERSED[self.direction])

    def relation(self, source: str, target: str) -> GraphRelation:
        """The first relation the walk may take from ``source`` to ``target``."""
        return next(rel for other, rel in self.steps(source) if other == target)


def neighbors(walk: Walk, start: str, wanted: EntityTest, limit: int) -> list[str]:
    """Entities one hop from ``start``."""
    return [n for n in walk.neighbours(start) if n != start and wanted(n)][:limit]


def bfs(walk: Walk, start: str, max_depth: int, wanted: EntityTest, limit: int) -> list[str]:
    """Entities within ``max_depth`` hops, nearest first."""
    seen = {start}
    level = [start]
    found: list[str] = []
    for _ in range(max_depth):
        following: list[str] = []
        for node in level:
            for other in walk.neighbours(node):
                if other in seen:
                    continue
                seen.add(other)
                following.append(other)
                if wanted(other):
                    found.append(other)
                    if len(found) >= limit:
                        return found
        if not following:
            break
        level = following
    return found


def dfs(walk: Walk, start: str, max_depth: int, wanted: EntityTest, limit: int) -> list[str]:
    """Entities within ``max_depth`` hops, depth first, in the order first reached."""
    depth_of: dict[str, int] = {}
    found: list[str] = []
    stack = [(start, 0)]
    while stack:
        node, depth = stack.pop()
        known = depth_of.get(node)
        if known is not None and known <= depth:
            continue
        depth_of[node] = depth
        if known is None and node != start and wanted(node):
            found.append(node)
            if len(found) >= limit:
                break
        if depth < max_depth:
            following = walk.neighbours(node)
            stack += [
                (other, depth + 1)
                for other in reversed(following)
                if depth_of.get(other, max_depth + 1) > depth + 1
            ]
    return found


def shortest_path(
    walk: Walk, start: str, target: str, max_depth: int, passable: EntityTest
) -> list[str] | None:
    """The entities of a shortest path from ``start`` to ``target`` (both included) of at
    most ``max_depth`` hops, or ``None``. Paths pass only through ``passable`` entities."""
    if start == target:
        return [start]
    back = walk.reversed()
    before: dict[str, str | None] = {start: None}
    after: dict[str, str | None] = {target: None}
    forward, backward = [start], [target]
    for _ in range(max_depth):
        if not forward or not backward:
            return None
        grow_forward = len(forward) <= len(backward)
        side, seen, other_side, goal = (
            (walk, before, after, target) if grow_forward else (back, after, before, start)
        )
        following: list[str] = []
        for node in forward if grow_forward else backward:
            for other in side.neighbours(node):
                if other in seen or not (other == goal or passable(other)):
                    continue
                seen[other] = node
                if other in other_side:
                    return _joined(other, before, after)
                following.append(other)
        if grow_forward:
            forward = following
        else:
            backward = following
    return None


def _joined(meeting: str, before: dict[str, str | None], after: dict[str, str | None]) -> list[str]:
    path: list[str] = []
    node: str | None = meeting
    while node is not None:
        path.append(node)
        node = before[node]
    path.reverse()
    node = after[meeting]
    while node is not None:
        path.append(node)
        node = after[node]
    return path


def all_paths(
    walk: Walk, start: str, target: str, max_depth: int, passable: EntityTest, limit: int
) -> list[list[str]]:
    """Every simple path from ``start`` to ``target`` of at most ``max_depth`` hops (at most
    ``limit`` of them), in depth-first order with neighbours by id."""
    found: list[list[str]] = []
    path = [start]
    on_path = {start}

    def extend(node: str) -> None:
        if len(found) >= limit or len(path) > max_depth:
            return
        for other in walk.neighbours(node):
            if len(found) >= limit:
                return
            if other in on_path:
                continue
            if other == target:
                found.append([*path, target])
                if len(found) >= limit:
                    return
            elif passable(other):
                path.append(other)
                on_path.add(other)
                extend(other)
                path.pop()
                on_path.discard(other)

    if start != target:
        extend(start)
    return found


def walk_of(graph: WorkingGraph, traversal: GraphTraversal, now: datetime) -> Walk:
    """The walk ``traversal`` asks for (its moment: ``as_of``, else ``now``)."""
    types = traversal.relation_types
    return Walk(
        graph,
        traversal.direction,
        None if types is None else frozenset(types),
        traversal.as_of or now,
        traversal.known_at,
    )


def entity_test(graph: WorkingGraph, traversal: GraphTraversal) -> EntityTest:
    """Whether an entity passes ``traversal``'s entity types."""
    kinds = None if traversal.entity_types is None else frozenset(traversal.entity_types)

    def passes(node: str) -> bool:
        if kinds is None:
            return True
        entity = graph.entity(node)
        return entity is not None and entity.entity_type in kinds

    return passes


def reached(graph: WorkingGraph, traversal: GraphTraversal, now: datetime) -> list[str]:
    """The ids ``traversal`` reaches: for the path patterns, the entities on its paths, each
    once, in path order. An unknown start finds nothing."""
    start = traversal.start_entity_id
    if start not in graph.graph:
        return []
    walk, wanted = walk_of(graph, traversal, now), entity_test(graph, traversal)
    limit, depth = traversal.limit, traversal.max_depth
    if traversal.pattern is TraversalPattern.NEIGHBORS:
        return neighbors(walk, start, wanted, limit)
    if traversal.pattern is TraversalPattern.BFS:
        return bfs(walk, start, depth, wanted, limit)
    if traversal.pattern is TraversalPattern.DFS:
        return dfs(walk, start, depth, wanted, limit)
    paths = node_paths(graph, traversal, now)
    return list(dict.fromkeys(node for path in paths for node in path))


def node_paths(graph: WorkingGraph, traversal: GraphTraversal, now: datetime) -> list[list[str]]:
    """The paths (entity ids, start to target) of a path traversal; none for other patterns
    or an unknown start or target."""
    start, target = traversal.start_entity_id, traversal.target_entity_id
    if target is None or start not in graph.graph or target not in graph.graph:
        return []
    walk, passable = walk_of(graph, traversal, now), entity_test(graph, traversal)
    if traversal.pattern is TraversalPattern.SHORTEST_PATH:
        path = shortest_path(walk, start, target, traversal.max_depth, passable)
        return [] if path is None else [path]
    if traversal.pattern is TraversalPattern.ALL_PATHS:
        return all_paths(walk, start, target, traversal.max_depth, passable, traversal.limit)
    return []
