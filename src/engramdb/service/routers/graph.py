"""Graph memory of the caller's scope: entities, time-aware relations, traversals, search and
extraction from text (``mem.graph`` over HTTP).

Unlike the engine's forgiving reads, the API names what is missing: an unknown entity is a
404 (``entity_not_found``) wherever one is named, an unknown relation a 404
(``relation_not_found``), a traversal that cannot be run a 422 (``invalid_traversal``).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Query
from pydantic import AwareDatetime

from engramdb.core.errors import EntityNotFoundError, RelationNotFoundError
from engramdb.engine import Engine
from engramdb.providers.graph import GraphEntity, GraphMemoryProvider, GraphRelation
from engramdb.providers.graph.types import Direction, GraphTraversal, TraversalPattern
from engramdb.service.auth import Caller, ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.models import (
    Deleted,
    EntityHit,
    EntityHits,
    EntityIn,
    Ingested,
    IngestIn,
    InvalidateIn,
    MergeIn,
    RelationIn,
    Relations,
    TraversalIn,
    Traversed,
    TypeName,
)
from engramdb.service.routing import KeyPath, area_router

router = area_router("/v1/memory/graph", "graph")
_PATHS = (TraversalPattern.SHORTEST_PATH, TraversalPattern.ALL_PATHS)


def _graph(caller: Caller, engine: Engine) -> GraphMemoryProvider:
    return caller.memory(engine).graph


async def _entity(graph: GraphMemoryProvider, entity_id: str) -> GraphEntity:
    entity = await graph.get_entity(entity_id)
    if entity is None:
        raise EntityNotFoundError(f"no entity {entity_id!r}", entity_id=entity_id)
    return entity


@router.post("/entities", status_code=201, summary="Add an entity")
async def add_entity(body: EntityIn, caller: WriteCaller, engine: EngineDep) -> GraphEntity:
    """Add an entity, or update the one under ``entity_id`` (or, with ``resolve``, the one of
    the same type known by the same name); the answer is the entity as stored."""
    graph = _graph(caller, engine)
    fields = body.model_dump(exclude={"resolve"}, exclude_none=True)
    entry = await graph.add_entity(GraphEntity.model_validate(fields), resolve=body.resolve)
    return await _entity(graph, entry.key)


@router.get("/entities/{entity_id}", summary="Read an entity")
async def get_entity(entity_id: KeyPath, caller: ReadCaller, engine: EngineDep) -> GraphEntity:
    """The entity ``entity_id``."""
    return await _entity(_graph(caller, engine), entity_id)


@router.delete("/entities/{entity_id}", summary="Delete an entity")
async def delete_entity(entity_id: KeyPath, caller: WriteCaller, engine: EngineDep) -> Deleted:
    """Delete the entity with every relation touching it (their history stays in the event
    log)."""
    graph = _graph(caller, engine)
    await _entity(graph, entity_id)
    return Deleted(deleted=await graph.delete(entity_id))


@router.post("/entities/{entity_id}/merge", summary="Merge an entity into this one")
async def merge_entities(
    entity_id: KeyPath, body: MergeIn, caller: WriteCaller, engine: EngineDep
) -> GraphEntity:
    """Merge ``merged_id`` into ``entity_id`` (as a ``same_as`` relation does): one entity
    with both one's names and relations; the answer is the entity kept."""
    return await _graph(caller, engine).merge_entities(entity_id, body.merged_id)


@router.get("/entities/{entity_id}/relations", summary="Relations of an entity")
async def get_relations(
    entity_id: KeyPath,
    caller: ReadCaller,
    engine: EngineDep,
    direction: Direction = "outgoing",
    relation_type: Annotated[TypeName | None, Query()] = None,
    as_of: Annotated[AwareDatetime | None, Query(description="Relations held then")] = None,
    known_at: Annotated[
        AwareDatetime | None, Query(description="As Engram knew them at that moment")
    ] = None,
    history: Annotated[bool, Query(description="Every relation ever stored")] = False,
) -> Relations:
    """The relations of ``entity_id`` that hold now (or at ``as_of``), optionally of one
    type, oldest first."""
    graph = _graph(caller, engine)
    await _entity(graph, entity_id)
    found = await graph.get_relations(
        entity_id, direction, relation_type, as_of=as_of, known_at=known_at, history=history
    )
    return Relations(items=found)


@router.post("/relations", status_code=201, summary="Add a relation")
async def add_relation(body: RelationIn, caller: WriteCaller, engine: EngineDep) -> GraphRelation:
    """Add a relation between two stored entities; adding a fact already held returns the
    held one."""
    return await _graph(caller, engine).add_relation(
        body.source_id,
        body.target_id,
        body.relation_type,
        body.properties,
        body.weight,
        valid_at=body.valid_at,
        invalid_at=body.invalid_at,
        sources=body.sources,
    )


@router.post("/relations/{relation_id}/invalidate", summary="End a relation")
async def invalidate_relation(
    relation_id: KeyPath, caller: WriteCaller, engine: EngineDep, body: InvalidateIn | None = None
) -> GraphRelation:
    """End the fact a relation states at ``at`` (default: now) without deleting it: it stops
    holding from then on and stays in the relation's history."""
    at = body.at if body is not None else None
    return await _graph(caller, engine).invalidate_relation(relation_id, at=at)


@router.delete("/relations/{relation_id}", summary="Delete a relation")
async def delete_relation(relation_id: KeyPath, caller: WriteCaller, engine: EngineDep) -> Deleted:
    """Delete a relation outright (to end a fact instead, invalidate it)."""
    graph = _graph(caller, engine)
    if (await graph.working_graph()).relation(relation_id) is None:
        raise RelationNotFoundError(f"no relation {relation_id!r}", relation_id=relation_id)
    await graph.delete_relation(relation_id)
    return Deleted(deleted=True)


@router.post("/traverse", summary="Traverse the graph")
async def traverse(body: TraversalIn, caller: ReadCaller, engine: EngineDep) -> Traversed:
    """The entities a traversal reaches from ``start_entity_id`` (see the body); for
    ``shortest_path`` and ``all_paths`` the paths too."""
    graph = _graph(caller, engine)
    traversal = GraphTraversal.model_validate(body.model_dump())
    await _entity(graph, traversal.start_entity_id)
    if traversal.target_entity_id is not None:
        await _entity(graph, traversal.target_entity_id)
    paths = await graph.paths(traversal) if traversal.pattern in _PATHS else None
    return Traversed(entities=await graph.traverse(traversal), paths=paths)


@router.get("/search", summary="Search entities")
async def search_entities(
    caller: ReadCaller,
    engine: EngineDep,
    q: Annotated[str, Query(min_length=1, max_length=10_000)],
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    entity_type: Annotated[
        list[TypeName] | None, Query(max_length=64, description="Only entities of these types")
    ] = None,
) -> EntityHits:
    """Entities matching ``q`` by name, alias, property or meaning, best first."""
    found = await _graph(caller, engine).search_entities(q, limit=limit, entity_types=entity_type)
    return EntityHits(items=[EntityHit(entity=e, score=s) for e, s in found])


@router.post("/ingest", status_code=201, summary="Extract entities and relations from text")
async def ingest(body: IngestIn, caller: WriteCaller, engine: EngineDep) -> Ingested:
    """Turn ``text`` into entities and relations (by the configured chat model, else by
    rules) and add them to the graph."""
    added = await _graph(caller, engine).ingest(
        body.text, source=body.source, occurred_at=body.occurred_at, speaker=body.speaker
    )
    return Ingested(entities=added.entities, relations=added.relations)
