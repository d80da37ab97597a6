"""``GraphMemoryProvider``: graph memory (rfc-2001 §10, rfc-2002 §6.4) over an Engram backend.

Entities and relations are stored records of the engine's backend, scoped like persistent
memory, each written with its event in one transaction (see ``writer.py``); the NetworkX graph
that traversals walk is loaded from them (``working.py``). As a ``MemoryProvider`` it is also
a plain key/value store: entries of another content type live beside the entities and are
searched with them, but only entities take part in the graph.

Reads are forgiving (a missing entity is ``None`` or an empty list); writes are strict (a
relation to a missing entity is ``EntityNotFoundError`` and writes nothing).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engramdb.core.errors import InvalidTraversalError, ValidationError
from engramdb.core.events import ProducerRef
from engramdb.core.scope import Scope
from engramdb.core.types import (
    MemoryEntry,
    MemoryTier,
    ProviderCapabilities,
    RecallResult,
    utc_now,
)
from engramdb.core.validation import DEFAULT_MAX_VALUE_BYTES
from engramdb.llm.client import ChatModel
from engramdb.providers.base import MemoryProvider
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.graph.changes import GraphChanges
from engramdb.providers.graph.extract import Extractor, extractor_for
from engramdb.providers.graph.snapshot import write_snapshot
from engramdb.providers.graph.store import (
    ENTITY_NAMESPACE,
    GRAPH_SPEC,
    rebuild_graph,
)
from engramdb.providers.graph.traversal import node_paths, reached, walk_of
from engramdb.providers.graph.types import (
    EXCLUSIVE_RELATIONS,
    Direction,
    GraphEntity,
    GraphPath,
    GraphRelation,
    GraphTraversal,
    RelationType,
    TraversalPattern,
    type_name,
)
from engramdb.providers.graph.working import GraphCache, WorkingGraph
from engramdb.providers.graph.writer import GraphWriter
from engramdb.providers.indexing import Indexer
from engramdb.storage.backend import Backend


@dataclass(frozen=True)
class GraphIngest:
    """What ``ingest`` added: the entities (as stored, after resolution) and relations."""

    entities: list[GraphEntity]
    relations: list[GraphRelation]


class GraphMemoryProvider(MemoryProvider):
    """Entities, time-aware relations and traversals, persistent in an Engram backend.

    Args:
        backend: where records and events are stored.
        scope: whose graph this is (partitioned by tenant, user and agent).
        indexer: embeds entities for search by meaning (shared with the engine).
        graphs: the engine's working graphs (one per partition, shared by every scope).
        exclusive_relations: relation types a source holds with one target at a time.
        llm: a chat model for extraction from text; rules are used without one.
    """

    def __init__(
        self,
        backend: Backend,
        scope: Scope | None = None,
        *,
        indexer: Indexer | None = None,
        graphs: GraphCache | None = None,
        producer: ProducerRef | None = None,
        exclusive_relations: frozenset[str] = EXCLUSIVE_RELATIONS,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
        llm: ChatModel | None = None,
    ) -> None:
        self.scope = scope or Scope()
        self.indexer = indexer or Indexer(backend)
        self.graphs = graphs or GraphCache(backend)
        self.entries = EventSourcedProvider(
            backend,
            self.scope,
            provider_id=ENTITY_NAMESPACE,
            spec=GRAPH_SPEC,
            indexer=self.indexer,
            producer=producer,
            max_value_bytes=max_value_bytes,
        )
        self.partition = self.entries.partition
        self.writer = GraphWriter(
            backend, self.scope, self.indexer, self.entries.producer, max_value_bytes
        )
        self.exclusive = frozenset(type_name(t, "relation type") for t in exclusive_relations)
        self.extractor: Extractor = extractor_for(llm)

    def capabilities(self) -> ProviderCapabilities:
        """Persistent, searchable, a graph; the manager routes entities to it."""
        return ProviderCapabilities(
            provider_id=ENTITY_NAMESPACE,
            tier=MemoryTier.PERSISTENT,
            supports_search=True,
            supports_graph=True,
            content_types=["entity"],
        )

    async def working_graph(self) -> WorkingGraph:
        """This scope's in-memory graph (loaded on first use)."""
        return await self.graphs.get(self.partition)

    async def _apply(self, plan: GraphChanges) -> None:
        if plan:
            await self.writer.commit(plan)

    def _changes(self, graph: WorkingGraph) -> GraphChanges:
        # Planned on the graph whose lock the caller holds: asking the cache again could
        # hand over a newer copy (another process wrote meanwhile), and the changes and the
        # answer built from ``graph`` would then disagree.
        return GraphChanges(graph, self.exclusive)

    # -- entities -------------------------------------------------------------------------

    async def add_entity(self, entity: GraphEntity, *, resolve: bool = True) -> MemoryEntry:
        """Add or update an entity (``memory.written``, ``content_type="entity"``).

        An entity whose id is new but whose normalised name and type match a stored entity
        (or one of its aliases) is merged into that one (``resolve=False`` turns this off):
        the returned entry's key is the id it is stored under.
        """
        (entry,) = await self.add_entities([entity], resolve=resolve)
        return entry

    async def add_entities(
        self, entities: Sequence[GraphEntity], *, resolve: bool = True
    ) -> list[MemoryEntry]:
        """Add several entities in one transaction (all or none); one entry per entity."""
        graph = await self.working_graph()
        async with graph.lock:
            plan = self._changes(graph)
            planned = plan.extend(entities, resolve)
            await self._apply(plan)
        return [self._entry(graph, e.entity_id) for e in planned]

    def _entry(self, graph: WorkingGraph, entity_id: str) -> MemoryEntry:
        entity = graph.entity(entity_id)
        assert entity is not None
        return MemoryEntry(
            key=entity.entity_id,
            value=entity.to_memory_value(),
            content_type="entity",
            created_at=entity.created_at,
            updated_at=entity.updated_at,
            provider_id=ENTITY_NAMESPACE,
            scope=self.partition,
            version=graph.versions.get(entity_id),
        )

    async def get_entity(self, entity_id: str) -> GraphEntity | None:
        """The entity ``entity_id``, or ``None``."""
        return (await self.working_graph()).entity(entity_id)

    async def find_entity(self, name: str, entity_type: str) -> GraphEntity | None:
        """The entity of ``entity_type`` called ``name`` (or known by it as an alias)."""
        return (await self.working_graph()).find_by_name(type_name(entity_type, "type"), name)

    async def merge_entities(self, kept_id: str, merged_id: str) -> GraphEntity:
        """Merge ``merged_id`` into ``kept_id`` (as a ``same_as`` relation does).

        Raises:
            EntityNotFoundError: either entity does not exist (nothing is written).
        """
        graph = await self.working_graph()
        async with graph.lock:
            plan = self._changes(graph)
            plan.merge(kept_id, merged_id)
            await self._apply(plan)
        merged = graph.entity(kept_id)
        assert merged is not None
        return merged

    # -- relations ------------------------------------------------------------------------

    async def add_relation(
        self,
        source_id: str,
        target_id: str,
        relation_type: str = RelationType.RELATED_TO,
        properties: dict[str, Any] | None = None,
        weight: float = 1.0,
        *,
        valid_at: datetime | None = None,
        invalid_at: datetime | None = None,
        sources: list[str] | None = None,
    ) -> GraphRelation:
        """Add a directed relation (``memory.linked``); returns it as stored.

        ``valid_at`` is when it became true (default: now). Adding a fact already held returns
        the held one. A new fact of an exclusive type ends the contradicting one
        (``memory.invalidated``); ``same_as`` merges ``target_id`` into ``source_id``.

        Raises:
            EntityNotFoundError: ``source_id`` or ``target_id`` does not exist (nothing is
                written).
        """
        relation = GraphRelation(
            source_id=source_id,
            target_id=target_id,
            relation_type=relation_type,
            properties=properties or {},
            weight=weight,
            valid_at=valid_at,
            invalid_at=invalid_at,
            sources=sources or [],
        )
        (stored,) = await self.add_relations([relation])
        return stored

    async def add_relations(self, relations: Sequence[GraphRelation]) -> list[GraphRelation]:
        """Add several relations in one transaction (all or none), in order."""
        graph = await self.working_graph()
        async with graph.lock:
            plan = self._changes(graph)
            now = utc_now()
            planned = [plan.put_relation(r, now) for r in relations]
            await self._apply(plan)
        return [graph.relation(r.relation_id) or r for r in planned]

    async def invalidate_relation(
        self, relation_id: str, *, at: datetime | None = None
    ) -> GraphRelation:
        """End a fact at ``at`` (default: now) without deleting it (``memory.invalidated``).

        Raises:
            RelationNotFoundError: there is no such relation.
        """
        graph = await self.working_graph()
        async with graph.lock:
            plan = self._changes(graph)
            plan.end_by_id(relation_id, at)
            await self._apply(plan)
        ended = graph.relation(relation_id)
        assert ended is not None
        return ended

    async def delete_relation(self, relation_id: str) -> None:
        """Delete a relation outright (``memory.deleted``); to end a fact, invalidate it.

        Raises:
            RelationNotFoundError: there is no such relation.
        """
        graph = await self.working_graph()
        async with graph.lock:
            plan = self._changes(graph)
            plan.require_relation(relation_id)
            plan.remove_relation(relation_id)
            await self._apply(plan)

    async def get_relations(
        self,
        entity_id: str,
        direction: Direction = "outgoing",
        relation_type: str | None = None,
        *,
        as_of: datetime | None = None,
        known_at: datetime | None = None,
        history: bool = False,
    ) -> list[GraphRelation]:
        """Relations of ``entity_id`` that hold now (or at ``as_of``, as Engram knew them at
        ``known_at``; every one ever stored with ``history``), optionally of one type, oldest
        first."""
        graph = await self.working_graph()
        moment = as_of or utc_now()
        wanted = None if relation_type is None else type_name(relation_type, "relation_type")
        found = [
            r
            for r in graph.relations_of(entity_id, direction)
            if (wanted is None or r.relation_type == wanted)
            and (history or r.holds_at(moment, known_at))
        ]
        return sorted(found, key=lambda r: (r.valid_at or r.created_at, r.relation_id))

    # -- traversal ------------------------------------------------------------------------

    async def traverse(self, traversal: GraphTraversal) -> list[GraphEntity]:
        """The entities a traversal reaches (see ``GraphTraversal``): for the path patterns,
        the entities on the path(s) from start to target, each once, in path order. An
        unknown start or target finds nothing."""
        graph = await self.working_graph()
        return [e for e in map(graph.entity, reached(graph, traversal, utc_now())) if e]

    async def paths(self, traversal: GraphTraversal) -> list[GraphPath]:
        """The paths of a ``shortest_path`` or ``all_paths`` traversal, with the relation
        taken at each step.

        Raises:
            InvalidTraversalError: the traversal's pattern is not a path pattern.
        """
        if traversal.pattern not in (TraversalPattern.SHORTEST_PATH, TraversalPattern.ALL_PATHS):
            raise InvalidTraversalError(
                "paths need the shortest_path or all_paths pattern",
                pattern=traversal.pattern.value,
            )
        graph = await self.working_graph()
        now = utc_now()
        walk = walk_of(graph, traversal, now)
        result = []
        for nodes in node_paths(graph, traversal, now):
            entities = [e for e in map(graph.entity, nodes) if e]
            steps = [walk.relation(a, b) for a, b in itertools.pairwise(nodes)]
            result.append(GraphPath(entities=entities, relations=steps))
        return result

    # -- search and text ------------------------------------------------------------------

    async def search_entities(
        self, query: str, *, limit: int = 10, entity_types: list[str] | None = None
    ) -> list[tuple[GraphEntity, float]]:
        """Entities matching ``query`` by name, alias, property or meaning, best first, with
        scores in [0, 1]."""
        kinds = None if entity_types is None else {type_name(t, "type") for t in entity_types}
        hits = await self.entries.search(
            query, limit=limit if kinds is None else limit * 5, content_types=["entity"]
        )
        found = []
        for hit in hits:
            entity = GraphEntity.model_validate(
                {
                    **hit.entry.value,
                    "created_at": hit.entry.created_at,
                    "updated_at": hit.entry.updated_at,
                }
            )
            if kinds is None or entity.entity_type in kinds:
                found.append((entity, hit.score))
        return found[:limit]

    async def ingest(
        self,
        text: str,
        *,
        source: str | None = None,
        occurred_at: datetime | None = None,
        speaker: str | None = None,
    ) -> GraphIngest:
        """Turn ``text`` into entities and relations (by the LLM when one is configured, else
        by rules) and add them; ``source`` (e.g. ``"episodic:<id>"``) is recorded on each as
        provenance, ``occurred_at`` is when the facts became true, and ``speaker`` is who
        "I" is (default: the scope's user)."""
        who = speaker or self.scope.user or "user"
        extraction = await self.extractor.extract(text, speaker=who)
        sources = [source] if source else []
        graph = await self.working_graph()
        async with graph.lock:
            plan = self._changes(graph)
            ids = {}
            for found in extraction.entities:
                entity = GraphEntity(
                    name=found.name, entity_type=found.entity_type, sources=sources
                )
                ids[found] = plan.put_entity(entity).entity_id
            now = utc_now()
            relations = [
                plan.put_relation(
                    GraphRelation(
                        source_id=ids[r.source],
                        target_id=ids[r.target],
                        relation_type=r.relation_type,
                        properties=r.properties,
                        valid_at=occurred_at,
                        sources=sources,
                    ),
                    now,
                )
                for r in extraction.relations
            ]
            await self._apply(plan)
        entities = [graph.entity(i) for i in dict.fromkeys(ids.values())]
        return GraphIngest(
            [e for e in entities if e is not None],
            [graph.relation(r.relation_id) or r for r in relations],
        )

    async def export_json(self, path: str | Path) -> Path:
        """Write this scope's graph (every entity and relation, ended ones included) to a JSON
        file, atomically: a reader sees the old file or the new one, never half of one.

        The file is written on a worker thread, with writers to this graph held off meanwhile.
        """
        graph = await self.working_graph()
        async with graph.lock:
            return await asyncio.to_thread(write_snapshot, graph, Path(path))

    # -- MemoryProvider -------------------------------------------------------------------

    async def write(
        self,
        key: str,
        value: Any,
        *,
        content_type: str = "fact",
        metadata: dict[str, Any] | None = None,
        ttl_ms: int | None = None,
    ) -> MemoryEntry:
        """Store an entity under ``key`` (``content_type="entity"``, value a ``GraphEntity``
        or its dict), or a plain entry of any other content type beside the entities."""
        graph = await self.working_graph()
        if content_type != "entity":
            if graph.entity(key) is not None:
                raise ValidationError(
                    f"{key!r} is a graph entity; write it with content_type='entity'", key=key
                )
            return await self.entries.write(
                key, value, content_type=content_type, metadata=metadata, ttl_ms=ttl_ms
            )
        if metadata or ttl_ms is not None:
            raise ValidationError("entities carry properties, not metadata or a TTL", key=key)
        if isinstance(value, GraphEntity):
            value = value.model_dump()
        if not isinstance(value, dict):
            raise ValidationError("an entity's value must be a GraphEntity or a dict", key=key)
        entity = GraphEntity.model_validate({**value, "entity_id": key})
        return await self.add_entity(entity, resolve=False)

    async def read(self, key: str) -> MemoryEntry | None:
        """The entry under ``key`` (an entity's value is its stored form)."""
        return await self.entries.read(key)

    async def delete(self, key: str) -> bool:
        """Remove ``key``; an entity goes with every relation touching it (one
        ``memory.deleted`` each, in one transaction)."""
        graph = await self.working_graph()
        if graph.entity(key) is None:
            return await self.entries.delete(key)
        async with graph.lock:
            plan = self._changes(graph)
            plan.remove_entity(key)
            await self._apply(plan)
        return True

    async def search(
        self,
        query: str,
        *,
        limit: int = 10,
        content_types: list[str] | None = None,
        metadata_filters: dict[str, Any] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> list[RecallResult]:
        """Entities (and plain entries) matching ``query`` by words and meaning (stored
        within ``since`` / ``until``, if given)."""
        return await self.entries.search(
            query,
            limit=limit,
            content_types=content_types,
            metadata_filters=metadata_filters,
            since=since,
            until=until,
        )

    async def list_keys(
        self, *, content_types: list[str] | None = None, prefix: str | None = None
    ) -> list[str]:
        """Keys of entities and entries, sorted."""
        return await self.entries.list_keys(content_types=content_types, prefix=prefix)

    async def rebuild(self) -> None:
        """Recompute this scope's entities and relations from the log and reload the graph."""
        await rebuild_graph(self.entries.backend, self.partition)
        self.graphs.drop(self.partition)
        self.indexer.forget_all()
