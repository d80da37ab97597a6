"""How graph memory is stored: entities in the namespace ``graph`` (beside any plain entries
written to the provider), relations in ``graph.relations``, both partitioned like persistent
memory (tenant, user, agent).

Entities are ordinary ``memory.written`` entries (``content_type="entity"``), so the shared
key/value projection replays them. Relations have their own projection, defined here by
``fold_relations``: ``memory.linked`` stores a relation whole, ``memory.invalidated`` ends it
(kept, not deleted) and ``memory.deleted`` removes it. ``rebuild_graph`` recomputes both
namespaces from the log.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from typing import Any

from engramdb.core.events import (
    EventEnvelope,
    MemoryDeleted,
    MemoryInvalidated,
    MemoryLinked,
)
from engramdb.core.scope import LEVELS, PERSISTENT_LEVELS, Scope, ScopeFilter
from engramdb.core.validation import model_value
from engramdb.providers.event_sourced import rebuild_namespace
from engramdb.providers.graph.types import GraphEntity, GraphRelation
from engramdb.providers.projection import ProjectionSpec, plain_key_text, upsert
from engramdb.providers.text_match import flatten_text
from engramdb.storage.backend import Backend, EventQuery
from engramdb.storage.records import Record

ENTITY_NAMESPACE = "graph"
RELATION_NAMESPACE = "graph.relations"
GRAPH_NAMESPACES = (ENTITY_NAMESPACE, RELATION_NAMESPACE)
GRAPH_LEVELS = PERSISTENT_LEVELS
RELATION_EVENTS = (
    MemoryLinked.event_type,
    MemoryInvalidated.event_type,
    MemoryDeleted.event_type,
)


def is_entity_value(value: Any) -> bool:
    """Whether a stored value is a graph entity (rather than a plain entry)."""
    return isinstance(value, dict) and "entity_type" in value and "name" in value


def entity_words(value: dict[str, Any]) -> str:
    """What an entity is found by: its names, its type and its properties."""
    names = " ".join([str(value.get("name", "")), *map(str, value.get("aliases", []))])
    return f"{names} {value.get('entity_type', '')} {flatten_text(value.get('properties', {}))}"


def entity_key_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """Full-text key of a record of the ``graph`` namespace."""
    if is_entity_value(value):
        return entity_words(value).lower()
    return plain_key_text(key, value, occurred_at)


def entity_embed_text(key: str, value: Any, occurred_at: datetime | None) -> str:
    """The text an entity's vector is computed from (its meaning, not its id)."""
    return entity_words(value) if is_entity_value(value) else flatten_text(value)


#: The projection of the entity namespace: the shared key/value fold, entity-aware text.
GRAPH_SPEC = ProjectionSpec(
    ENTITY_NAMESPACE,
    GRAPH_LEVELS,
    key_text=entity_key_text,
    vectors=True,
    embed_text=entity_embed_text,
)


def entity_from_record(record: Record) -> GraphEntity:
    """The entity a stored record holds, with the store's creation and update times."""
    return GraphEntity.model_validate(
        {**record.value, "created_at": record.created_at, "updated_at": record.updated_at}
    )


def relation_from_record(record: Record) -> GraphRelation:
    """The relation a stored record holds."""
    return GraphRelation.model_validate(record.value)


def relation_record(origin: Scope, relation: GraphRelation, at: datetime) -> Record:
    """The record of ``relation`` written in scope ``origin`` at ``at`` (as if new)."""
    return Record(
        namespace=RELATION_NAMESPACE,
        scope=origin.narrow(GRAPH_LEVELS),
        key=relation.relation_id,
        value=model_value(relation, what="relation"),
        content_type="relation",
        metadata={},
        created_at=at,
        thread=origin.session or "",
    )


def fold_relations(events: Iterable[EventEnvelope]) -> list[Record]:
    """Replay relation events into the relation records they leave behind."""
    state: dict[tuple[Scope, str], Record] = {}
    for envelope in events:
        if envelope.provider_id != RELATION_NAMESPACE or envelope.payload.get("redacted") == 1:
            continue
        partition = envelope.scope.narrow(GRAPH_LEVELS)
        kind = envelope.event_type
        if kind == MemoryLinked.event_type:
            linked = MemoryLinked.from_envelope(envelope)
            if linked.key is None or linked.value is None:
                continue  # a same_as merge: its effects are the events that follow it
            slot = (partition, linked.key)
            relation = GraphRelation.model_validate(linked.value)
            new = relation_record(envelope.scope, relation, envelope.occurred_at)
            state[slot] = upsert(state.get(slot), new)
        elif kind == MemoryInvalidated.event_type:
            ended = MemoryInvalidated.from_envelope(envelope)
            slot = (partition, ended.key)
            previous = state.get(slot)
            if previous is not None:
                relation = invalidated(relation_from_record(previous), ended)
                new = relation_record(envelope.scope, relation, envelope.occurred_at)
                state[slot] = upsert(previous, new)
        elif kind == MemoryDeleted.event_type:
            state.pop((partition, MemoryDeleted.from_envelope(envelope).key), None)
    return list(state.values())


def invalidated(relation: GraphRelation, event: MemoryInvalidated) -> GraphRelation:
    """``relation`` as ``event`` ends it."""
    return relation.model_copy(
        update={"invalid_at": event.invalid_at, "expired_at": event.expired_at}
    )


async def rebuild_graph(
    backend: Backend,
    partition: Scope | None = None,
    *,
    progress: Callable[[int], None] | None = None,
) -> dict[str, int]:
    """Recompute the entities and relations of one partition (or all) from the log; returns
    how many records each namespace holds afterwards."""
    entities = await rebuild_namespace(backend, GRAPH_SPEC, partition, progress=progress)
    source = EventQuery(
        event_types=RELATION_EVENTS,
        provider_id=RELATION_NAMESPACE,
        scope=None if partition is None else ScopeFilter(partition, GRAPH_LEVELS),
    )

    def fold(events: Iterator[EventEnvelope]) -> list[Record]:
        return fold_relations(_counted(events, progress))

    relations = await backend.rebuild(
        RELATION_NAMESPACE,
        None if partition is None else ScopeFilter(partition, LEVELS),
        source,
        fold,
    )
    return {ENTITY_NAMESPACE: entities, RELATION_NAMESPACE: relations}


def _counted(
    events: Iterator[EventEnvelope], progress: Callable[[int], None] | None
) -> Iterator[EventEnvelope]:
    for n, event in enumerate(events, 1):
        if progress is not None and n % 1000 == 0:
            progress(1000)
        yield event
