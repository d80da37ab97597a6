"""``GraphChanges``: what one graph transaction writes, planned against the working graph
before anything is stored — entity resolution, merges, contradictions and deletions.

Planning reads the working graph through the changes already planned in the same batch
(``entity``, ``relation``, ``relations_of``), so a batch may add an entity and relate it, or
add two contradicting facts, and come out as if written one by one. Nothing here writes:
``GraphWriter`` stores the plan in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from engramdb.core.errors import EntityNotFoundError, RelationNotFoundError, ValidationError
from engramdb.core.types import utc_now
from engramdb.providers.graph.types import GraphEntity, GraphRelation, RelationType
from engramdb.providers.graph.working import WorkingGraph, normalize_name


def merged_entity(kept: GraphEntity, merged: GraphEntity) -> GraphEntity:
    """``kept`` with ``merged``'s names as aliases, its properties (``kept``'s win) and
    sources."""
    names = [n for n in (merged.name, *merged.aliases, *kept.aliases) if n != kept.name]
    return kept.model_copy(
        update={
            "aliases": list(dict.fromkeys([*kept.aliases, *names])),
            "properties": {**merged.properties, **kept.properties},
            "sources": list(dict.fromkeys([*kept.sources, *merged.sources])),
        }
    )


def starts(relation: GraphRelation) -> datetime:
    """When ``relation`` began to hold."""
    start = relation.valid_at or relation.recorded_at
    assert start is not None, "planned relations always have valid_at"
    return start


@dataclass
class GraphChanges:
    """Entities and relations to store, end and remove in one transaction."""

    graph: WorkingGraph
    exclusive: frozenset[str] = frozenset()
    entities: dict[str, GraphEntity] = field(default_factory=dict)
    relations: dict[str, GraphRelation] = field(default_factory=dict)
    ended: dict[str, tuple[GraphRelation, str | None]] = field(default_factory=dict)
    merges: list[tuple[str, str]] = field(default_factory=list)
    removed_entities: dict[str, None] = field(default_factory=dict)
    removed_relations: dict[str, None] = field(default_factory=dict)
    _names: dict[tuple[str, str], str] = field(default_factory=dict)
    _touching: dict[str, set[str]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(
            self.entities
            or self.relations
            or self.ended
            or self.removed_entities
            or self.removed_relations
        )

    # -- the working graph as it will be ----------------------------------------------------

    def entity(self, entity_id: str) -> GraphEntity | None:
        """The entity as planned so far."""
        if entity_id in self.removed_entities:
            return None
        return self.entities.get(entity_id) or self.graph.entity(entity_id)

    def relation(self, relation_id: str) -> GraphRelation | None:
        """The relation as planned so far."""
        if relation_id in self.removed_relations:
            return None
        if relation_id in self.ended:
            return self.ended[relation_id][0]
        return self.relations.get(relation_id) or self.graph.relation(relation_id)

    def relations_of(self, entity_id: str, direction: str = "both") -> list[GraphRelation]:
        """Every relation of ``entity_id`` as planned so far, whatever its time."""
        ids = [r.relation_id for r in self.graph.relations_of(entity_id, "both")]
        ids += sorted(self._touching.get(entity_id, ()))
        found = [r for r in map(self.relation, dict.fromkeys(ids)) if r is not None]
        if direction == "outgoing":
            return [r for r in found if r.source_id == entity_id]
        if direction == "incoming":
            return [r for r in found if r.target_id == entity_id]
        return [r for r in found if entity_id in (r.source_id, r.target_id)]

    def find_by_name(self, entity_type: str, name: str) -> GraphEntity | None:
        """The entity of ``entity_type`` known by ``name``, as planned so far."""
        planned = self._names.get((entity_type, normalize_name(name)))
        if planned is not None and (found := self.entity(planned)) is not None:
            return found
        stored = self.graph.find_by_name(entity_type, name)
        return None if stored is None else self.entity(stored.entity_id)

    def require(self, entity_id: str) -> GraphEntity:
        """The entity ``entity_id``, or ``EntityNotFoundError``."""
        found = self.entity(entity_id)
        if found is None:
            raise EntityNotFoundError(f"no entity {entity_id!r} in the graph", entity_id=entity_id)
        return found

    def require_relation(self, relation_id: str) -> GraphRelation:
        """The relation ``relation_id``, or ``RelationNotFoundError``."""
        found = self.relation(relation_id)
        if found is None:
            raise RelationNotFoundError(
                f"no relation {relation_id!r} in the graph", relation_id=relation_id
            )
        return found

    # -- planning ---------------------------------------------------------------------------

    def put_entity(self, entity: GraphEntity, *, resolve: bool = True) -> GraphEntity:
        """Plan adding ``entity``: an update when its id exists, a merge into a same-named
        entity of its type when ``resolve`` finds one, else a new entity."""
        existing = self.entity(entity.entity_id)
        if existing is not None:
            entity = entity.model_copy(update={"source_event_id": existing.source_event_id})
        elif resolve and (twin := self.find_by_name(entity.entity_type, entity.name)):
            entity = merged_entity(twin, entity)
        self._plan_entity(entity)
        return entity

    def _plan_entity(self, entity: GraphEntity) -> None:
        self.entities[entity.entity_id] = entity
        for name in (entity.name, *entity.aliases):
            self._names[(entity.entity_type, normalize_name(name))] = entity.entity_id

    def put_relation(self, relation: GraphRelation, now: datetime) -> GraphRelation:
        """Plan adding ``relation``; returns it as it will be stored (or the identical fact
        already held, which is left as it is).

        A ``same_as`` relation merges its target into its source instead. For an exclusive
        relation type, a fact of the same source and type with another target that began
        earlier ends where the new one begins (``memory.invalidated``); one that began later
        ends the new one instead.

        Raises:
            EntityNotFoundError: an end of the relation does not exist (nothing is planned).
            ValidationError: its validity interval is empty.
        """
        self.require(relation.source_id)
        self.require(relation.target_id)
        if relation.relation_type == RelationType.SAME_AS:
            self.merge(relation.source_id, relation.target_id)
            return relation
        if relation.valid_at is None:
            relation = relation.model_copy(update={"valid_at": now})
        start = starts(relation)
        if relation.invalid_at is not None and relation.invalid_at <= start:
            raise ValidationError(
                "a relation's invalid_at must come after its valid_at",
                relation_id=relation.relation_id,
            )
        outgoing = self.relations_of(relation.source_id, "outgoing")
        same_type = [r for r in outgoing if r.relation_type == relation.relation_type]
        for held in same_type:
            if (
                held.target_id == relation.target_id
                and held.expired_at is None
                and held.invalid_at == relation.invalid_at
                and starts(held) <= start
            ):
                return held
        if relation.relation_type in self.exclusive:
            for held in same_type:
                if held.target_id == relation.target_id:
                    continue
                if held.invalid_at is not None and held.invalid_at <= start:
                    continue
                if starts(held) <= start:
                    self.end(held, start, now, relation.relation_id)
                elif relation.invalid_at is None or starts(held) < relation.invalid_at:
                    relation = relation.model_copy(update={"invalid_at": starts(held)})
        self._plan_relation(relation)
        return relation

    def _plan_relation(self, relation: GraphRelation) -> None:
        self.relations[relation.relation_id] = relation
        for end in (relation.source_id, relation.target_id):
            self._touching.setdefault(end, set()).add(relation.relation_id)

    def end(
        self, relation: GraphRelation, at: datetime, now: datetime, by: str | None = None
    ) -> GraphRelation:
        """Plan ending ``relation`` at ``at`` (world time), retired as of ``now``."""
        ended = relation.model_copy(update={"invalid_at": at, "expired_at": now})
        if relation.relation_id in self.relations:
            self.relations[relation.relation_id] = ended  # not stored yet: stored ended
        else:
            self.ended[relation.relation_id] = (ended, by)
        return ended

    def end_by_id(self, relation_id: str, at: datetime | None) -> GraphRelation:
        """Plan ending the relation ``relation_id`` (now, unless ``at`` says when).

        Raises:
            RelationNotFoundError: there is no such relation.
            ValidationError: ``at`` is before the relation began.
        """
        relation = self.require_relation(relation_id)
        now = utc_now()
        moment = at or now
        if moment <= starts(relation):
            raise ValidationError("a relation cannot end before it began", relation_id=relation_id)
        return self.end(relation, moment, now)

    def merge(self, kept_id: str, merged_id: str) -> GraphEntity:
        """Plan merging entity ``merged_id`` into ``kept_id``: names, properties and sources
        joined, relations moved over (those that would loop on ``kept_id`` dropped), and
        ``merged_id`` removed."""
        kept, merged = self.require(kept_id), self.require(merged_id)
        if kept_id == merged_id:
            return kept
        result = merged_entity(kept, merged)
        self._plan_entity(result)
        for relation in self.relations_of(merged_id):
            source = kept_id if relation.source_id == merged_id else relation.source_id
            target = kept_id if relation.target_id == merged_id else relation.target_id
            if source == target == kept_id:
                self.remove_relation(relation.relation_id)
            else:
                # Stored whole (its end included, if it has one) by the link event.
                self.ended.pop(relation.relation_id, None)
                self._plan_relation(
                    relation.model_copy(update={"source_id": source, "target_id": target})
                )
        self.merges.append((merged_id, kept_id))
        self.remove_entity(merged_id)
        return result

    def remove_relation(self, relation_id: str) -> None:
        """Plan deleting a relation."""
        self.relations.pop(relation_id, None)
        self.ended.pop(relation_id, None)
        self.removed_relations[relation_id] = None

    def remove_entity(self, entity_id: str) -> None:
        """Plan deleting an entity with every relation touching it."""
        for relation in self.relations_of(entity_id):
            self.remove_relation(relation.relation_id)
        self.entities.pop(entity_id, None)
        self.removed_entities[entity_id] = None

    def extend(self, entities: Iterable[GraphEntity], resolve: bool = True) -> list[GraphEntity]:
        """Plan several entities; returns each as it will be stored."""
        return [self.put_entity(e, resolve=resolve) for e in entities]
