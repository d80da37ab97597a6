"""The request and response bodies of the REST API, shared by the service and the client SDK
(so both sides validate the same shapes). Stored resources (``TaskContext``, ``Plan``,
``Session``), ``MemoryItem``, ``MemoryEntry``, ``EventEnvelope`` and the graph's
``GraphEntity``, ``GraphRelation`` and ``GraphPath`` are returned as the engine defines them."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Generic, Literal, TypeVar

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from engramdb.core.events import EventEnvelope
from engramdb.core.intent import MemoryItem
from engramdb.core.types import RecallResult, RecallScope
from engramdb.core.validation import CONTENT_TYPE_PATTERN, KEY_PATTERN, MAX_TTL_MS
from engramdb.providers.graph.types import (
    TYPE_NAME_PATTERN,
    Direction,
    GraphEntity,
    GraphPath,
    GraphRelation,
    TraversalPattern,
)

T = TypeVar("T")
#: Keys as the engine accepts them (documented in the schema, checked again by the engine).
KeyField = Field(min_length=1, max_length=512, pattern=KEY_PATTERN)
OptionalKey = Field(default=None, min_length=1, max_length=512, pattern=KEY_PATTERN)
#: Any JSON value but null: a value goes by deleting its key, not by storing null.
Value = Annotated[
    JsonValue, WithJsonSchema({"not": {"type": "null"}, "description": "Any JSON value but null"})
]

Text = Field(min_length=1, max_length=1_000_000)
#: The memory-service spec's scope fields of a body, checked against the caller's scope.
UserId = Field(default=None, min_length=1, max_length=128, description="Default: the caller's user")
AgentId = Field(
    default=None, min_length=1, max_length=128, description="Default: the X-Agent-ID header's"
)


class Body(BaseModel):
    """A request body: unknown fields are refused, so a typo is an error, not a no-op, and so
    are numbers JSON does not have (``NaN``, ``Infinity``), which Python's parser lets in."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class ErrorBody(BaseModel):
    """Every error answer: a stable code, a message, structured details."""

    error: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class Page(BaseModel, Generic[T]):
    """One page of a list; ask again with ``offset=next_offset`` until it is ``None``."""

    items: list[T]
    next_offset: int | None = None


class Items(BaseModel):
    """Remembered items, best (or newest) first."""

    items: list[MemoryItem]


class WriteResult(BaseModel):
    """What a memory write did: the stored id and whether it created or updated."""

    id: str
    status: Literal["created", "updated"] = "created"
    evicted: list[str] = Field(default_factory=list)


class Deleted(BaseModel):
    """Whether a delete removed something."""

    deleted: bool


class Cleared(BaseModel):
    """How many entries a bulk delete removed."""

    deleted: int = Field(ge=0)


class Health(BaseModel):
    """The service is up and its database answers."""

    status: Literal["ok"] = "ok"
    version: str
    auth: str
    bridge: dict[str, Any] | None = Field(
        default=None, description="The NATS event bridge, when one runs: connection and lag"
    )


# -- semantic ---------------------------------------------------------------------------------


class KnowledgeIn(Body):
    """A fact. Private to ``user_id`` (default: the caller's user) unless ``public``."""

    content: str = Text
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    key: str | None = OptionalKey
    user_id: str | None = UserId
    agent_id: str | None = AgentId
    public: bool = False
    importance: float = Field(default=0.5, ge=0.0, le=1.0)


class KnowledgeUpsertIn(KnowledgeIn):
    """A fact that updates a near-identical stored one (cosine similarity at or above
    ``dedupe_threshold``) instead of adding a duplicate."""

    dedupe_threshold: float = Field(default=0.95, gt=0.0, le=1.0)


# -- episodic and procedural ------------------------------------------------------------------


class EpisodeIn(Body):
    """One interaction of the user/agent pair."""

    role: Literal["user", "assistant", "system", "tool"]
    content: str = Text
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    occurred_at: datetime | None = None
    speaker: str | None = Field(default=None, max_length=128)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    tags: list[str] = Field(default_factory=list, max_length=64)
    user_id: str | None = UserId
    agent_id: str | None = AgentId


class ProcedureIn(Body):
    """A rule or example, injected when its trigger matches the query: ``always``,
    ``keywords:a,b``, ``regex:<pattern>``, or free text matched by meaning (the default:
    the content itself)."""

    content: str = Text
    procedure_type: Literal["system_prompt", "few_shot_example"] = "system_prompt"
    trigger: str | None = Field(default=None, min_length=1, max_length=4096)
    trigger_condition: str | None = Field(
        default=None,
        min_length=1,
        max_length=4096,
        description="The memory-service spec's name of ``trigger``",
    )
    key: str | None = OptionalKey
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    importance: float = Field(default=0.5, ge=0.0, le=1.0)
    user_id: str | None = UserId
    agent_id: str | None = AgentId

    @model_validator(mode="after")
    def _one_trigger(self) -> ProcedureIn:
        if self.trigger is None:
            self.trigger = self.trigger_condition
        elif self.trigger_condition not in (None, self.trigger):
            raise ValueError("trigger and trigger_condition name different triggers")
        return self


