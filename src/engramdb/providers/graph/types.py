"""The data types of graph memory (rfc-2001 §10): ``GraphEntity`` (a node), ``GraphRelation``
(a directed, time-aware edge), ``GraphTraversal`` (a query) and ``GraphPath`` (one answer of a
path query), with the well-known ``EntityType``, ``RelationType`` and ``TraversalPattern``.

Entity and relation types are open: any lowercase identifier is a type, the enums only name the
common ones (``EntityType.PERSON == "person"``).

A relation carries two time lines. ``valid_at``/``invalid_at`` bound when the fact held in the
world; ``recorded_at``/``expired_at`` when Engram learned it and when Engram retired it as the
current belief (it was contradicted). A relation holds at a moment ``t`` when
``valid_at <= t < invalid_at`` (an unset ``invalid_at`` is open-ended). Asked as Engram knew
it at ``known_at``, a relation recorded later does not exist yet, and an end learned later
(``expired_at`` after ``known_at``) is not known yet.
"""

from __future__ import annotations

import re
import uuid
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from engramdb.core.errors import InvalidTraversalError
from engramdb.core.model import EngramModel
from engramdb.core.types import utc_now
from engramdb.core.validation import model_value

Direction = Literal["outgoing", "incoming", "both"]

#: What a type name looks like: a lowercase identifier of at most 64 characters.
TYPE_NAME_PATTERN = r"^[a-z][a-z0-9_.-]{0,63}$"
_TYPE_NAME = re.compile(TYPE_NAME_PATTERN)


class EntityType(StrEnum):
    """Common entity types; any other lowercase identifier is allowed too."""

    PERSON = "person"
    PROJECT = "project"
    CONCEPT = "concept"
    ORGANIZATION = "organization"
    LOCATION = "location"
    EVENT = "event"
    DOCUMENT = "document"
    TOOL = "tool"
    AGENT = "agent"
    CUSTOM = "custom"


class RelationType(StrEnum):
    """Common relation types; any other lowercase identifier is allowed too."""

    PART_OF = "part_of"
    HAS_SUBPROJECT = "has_subproject"
    BELONGS_TO = "belongs_to"
    KNOWS = "knows"
    WORKS_WITH = "works_with"
    REPORTS_TO = "reports_to"
    WORKS_FOR = "works_for"
    LIVES_IN = "lives_in"
    LOCATED_IN = "located_in"
    MARRIED_TO = "married_to"
    SIBLING_OF = "sibling_of"
    PARENT_OF = "parent_of"
    CAUSED_BY = "caused_by"
    DEPENDS_ON = "depends_on"
    ENABLES = "enables"
    PRECEDES = "precedes"
    FOLLOWS = "follows"
    RELATED_TO = "related_to"
    SAME_AS = "same_as"
    DIFFERENT_FROM = "different_from"
    CUSTOM = "custom"


#: Relation types a source holds with one target at a time: a new one ends the old one.
EXCLUSIVE_RELATIONS: frozenset[str] = frozenset(
    {RelationType.LIVES_IN, RelationType.WORKS_FOR, RelationType.MARRIED_TO}
)


class TraversalPattern(StrEnum):
    """How ``traverse`` walks the graph."""

    BFS = "bfs"
    DFS = "dfs"
    SHORTEST_PATH = "shortest_path"
    ALL_PATHS = "all_paths"
    NEIGHBORS = "neighbors"


def type_name(value: object, what: str) -> str:
    """``value`` as a plain type name (enums become their value), or a typed error."""
    text = value.value if isinstance(value, StrEnum) else value
    if not isinstance(text, str) or not _TYPE_NAME.fullmatch(text):
        raise ValueError(f"{what} must be a lowercase identifier like 'person', got {value!r}")
    return text


def new_entity_id() -> str:
    """A fresh entity id."""
    return f"entity-{uuid.uuid4().hex[:12]}"


def new_relation_id() -> str:
    """A fresh relation id."""
    return f"rel-{uuid.uuid4().hex[:12]}"


