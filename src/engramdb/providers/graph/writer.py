"""``GraphWriter``: stores a planned ``GraphChanges`` — every record change and the event that
describes it — in one ``Backend.commit``, then brings the working graph and the vector index
in step with what was stored.

Events, in log order: ``memory.linked`` for each ``same_as`` merge, ``memory.written``
(``content_type="entity"``) per entity, ``memory.invalidated`` per ended relation,
``memory.linked`` per stored relation, then ``memory.deleted`` per removed relation and entity.
Entity vectors are computed before the transaction and stored with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from engramdb.core.errors import ValueTooLargeError
from engramdb.core.events import (
    DomainEvent,
    EventEnvelope,
    MemoryDeleted,
    MemoryInvalidated,
    MemoryLinked,
    MemoryWritten,
    ProducerRef,
    TraceContext,
    new_id,
)
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now
from engramdb.core.validation import normalize_value, to_json, validate_key
from engramdb.providers.graph.changes import GraphChanges
from engramdb.providers.graph.store import (
    ENTITY_NAMESPACE,
    GRAPH_LEVELS,
    GRAPH_SPEC,
    RELATION_NAMESPACE,
    entity_from_record,
    relation_from_record,
    relation_record,
)
from engramdb.providers.graph.types import GraphEntity, GraphRelation, RelationType
from engramdb.providers.indexing import Indexer
from engramdb.providers.projection import written_record
from engramdb.storage.backend import Backend
from engramdb.storage.records import Delete, Op, Put, Record


@dataclass(frozen=True)
class Stored:
    """What a commit stored: entities and relations as they now are."""

    entities: dict[str, GraphEntity]
    relations: dict[str, GraphRelation]


class GraphWriter:
    """Writes graph changes of one scope."""

    def __init__(
        self,
        backend: Backend,
        scope: Scope,
        indexer: Indexer,
        producer: ProducerRef,
        max_value_bytes: int,
    ) -> None:
        self.backend = backend
        self.scope = scope
        self.partition = scope.narrow(GRAPH_LEVELS)
        self.indexer = indexer
        self.producer = producer
        self.max_value_bytes = max_value_bytes

    def _envelope(
        self, event: DomainEvent, trace: TraceContext, at: datetime, event_id: str | None = None
    ) -> EventEnvelope:
        envelope = event.to_envelope(
            scope=self.scope, producer=self.producer, trace=trace, occurred_at=at
        )
        return envelope if event_id is None else envelope.model_copy(update={"event_id": event_id})

    def _entity(self, entity: GraphEntity, trace: TraceContext) -> tuple[Record, EventEnvelope]:
        validate_key(entity.entity_id)
        at, event_id = utc_now(), new_id()
        if entity.source_event_id is None:
            entity = entity.model_copy(update={"source_event_id": event_id})
        value, _ = normalize_value(entity.to_memory_value(), max_bytes=self.max_value_bytes)
        event = MemoryWritten(
            key=entity.entity_id,
            value=value,
            value_type=type(entity).__name__,
            content_type="entity",
            provider_id=ENTITY_NAMESPACE,
        )
        return written_record(GRAPH_SPEC, self.scope, event, at), self._envelope(
            event, trace, at, event_id
        )

    def _relation(
        self, relation: GraphRelation, trace: TraceContext
    ) -> tuple[Record, EventEnvelope]:
        validate_key(relation.relation_id)
        at, event_id = utc_now(), new_id()
        if relation.recorded_at is None:  # new: stamped with the moment it is recorded
            relation = relation.model_copy(
                update={"recorded_at": at, "created_at": at, "source_event_id": event_id}
            )
        record = relation_record(self.scope, relation, at)
        size = len(to_json(record.value).encode())
        if size > self.max_value_bytes:
            raise ValueTooLargeError(
                f"relation {relation.relation_id!r} is {size} bytes as JSON; "
                f"the limit is {self.max_value_bytes}",
                size=size,
                limit=self.max_value_bytes,
            )
        event = MemoryLinked(
            source_key=relation.source_id,
            target_key=relation.target_id,
            relation=relation.relation_type,
            provider_id=RELATION_NAMESPACE,
            properties=relation.properties,
            key=relation.relation_id,
            value=record.value,
        )
        return record, self._envelope(event, trace, at, event_id)

    async def commit(self, changes: GraphChanges) -> Stored:
        """Store ``changes`` in one transaction and apply them to the working graph.

        Raises:
            ValidationError: an id or value cannot be stored (nothing was written).
            StorageError: the backend failed (nothing was written).
        """
        trace = TraceContext()
        envelopes: list[EventEnvelope] = []
        for merged, kept in changes.merges:
            link = MemoryLinked(
                source_key=merged,
                target_key=kept,
                relation=RelationType.SAME_AS.value,
                provider_id=RELATION_NAMESPACE,
            )
            envelopes.append(self._envelope(link, trace, utc_now()))
        entity_records: list[Record] = []
        for entity in changes.entities.values():
            record, envelope = self._entity(entity, trace)
            entity_records.append(record)
            envelopes.append(envelope)
        relation_records: list[Record] = []
        for relation, by in changes.ended.values():
            at = utc_now()
            assert relation.invalid_at is not None
            assert relation.expired_at is not None
            ended = MemoryInvalidated(
                key=relation.relation_id,
                provider_id=RELATION_NAMESPACE,
                invalid_at=relation.invalid_at,
                expired_at=relation.expired_at,
                superseded_by=by,
            )
            relation_records.append(relation_record(self.scope, relation, at))
            envelopes.append(self._envelope(ended, trace, at))
        for relation in changes.relations.values():
            record, envelope = self._relation(relation, trace)
            relation_records.append(record)
            envelopes.append(envelope)
        ops: list[Op] = []
        deletions: list[tuple[str, str]] = [
            *((RELATION_NAMESPACE, key) for key in changes.removed_relations),
            *((ENTITY_NAMESPACE, key) for key in changes.removed_entities),
        ]
        for namespace, key in deletions:
            ops.append(Delete(namespace, self.partition, key))
            deleted = MemoryDeleted(key=key, provider_id=namespace)
            envelopes.append(self._envelope(deleted, trace, utc_now()))
        # An unavailable model does not fail the write: the entities are embedded later.
        embedded = (
            await self.indexer.embed_for_write(GRAPH_SPEC, entity_records)
            if entity_records and self.indexer.embedder is not None
            else None
        )
        vectors = embedded[0] if embedded else None
        model = self.indexer.model if vectors else ""
        puts: list[Op] = [
            Put(r, vectors[i] if vectors else None, model) for i, r in enumerate(entity_records)
        ]
        puts += [Put(r) for r in relation_records]
        if vectors:
            envelopes += [self.indexer.indexed_event(r, self.scope, trace) for r in entity_records]
        result = await self.backend.commit([*puts, *ops], envelopes)
        stored_entities = result.stored[: len(entity_records)]
        self.indexer.committed(ENTITY_NAMESPACE, self.partition, stored_entities, vectors)
        if entity_records:
            self.indexer.written(GRAPH_SPEC, stored_entities, embedded)
        graph = changes.graph
        ids = graph.record_ids
        removed_ids = [ids[k] for k in changes.removed_entities if k in ids]
        self.indexer.removed(ENTITY_NAMESPACE, self.partition, removed_ids)
        stored = Stored(
            {r.key: entity_from_record(r) for r in stored_entities},
            {r.key: relation_from_record(r) for r in result.stored[len(entity_records) :]},
        )
        for record in stored_entities:
            graph.put_entity(stored.entities[record.key], record.id, record.version)
        for relation in stored.relations.values():
            graph.put_relation(relation)
        for key in changes.removed_relations:
            graph.remove_relation(key)
        for key in changes.removed_entities:
            graph.remove_entity(key)
        return stored