# -- working memory ---------------------------------------------------------------------------


class StateIn(Body):
    """The value of one plan state key (any JSON value but null)."""

    value: Value

    @field_validator("value")
    @classmethod
    def _not_null(cls, value: JsonValue) -> JsonValue:
        if value is None:
            raise ValueError("value must not be null; delete the key instead")
        return value


class StateOut(BaseModel):
    """One plan state key, its value and its version (also the ``ETag``)."""

    plan_id: str
    key: str
    value: JsonValue
    version: int | None = None


class PlanState(BaseModel):
    """Every state key of a plan."""

    plan_id: str
    state: dict[str, JsonValue]


# -- task context, plans, sessions ------------------------------------------------------------


class TaskContextIn(Body):
    """A task context to store (the service spec's ``POST /v1/memory/task-context``)."""

    task_id: str = Field(min_length=1, max_length=100, pattern=KEY_PATTERN)
    plan_id: str | None = Field(default=None, min_length=1, max_length=100)
    event_type: str = Field(min_length=1, max_length=255)
    response_event: str | None = Field(default=None, max_length=255)
    response_topic: str = Field(default="action-results", min_length=1, max_length=100)
    data: dict[str, JsonValue] = Field(default_factory=dict)
    sub_tasks: list[str] = Field(default_factory=list, max_length=10_000)
    state: dict[str, JsonValue] = Field(default_factory=dict)


class TaskContextUpdate(Body):
    """The fields of a task context to replace; those left out are kept."""

    plan_id: str | None = Field(default=None, min_length=1, max_length=100)
    event_type: str | None = Field(default=None, min_length=1, max_length=255)
    response_event: str | None = Field(default=None, max_length=255)
    response_topic: str | None = Field(default=None, min_length=1, max_length=100)
    data: dict[str, JsonValue] | None = None
    sub_tasks: list[str] | None = Field(default=None, max_length=10_000)
    state: dict[str, JsonValue] | None = None


class PlanIn(Body):
    """A plan to store; its user is the caller's."""

    plan_id: str = Field(min_length=1, max_length=100, pattern=KEY_PATTERN)
    goal_event: str = Field(min_length=1, max_length=255)
    goal_data: dict[str, JsonValue] = Field(default_factory=dict)
    status: str = Field(default="running", min_length=1, max_length=50)
    state: dict[str, JsonValue] = Field(default_factory=dict)


class PlanUpdate(Body):
    """The fields of a plan to replace; those left out are kept."""

    goal_event: str | None = Field(default=None, min_length=1, max_length=255)
    goal_data: dict[str, JsonValue] | None = None
    status: str | None = Field(default=None, min_length=1, max_length=50)
    state: dict[str, JsonValue] | None = None


class SessionIn(Body):
    """A session to store; its user is the caller's, its agent the caller's unless given."""

    session_id: str = Field(min_length=1, max_length=100, pattern=KEY_PATTERN)
    agent_id: str | None = Field(default=None, min_length=1, max_length=100)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)


class SessionUpdate(Body):
    """The fields of a session to replace; an update also marks it used now."""

    agent_id: str | None = Field(default=None, min_length=1, max_length=100)
    metadata: dict[str, JsonValue] | None = None
    last_interaction: datetime | None = None


# -- generic entries, recall, events ----------------------------------------------------------


class EntryIn(Body):
    """A key/value entry of persistent memory."""

    key: str = KeyField
    value: Value
    content_type: str = Field(default="fact", pattern=CONTENT_TYPE_PATTERN)
    metadata: dict[str, JsonValue] = Field(default_factory=dict)
    ttl_ms: int | None = Field(default=None, gt=0, le=MAX_TTL_MS)


class RecallIn(Body):
    """A unified recall (the engine's ``RecallQuery``). ``timeout_s`` bounds each provider's
    time; over HTTP it is at least a second, as a shorter budget would only fail."""

    query: str = Field(min_length=1, max_length=10_000)
    scope: RecallScope = RecallScope.ALL
    content_types: list[str] | None = None
    provider_ids: list[str] | None = None
    limit: int = Field(default=10, ge=1, le=1000)
    metadata_filters: dict[str, JsonValue] = Field(default_factory=dict)
    timeout_s: float | None = Field(default=None, ge=1, le=300)
    since: AwareDatetime | None = Field(default=None, description="Happened at or after this")
    until: AwareDatetime | None = Field(default=None, description="Happened before this")

    @model_validator(mode="after")
    def _range_in_order(self) -> RecallIn:
        if self.since is not None and self.until is not None and self.since >= self.until:
            raise ValueError("since must be before until")
        return self


class FailedProvider(BaseModel):
    """A provider a recall asked that failed: ``cause`` is ``request`` when it refused the
    query itself, ``runtime`` when it could not answer now (a store, a model, a timeout)."""

    provider_id: str
    error: str
    message: str
    cause: Literal["request", "runtime"]


class RecallOut(BaseModel):
    """Recall hits across providers, merged by relevance; ``failed_providers`` names the
    providers left out because they failed (the hits are the others')."""

    results: list[RecallResult]
    failed_providers: list[FailedProvider] = Field(default_factory=list)