class GraphEntity(EngramModel):
    """A named node of the graph.

    ``aliases`` keeps the other names it was known by (entity resolution merges same-named
    entities of one type, and ``same_as`` merges two). ``sources`` names the memories it was
    learned from (``"<memory type>:<key>"``). ``created_at``/``updated_at`` are set by the
    store; ``source_event_id`` is the ``memory.written`` event that created it.
    """

    entity_id: str = Field(default_factory=new_entity_id, min_length=1, max_length=512)
    entity_type: str = EntityType.CUSTOM.value
    name: str = Field(min_length=1, max_length=1000)
    aliases: list[str] = Field(default_factory=list)
    properties: dict[str, Any] = Field(default_factory=dict)
    sources: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utc_now)
    updated_at: datetime | None = None
    source_event_id: str | None = None

    @field_validator("entity_type", mode="before")
    @classmethod
    def _entity_type(cls, value: object) -> str:
        return type_name(value, "entity_type")

    def to_memory_value(self) -> dict[str, Any]:
        """The stored value: everything but the store-kept times."""
        return model_value(self, what="entity", exclude={"created_at", "updated_at"})


class GraphRelation(EngramModel):
    """A directed edge ``source_id`` → ``target_id`` of type ``relation_type``.

    ``valid_at`` defaults to the moment it is recorded; ``recorded_at``, ``created_at`` and
    ``source_event_id`` are set by the store.
    """

    relation_id: str = Field(default_factory=new_relation_id, min_length=1, max_length=512)
    source_id: str = Field(min_length=1, max_length=512)
    target_id: str = Field(min_length=1, max_length=512)
    relation_type: str = RelationType.RELATED_TO.value
    properties: dict[str, Any] = Field(default_factory=dict)
    weight: float = 1.0
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    recorded_at: datetime | None = None
    expired_at: datetime | None = None
    sources: list[str] = Field(default_factory=list)
    created_at: datetime = Field(default_factory=utc_now)
    source_event_id: str | None = None

    @field_validator("relation_type", mode="before")
    @classmethod
    def _relation_type(cls, value: object) -> str:
        return type_name(value, "relation_type")

    @field_validator("valid_at", "invalid_at", "recorded_at", "expired_at")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("relation times must be timezone-aware")
        return value

    def holds_at(self, moment: datetime, known_at: datetime | None = None) -> bool:
        """Whether the fact held in the world at ``moment`` (as Engram knew it at
        ``known_at``, when given)."""
        end = self.invalid_at
        if known_at is not None:
            if self.recorded_at is not None and self.recorded_at > known_at:
                return False
            if self.expired_at is not None and self.expired_at > known_at:
                end = None
        start = self.valid_at or self.recorded_at
        if start is not None and moment < start:
            return False
        return end is None or moment < end


class GraphPath(EngramModel):
    """One path: its entities from start to end and the relation taken at each step."""

    model_config = ConfigDict(frozen=True)

    entities: list[GraphEntity]
    relations: list[GraphRelation]


class GraphTraversal(EngramModel):
    """A traversal query.

    ``relation_types`` limits the edges followed. For neighbours, BFS and DFS,
    ``entity_types`` limits the entities returned (the walk still passes through others); for
    the path patterns it limits the entities a path may pass through (its ends excepted).
    ``max_depth`` bounds every pattern (hops from the start); ``limit`` bounds the entities (or
    paths) returned. The path patterns need ``target_entity_id``. ``as_of`` asks about a past
    moment instead of now; ``known_at`` asks as Engram knew the graph then.
    """

    start_entity_id: str = Field(min_length=1)
    pattern: TraversalPattern = TraversalPattern.BFS
    relation_types: list[str] | None = None
    entity_types: list[str] | None = None
    max_depth: int = 2
    limit: int = 100
    direction: Direction = "outgoing"
    target_entity_id: str | None = None
    as_of: datetime | None = None
    known_at: datetime | None = None

    @field_validator("relation_types", "entity_types", mode="before")
    @classmethod
    def _types(cls, value: object) -> list[str] | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple | set | frozenset):
            raise ValueError("type filters must be lists of type names")
        return [type_name(item, "type filter") for item in value]

    @model_validator(mode="after")
    def _consistent(self) -> GraphTraversal:
        paths = (TraversalPattern.SHORTEST_PATH, TraversalPattern.ALL_PATHS)
        if self.pattern in paths and self.target_entity_id is None:
            raise InvalidTraversalError(
                f"{self.pattern.value} needs a target_entity_id", pattern=self.pattern.value
            )
        if not 0 <= self.max_depth <= 64:
            raise InvalidTraversalError("max_depth must be within 0-64", max_depth=self.max_depth)
        if not 1 <= self.limit <= 100_000:
            raise InvalidTraversalError("limit must be within 1-100000", limit=self.limit)
        for moment in (self.as_of, self.known_at):
            if moment is not None and moment.tzinfo is None:
                raise InvalidTraversalError("as_of and known_at must be timezone-aware")
        return self
