"""Graph tools: add entities and relations, search entities, and walk from one
(``mem.graph``)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from engramdb.core.errors import EntityNotFoundError
from engramdb.mcp.binding import bound
from engramdb.mcp.memory_tools import LimitArg, QueryArg
from engramdb.mcp.shapes import redacted
from engramdb.mcp.tooling import READ_ONLY, WRITES, engram_tool
from engramdb.providers.graph import GraphEntity, GraphMemoryProvider
from engramdb.providers.graph.types import Direction, GraphTraversal, TraversalPattern

TypeName = Annotated[
    str, Field(pattern=r"^[a-z][a-z0-9_]*$", max_length=64, description="A lowercase name.")
]
EntityId = Annotated[
    str,
    Field(
        min_length=1,
        max_length=512,
        description="An entity's id, as graph_add_entity or graph_search answered it.",
    ),
]
TargetId = Annotated[
    str | None,
    Field(
        min_length=1,
        max_length=512,
        description="The entity to reach (shortest_path and all_paths only).",
    ),
]


def entity_json(entity: GraphEntity) -> dict[str, Any]:
    """An entity as a model needs it: id, name, type, aliases and properties."""
    return entity.model_dump(
        mode="json", include={"entity_id", "name", "entity_type", "aliases", "properties"}
    )


async def _require(graph: GraphMemoryProvider, entity_id: str) -> None:
    if await graph.get_entity(entity_id) is None:
        raise EntityNotFoundError(
            f"no entity {entity_id!r}: find its id with graph_search", entity_id=entity_id
        )


def register(server: MCPServer) -> None:
    """Add the graph tools to ``server``."""

    @engram_tool(server, WRITES)
    async def graph_add_entity(
        name: Annotated[str, Field(min_length=1, max_length=1000, description="Its usual name.")],
        entity_type: Annotated[
            str,
            Field(
                pattern=r"^[a-z][a-z0-9_]*$",
                description="person, organization, location, event, concept, object, or "
                "your own lowercase name.",
            ),
        ] = "custom",
        aliases: Annotated[list[str] | None, Field(description="Other names.")] = None,
        properties: Annotated[dict[str, Any] | None, Field(description="Attributes.")] = None,
    ) -> dict[str, Any]:
        """Add a person, place, organization or other thing to the knowledge graph. One of
        the same type and name already there is updated instead, so its id stays. Answers
        the entity with its id, to link it with `graph_add_relation`."""
        graph = bound().writer().graph
        entity = GraphEntity(
            name=name,
            entity_type=entity_type,
            aliases=aliases or [],
            properties=properties or {},
        )
        entry = await graph.add_entity(entity)
        stored = await graph.get_entity(entry.key)
        assert stored is not None  # just written under the lock
        return entity_json(stored)

    @engram_tool(server, WRITES)
    async def graph_add_relation(
        source_id: EntityId,
        target_id: EntityId,
        relation_type: Annotated[
            str,
            Field(
                pattern=r"^[a-z][a-z0-9_]*$",
                description="How source relates to target, e.g. works_at, lives_in, knows, "
                "part_of, related_to.",
            ),
        ] = "related_to",
        properties: Annotated[dict[str, Any] | None, Field(description="Attributes.")] = None,
    ) -> dict[str, Any]:
        """Link two entities of the graph (ids from `graph_add_entity` or `graph_search`).
        A new fact of an exclusive kind (lives_in, works_at, …) ends the one it
        contradicts, which stays in the history."""
        graph = bound().writer().graph
        relation = await graph.add_relation(source_id, target_id, relation_type, properties)
        return relation.model_dump(
            mode="json",
            include={"relation_id", "source_id", "target_id", "relation_type", "properties"},
        )

    @engram_tool(server, READ_ONLY)
    async def graph_search(
        query: QueryArg,
        limit: LimitArg = 10,
        entity_types: Annotated[
            list[TypeName] | None, Field(description="Only entities of these types.")
        ] = None,
    ) -> dict[str, Any]:
        """Find entities of the knowledge graph by name, alias, property or meaning, best
        first. Use it to get the id of someone or something before traversing."""
        memory = bound().memory()
        found = await memory.graph.search_entities(query, limit=limit, entity_types=entity_types)
        items = [{**entity_json(e), "score": s} for e, s in found]
        return redacted(memory, {"items": items})

    @engram_tool(server, READ_ONLY)
    async def graph_traverse(
        start_entity_id: EntityId,
        pattern: Annotated[
            TraversalPattern,
            Field(
                description="'neighbors' (one hop), 'bfs' or 'dfs' (everything reachable), "
                "'shortest_path' or 'all_paths' (to target_entity_id)."
            ),
        ] = TraversalPattern.NEIGHBORS,
        target_entity_id: TargetId = None,
        relation_types: Annotated[
            list[TypeName] | None, Field(description="Follow only these relations.")
        ] = None,
        direction: Annotated[Direction, Field(description="Which edges to follow.")] = "both",
        max_depth: Annotated[
            int, Field(ge=0, le=8, description="At most this many hops from the start.")
        ] = 2,
        limit: Annotated[
            int, Field(ge=1, le=500, description="At most this many entities (or paths).")
        ] = 50,
    ) -> dict[str, Any]:
        """Walk the knowledge graph from one entity to find who or what it is connected to
        (and how, for the path patterns)."""
        memory = bound().memory()
        graph = memory.graph
        traversal = GraphTraversal.model_validate(
            {
                "start_entity_id": start_entity_id,
                "pattern": pattern,
                "target_entity_id": target_entity_id,
                "relation_types": relation_types,
                "direction": direction,
                "max_depth": max_depth,
                "limit": limit,
            }
        )
        await _require(graph, start_entity_id)
        if target_entity_id is not None:
            await _require(graph, target_entity_id)
        answer: dict[str, Any] = {
            "entities": [entity_json(e) for e in await graph.traverse(traversal)]
        }
        if pattern in (TraversalPattern.SHORTEST_PATH, TraversalPattern.ALL_PATHS):
            answer["paths"] = [
                {
                    "entities": [e.entity_id for e in p.entities],
                    "relations": [r.relation_type for r in p.relations],
                }
                for p in await graph.paths(traversal)
            ]
        return redacted(memory, answer)