class EventPage(BaseModel):
    """Events in log order; ask again with ``after=next_cursor`` until it is ``None``."""

    events: list[EventEnvelope]
    next_cursor: int | None = None


# -- graph ------------------------------------------------------------------------------------

#: A type name of the graph (``person``, ``works_for``): a lowercase identifier.
TypeName = Annotated[str, Field(pattern=TYPE_NAME_PATTERN)]
#: Provenance of a graph fact: the memories it was learned from (``"episodic:<id>"``).
Sources = Annotated[list[Annotated[str, Field(min_length=1, max_length=512)]], Field(max_length=64)]


class EntityIn(Body):
    """An entity of the caller's graph. Without ``entity_id`` it gets a fresh one; with
    ``resolve``, an entity of the same type known by the same name (or alias) is updated
    instead of a second one being made — the answer's ``entity_id`` says which."""

    name: str = Field(min_length=1, max_length=1000)
    entity_type: TypeName = "custom"
    entity_id: str | None = OptionalKey
    aliases: list[Annotated[str, Field(min_length=1, max_length=1000)]] = Field(
        default_factory=list, max_length=64
    )
    properties: dict[str, JsonValue] = Field(default_factory=dict)
    sources: Sources = Field(default_factory=list)
    resolve: bool = True


class RelationIn(Body):
    """A directed relation ``source_id`` → ``target_id``; both entities must exist.

    ``valid_at`` is when the fact became true (default: now), ``invalid_at`` when it stopped;
    both carry a timezone. A new fact of an exclusive type (``lives_in``, ``works_for``,
    ``married_to``) ends the one it contradicts; ``same_as`` merges the target into the source.
    """

    source_id: str = KeyField
    target_id: str = KeyField
    relation_type: TypeName = "related_to"
    properties: dict[str, JsonValue] = Field(default_factory=dict)
    weight: float = Field(default=1.0, ge=-1e9, le=1e9)
    valid_at: AwareDatetime | None = None
    invalid_at: AwareDatetime | None = None
    sources: Sources = Field(default_factory=list)


class InvalidateIn(Body):
    """When a relation's fact stopped holding (default: now); the relation is kept, ended."""

    at: AwareDatetime | None = None


class MergeIn(Body):
    """The entity to merge into the one named in the path: its names, properties, sources and
    relations move over, and it is removed."""

    merged_id: str = KeyField


class TraversalIn(Body):
    """A traversal of the caller's graph (the engine's ``GraphTraversal``).

    ``neighbors``, ``bfs`` and ``dfs`` return the entities reached within ``max_depth`` hops;
    ``shortest_path`` and ``all_paths`` need ``target_entity_id`` and return the entities on the
    path(s) and the paths themselves. ``relation_types`` limits the relations followed,
    ``entity_types`` the entities returned (for paths: passed through). ``as_of`` asks about a
    past moment, ``known_at`` as Engram knew the graph then.
    """

    start_entity_id: str = KeyField
    pattern: TraversalPattern = TraversalPattern.BFS
    target_entity_id: str | None = OptionalKey
    max_depth: int = Field(default=2, ge=0, le=64)
    direction: Direction = "outgoing"
    relation_types: list[TypeName] | None = Field(default=None, max_length=64)
    entity_types: list[TypeName] | None = Field(default=None, max_length=64)
    limit: int = Field(default=100, ge=1, le=10_000)
    as_of: AwareDatetime | None = None
    known_at: AwareDatetime | None = None


class Traversed(BaseModel):
    """What a traversal reached; ``paths`` only for the path patterns."""

    entities: list[GraphEntity]
    paths: list[GraphPath] | None = None


class Relations(BaseModel):
    """Relations of an entity, oldest first."""

    items: list[GraphRelation]


class EntityHit(BaseModel):
    """An entity found by a search, with its score in [0, 1]."""

    entity: GraphEntity
    score: float


class EntityHits(BaseModel):
    """Entities matching a search, best first."""

    items: list[EntityHit]


class IngestIn(Body):
    """Text to turn into entities and relations. ``source`` is recorded on each as
    provenance, ``occurred_at`` is when the facts became true (default: now), ``speaker`` is
    who "I" is (default: the caller's user)."""

    text: str = Field(min_length=1, max_length=100_000)
    source: str | None = Field(default=None, min_length=1, max_length=512)
    occurred_at: AwareDatetime | None = None
    speaker: str | None = Field(default=None, min_length=1, max_length=128)


class Ingested(BaseModel):
    """What an ingest added: the entities (as stored, after resolution) and the relations."""

    entities: list[GraphEntity]
    relations: list[GraphRelation]


class IngestOut(BaseModel):
    """What was stored and formed: outcome counts per category (added, updated, superseded,
    unchanged, ended, contradicted), every item with its source turns, and notes saying why
    when nothing was extracted."""

    turns: int
    episodes: int
    extractor: str
    extracted: int
    categories: dict[str, dict[str, int]]
    entities: int
    relations: int
    notes: list[str]
    theory_of_mind: str = ""
    seconds: float
    items: list[dict[str, Any]]
