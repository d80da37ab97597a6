"""``GraphClient``: the graph endpoints of the service, as ``MemoryClient.graph`` (the remote
twin of ``mem.graph``): entities, relations, traversals, search and extraction from text."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.client.fields import given, segment
from engramdb.core.errors import EntityNotFoundError
from engramdb.providers.graph.types import (
    Direction,
    GraphEntity,
    GraphRelation,
    GraphTraversal,
    TraversalPattern,
)
from engramdb.service.models import EntityHits, Ingested, Relations, Traversed

if TYPE_CHECKING:
    from engramdb.client.client import MemoryClient

_PREFIX = "/v1/memory/graph"


class GraphClient:
    """The graph of the client's scope, over HTTP; errors are the engine's
    (``EntityNotFoundError``, ``RelationNotFoundError``, ``InvalidTraversalError``)."""

    def __init__(self, client: MemoryClient) -> None:
        self._client = client

    async def add_entity(
        self,
        name: str,
        entity_type: str = "custom",
        *,
        entity_id: str | None = None,
        aliases: list[str] | None = None,
        properties: dict[str, Any] | None = None,
        sources: list[str] | None = None,
        resolve: bool = True,
    ) -> GraphEntity:
        """Add an entity (or update the one it resolves to); returns it as stored."""
        body = given(
            name=name,
            entity_type=entity_type,
            entity_id=entity_id,
            aliases=aliases,
            properties=properties,
            sources=sources,
            resolve=resolve,
        )
        return await self._client._call(GraphEntity, "POST", f"{_PREFIX}/entities", json=body)

    async def get_entity(self, entity_id: str) -> GraphEntity | None:
        """The entity ``entity_id``, or ``None``."""
        try:
            return await self._client._call(
                GraphEntity, "GET", f"{_PREFIX}/entities/{segment(entity_id)}"
            )
        except EntityNotFoundError:
            return None

    async def delete_entity(self, entity_id: str) -> bool:
        """Delete an entity with its relations; ``False`` if there was none."""
        try:
            await self._client.request("DELETE", f"{_PREFIX}/entities/{segment(entity_id)}")
        except EntityNotFoundError:
            return False
        return True

    async def add_relation(
        self,
        source_id: str,
        target_id: str,
        relation_type: str = "related_to",
        properties: dict[str, Any] | None = None,
        weight: float = 1.0,
        *,
        valid_at: datetime | None = None,
        invalid_at: datetime | None = None,
        sources: list[str] | None = None,
    ) -> GraphRelation:
        """Add a relation between two stored entities; returns it as stored.

        Raises:
            EntityNotFoundError: either entity does not exist (nothing is written).
        """
        body = given(
            source_id=source_id,
            target_id=target_id,
            relation_type=relation_type,
            properties=properties,
            weight=weight,
            valid_at=valid_at,
            invalid_at=invalid_at,
            sources=sources,
        )
        return await self._client._call(GraphRelation, "POST", f"{_PREFIX}/relations", json=body)

    async def invalidate_relation(
        self, relation_id: str, *, at: datetime | None = None
    ) -> GraphRelation:
        """End the fact a relation states at ``at`` (default: now), keeping it in history.

        Raises:
            RelationNotFoundError: there is no such relation.
        """
        path = f"{_PREFIX}/relations/{segment(relation_id)}/invalidate"
        return await self._client._call(GraphRelation, "POST", path, json=given(at=at))

    async def merge_entities(self, kept_id: str, merged_id: str) -> GraphEntity:
        """Merge ``merged_id`` into ``kept_id``; returns the entity kept.

        Raises:
            EntityNotFoundError: either entity does not exist (nothing is written).
        """
        path = f"{_PREFIX}/entities/{segment(kept_id)}/merge"
        return await self._client._call(GraphEntity, "POST", path, json={"merged_id": merged_id})

    async def delete_relation(self, relation_id: str) -> None:
        """Delete a relation outright.

        Raises:
            RelationNotFoundError: there is no such relation.
        """
        await self._client.request("DELETE", f"{_PREFIX}/relations/{segment(relation_id)}")

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
        """Relations of ``entity_id`` holding now (or at ``as_of``), oldest first.

        Raises:
            EntityNotFoundError: there is no such entity.
        """
        params = given(
            direction=direction,
            relation_type=relation_type,
            as_of=as_of,
            known_at=known_at,
            history=history,
        )
        path = f"{_PREFIX}/entities/{segment(entity_id)}/relations"
        return (await self._client._call(Relations, "GET", path, params=params)).items

    async def traverse(
        self,
        start_entity_id: str | GraphTraversal,
        pattern: TraversalPattern | str = TraversalPattern.BFS,
        **options: Any,
    ) -> Traversed:
        """Run a traversal: a ``GraphTraversal``, or its fields (``target_entity_id``,
        ``max_depth``, ``direction``, ``relation_types``, ``entity_types``, ``limit``,
        ``as_of``, ``known_at``). The answer holds the entities reached and, for the path
        patterns, the paths.

        Raises:
            EntityNotFoundError: the start or target entity does not exist.
            InvalidTraversalError: the traversal cannot be run (a path without a target).
        """
        if isinstance(start_entity_id, GraphTraversal):
            body = start_entity_id.model_dump(mode="json", exclude_none=True)
        else:
            body = given(start_entity_id=start_entity_id, pattern=pattern, **options)
        return await self._client._call(Traversed, "POST", f"{_PREFIX}/traverse", json=body)

    async def search(
        self, query: str, *, limit: int = 10, entity_types: list[str] | None = None
    ) -> list[tuple[GraphEntity, float]]:
        """Entities matching ``query`` with their scores, best first."""
        params = {"q": query, "limit": limit, "entity_type": entity_types}
        found = await self._client._call(EntityHits, "GET", f"{_PREFIX}/search", params=params)
        return [(hit.entity, hit.score) for hit in found.items]

    async def ingest(
        self,
        text: str,
        *,
        source: str | None = None,
        occurred_at: datetime | None = None,
        speaker: str | None = None,
    ) -> Ingested:
        """Turn ``text`` into entities and relations and add them."""
        body = given(text=text, source=source, occurred_at=occurred_at, speaker=speaker)
        return await self._client._call(Ingested, "POST", f"{_PREFIX}/ingest", json=body)
