"""``Engine``: an open Engram database, and ``open()``, the way to get one.

The engine owns the storage backend (and its event log), the shared working-memory store and
the provider registry. ``engine.scope(...)`` hands out a ``ScopedMemory``: the providers and
the ``MemoryManager`` of one tenant/user/agent/session, bound to that scope.
"""

from __future__ import annotations

import inspect
import time
import warnings
from collections.abc import AsyncIterator, Callable, Generator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from engramdb.core.errors import (
    InvalidValueError,
    NotFoundError,
    StaleVectorsError,
    StaleVectorsWarning,
)
from engramdb.core.events import ProducerRef
from engramdb.core.scope import DEFAULT_TENANT, PERSISTENT_LEVELS, Level, Scope, ScopeFilter
from engramdb.core.types import utc_now
from engramdb.core.validation import DEFAULT_MAX_VALUE_BYTES
from engramdb.formation.auto import FORMATION_SPEC, FORMED_NAMESPACES, AutoFormation
from engramdb.formation.clusters import DEFAULT_THRESHOLD, Clustering, cluster_facts
from engramdb.formation.ingest import IngestMessage, IngestReport
from engramdb.formation.ingest import ingest as ingest_messages
from engramdb.formation.model_extraction import FallbackExtractor, ModelExtractor
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import Extractor
from engramdb.index.embedder import Embedder
from engramdb.index.reranker import Reranker
from engramdb.index.search_config import SearchConfig
from engramdb.llm.client import ChatClient, LLMConfig
from engramdb.manager.manager import DEFAULT_RECALL_TIMEOUT_S, MemoryManager
from engramdb.manager.registry import ProviderRegistry
from engramdb.orchestrator.assemble import AssembledContext, Lookup, assemble
from engramdb.orchestrator.budget import Budget
from engramdb.orchestrator.builtin_types import file_category_type
from engramdb.orchestrator.conversation import CONVERSATION_SPEC, ConversationMemory
from engramdb.orchestrator.episodic import EPISODIC_SPEC, EpisodicMemory
from engramdb.orchestrator.file_memory import FileCategoryMemory, category_memory_class
from engramdb.orchestrator.idempotency import IDEMPOTENCY_SPEC
from engramdb.orchestrator.memory_types import MemoryTypeRegistry, default_registry
from engramdb.orchestrator.plans import PLAN_SPEC, Plans
from engramdb.orchestrator.plugin import MemoryPlugin, StoredMemoryType
from engramdb.orchestrator.procedural import PROCEDURAL_SPEC, ProceduralMemory
from engramdb.orchestrator.redaction import RedactionPolicy, default_policy
from engramdb.orchestrator.semantic import PUBLIC_SPEC, SEMANTIC_SPEC, SemanticMemory
from engramdb.orchestrator.sessions import SESSION_SPEC, Sessions
from engramdb.orchestrator.store_items import STORE_ITEMS_SPEC
from engramdb.orchestrator.tasks import TASK_SPEC, TaskContexts
from engramdb.orchestrator.tenancy import TENANCY_SPECS, Tenancy
from engramdb.orchestrator.trace import TurnTraced, last_traces
from engramdb.orchestrator.type_limits import MemoryTypeLimits
from engramdb.orchestrator.working import WORKING_SPEC, WorkingMemory
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC
from engramdb.providers.event_sourced import (
    EventSourcedProvider,
    expire_records,
    rebuild_namespace,
)
from engramdb.providers.files import (
    DEFAULT_CATEGORIES,
    FILES_PROVIDER_ID,
    FILES_SPEC,
    FileMemoryProvider,
    FileStore,
    files_root,
)
from engramdb.providers.graph import (
    EXCLUSIVE_RELATIONS,
    GRAPH_LEVELS,
    GRAPH_NAMESPACES,
    GRAPH_SPEC,
    GraphCache,
    GraphMemoryProvider,
    rebuild_graph,
)
from engramdb.providers.indexing import Indexer
from engramdb.providers.projection import ProjectionSpec, record_entry
from engramdb.providers.working import WorkingMemoryLimits, WorkingMemoryProvider, WorkingStore
from engramdb.restore import append_export, count_rows
from engramdb.storage.backend import (
    INDEX_BUILD_MEMORY_MB,
    MAX_INDEX_BUILD_MEMORY_MB,
    Backend,
    BackendStats,
    EventStore,
)
from engramdb.storage.records import RecordQuery
from engramdb.storage.registry import open_backend

PERSISTENT_PROVIDER_ID = "event_sourced"
#: Namespaces of records that are not memories (task contexts, plans, sessions, tenancy,
#: stored answers, document-store items): logged, rebuilt, exported and swept like the rest,
#: never recalled.
RESOURCE_SPECS: tuple[ProjectionSpec, ...] = (
    TASK_SPEC,
    PLAN_SPEC,
    SESSION_SPEC,
    *TENANCY_SPECS,
    IDEMPOTENCY_SPEC,
    STORE_ITEMS_SPEC,
    FORMATION_SPEC,
    PARTS_PENDING_SPEC,
)
_RESOURCE_NAMESPACES = frozenset(spec.namespace for spec in RESOURCE_SPECS)


#: The longest a formation claim may keep the other engines of a store off it: a day.
MAX_FORMATION_LEASE_S = 86_400


@dataclass(frozen=True)
class EngineConfig:
    """Settings of an engine that are not the storage target.

    ``embedder`` is the model that embeds memories for vector search: ``"default"`` is the
    local MiniLM (loaded on first use, one thread, concurrent calls' texts embedded together
    by a ``BatchingEmbedder``), ``None`` turns vectors off (BM25 only).
    ``exclusive_relations`` are the graph relation types a source holds with one target at a
    time (a new one ends the old one). ``sentence_vectors`` gives each sentence of a
    multi-sentence episode or conversation turn a vector of its own (better recall of facts said
    in passing, about three times the embedding work per turn); off, a turn has one vector.
    ``on_model_change`` says what opening does when the store holds vectors of another model
    than ``embedder`` (vector search only compares vectors of one model, so those records are
    found by full text alone until embedded again): ``"warn"`` emits a ``StaleVectorsWarning``,
    ``"reindex"`` embeds those records again before ``open`` returns, ``"error"`` raises
    ``StaleVectorsError``. ``reranker`` (say an ``HttpReranker``) re-orders the best hits of
    every hybrid search (``SearchConfig.rerank_candidates`` / ``rerank_weight``); none by
    default. ``type_limits`` holds each memory type's capacity and default TTL
    (``MemoryTypeLimits``); ``working`` is the in-process tier-1 store of the manager API.
    ``files`` is the folder of the memory files a person can read and edit (one folder per
    tenant and user, one markdown file per category: ``file_categories`` and any other content
    type written there); ``None`` keeps none. ``memory_types`` is the registry of memory types
    (default: the process's, ``default_registry()``). ``formation="auto"`` forms memories
    from every episode and conversation turn memorized, in the background after the write
    returns, resumed after a crash (``formation.auto``); ``"manual"`` leaves it to ``ingest``.
    ``formation_lease_s`` is how long an engine's claim on a pending formation keeps the other
    engines of the store off it (``formation.claims``): longer than one formation takes.
    """

    working: WorkingMemoryLimits = field(default_factory=WorkingMemoryLimits)
    persistent_levels: tuple[Level, ...] = PERSISTENT_LEVELS
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
    recall_timeout_s: float = DEFAULT_RECALL_TIMEOUT_S
    producer: str = "engramdb"
    embedder: Embedder | Literal["default"] | None = "default"
    search: SearchConfig = field(default_factory=SearchConfig)
    redaction: RedactionPolicy = field(default_factory=default_policy)
    llm: LLMConfig | None = None
    exclusive_relations: frozenset[str] = EXCLUSIVE_RELATIONS
    sentence_vectors: bool = True
    on_model_change: Literal["warn", "reindex", "error"] = "warn"
    reranker: Reranker | None = None
    type_limits: MemoryTypeLimits = field(default_factory=MemoryTypeLimits)
    files: str | Path | None = None
    file_categories: tuple[str, ...] = DEFAULT_CATEGORIES
    memory_types: MemoryTypeRegistry | None = None
    formation: Literal["manual", "auto"] = "manual"
    formation_lease_s: float = 60.0

    def __post_init__(self) -> None:
        lease = self.formation_lease_s
        # A lease of zero, a negative one or NaN would let every engine take every claim at
        # once; one past a day keeps a killed engine's work from the others that long, and
        # one past the calendar's end cannot even be written down. ``True`` is no duration.
        if (
            isinstance(lease, bool)
            or not isinstance(lease, int | float)
            or not 0 < lease <= MAX_FORMATION_LEASE_S
        ):
            raise InvalidValueError(
                # Not the value itself: an int of 5,000 digits has no printable repr.
                "formation_lease_s must be a number of seconds above 0 and at most "
                f"{MAX_FORMATION_LEASE_S:,} (a day)",
                field="formation_lease_s",
            )

    def projections(self) -> tuple[ProjectionSpec, ...]:
        """The namespaces this engine projects from the log, and how."""
        episodic, conversation = EPISODIC_SPEC, CONVERSATION_SPEC
        if not self.sentence_vectors:
            episodic = replace(episodic, embed_parts=None)
            conversation = replace(conversation, embed_parts=None)
        return (
            ProjectionSpec(PERSISTENT_PROVIDER_ID, self.persistent_levels),
            episodic,
            SEMANTIC_SPEC,
            PUBLIC_SPEC,
            PROCEDURAL_SPEC,
            conversation,
            WORKING_SPEC,
            *((FILES_SPEC,) if self.files is not None else ()),
        )


@dataclass(frozen=True)
class RebuildReport:
    """What ``Engine.rebuild`` recomputed."""

    records: dict[str, int]
    events: int
    seconds: float


@dataclass(frozen=True)
class RestoreReport:
    """What ``Engine.restore`` did: events appended, records the export listed and the
    rebuilt database holds, vectors computed."""

    events: int
    records_expected: int
    records: int
    vectors: int
    seconds: float


class ScopedMemory:
    """The memory of one scope: the memory types (``working``, ``episodic``, ``semantic``,
    ``procedural``, ``conversation``), the providers beneath them, graph memory (``graph``),
    and the manager over the providers (``working_provider`` is the in-process tier 1,
    ``persistent`` the key/value store)."""

    def __init__(self, engine: Engine, scope: Scope) -> None:
        self.engine = engine
        self.scope = scope
        self.working_provider = WorkingMemoryProvider(engine.working_store, scope)
        providers = {
            spec.namespace: engine.provider(spec, scope)
            for spec in (*engine.specs, *engine.memory_types.specs())
            if spec.namespace not in _RESOURCE_NAMESPACES
        }
        self._providers = providers
        self._plugins: dict[str, MemoryPlugin | None] = {}
        files = providers.get(FILES_PROVIDER_ID)
        #: The scope's memory files (``None`` unless the engine keeps them).
        self.files = files if isinstance(files, FileMemoryProvider) else None
        self.persistent = providers[PERSISTENT_PROVIDER_ID]
        limits = engine.config.type_limits
        self.episodic = EpisodicMemory(providers[EPISODIC_SPEC.namespace], limits.episodic)
        self.semantic = SemanticMemory(
            providers[SEMANTIC_SPEC.namespace], providers[PUBLIC_SPEC.namespace], limits.semantic
        )
        self.procedural = ProceduralMemory(providers[PROCEDURAL_SPEC.namespace], limits.procedural)
        self.conversation = ConversationMemory(
            providers[CONVERSATION_SPEC.namespace], limits.conversation
        )
        self.working = WorkingMemory(providers[WORKING_SPEC.namespace], limits.working)
        self.redaction = engine.config.redaction
        for plugin in self.types():
            plugin.llm = engine.llm
            plugin.redaction = self.redaction
        self.graph = GraphMemoryProvider(
            engine.backend,
            scope,
            indexer=engine.indexer,
            graphs=engine.graphs,
            producer=engine.producer,
            max_value_bytes=engine.config.max_value_bytes,
            llm=engine.llm,
            exclusive_relations=engine.config.exclusive_relations,
        )
        self.manager = MemoryManager(
            [self.working_provider, *providers.values(), self.graph],
            registry=engine.registry,
            session=scope.session,
            recall_timeout_s=engine.config.recall_timeout_s,
            redaction=self.redaction,
        )

    @property
    def tasks(self) -> TaskContexts:
        """The task contexts of this scope's tenant."""
        return TaskContexts(self.engine.provider(TASK_SPEC, self.scope))

    @property
    def plans(self) -> Plans:
        """The plans of this scope's tenant."""
        return Plans(self.engine.provider(PLAN_SPEC, self.scope))

    @property
    def sessions(self) -> Sessions:
        """The sessions of this scope's tenant."""
        return Sessions(self.engine.provider(SESSION_SPEC, self.scope))

    def types(self) -> list[StoredMemoryType]:
        """The memory types of this scope."""
        return [self.working, self.episodic, self.semantic, self.procedural, self.conversation]

    def provider_for(self, spec: ProjectionSpec) -> EventSourcedProvider:
        """This scope's provider of namespace ``spec`` (one per namespace, shared with the
        manager): what a registered memory type builds its plugin on."""
        if spec.namespace not in self._providers:
            self._providers[spec.namespace] = self.engine.provider(spec, self.scope)
        return self._providers[spec.namespace]

    def file_category(self, category: str) -> FileCategoryMemory | None:
        """The memory type of one category of this scope's memory files (``None`` when the
        engine keeps no memory files)."""
        if self.files is None:
            return None
        return category_memory_class(category)(self.files)

    def offered(self, name: str) -> MemoryPlugin | None:
        """The plugin of the registered memory type ``name``, or ``None`` when this engine
        does not offer it.

        Raises:
            NotFoundError: no memory type of that name is registered.
        """
        if name not in self._plugins:
            plugin = self.engine.memory_types.get(name).build(self)
            if isinstance(plugin, StoredMemoryType):
                plugin.llm = plugin.llm or self.engine.llm
                plugin.redaction = self.redaction
            self._plugins[name] = plugin
        return self._plugins[name]

    def memory_type(self, name: str) -> MemoryPlugin:
        """The plugin of the registered memory type ``name`` (built-in, file category or
        user-defined).

        Raises:
            NotFoundError: no such type, or this engine does not offer it (a file category
                without memory files).
        """
        plugin = self.offered(name)
        if plugin is None:
            raise NotFoundError(
                f"memory type {name!r} needs memory files: open the engine with "
                "EngineConfig(files=FOLDER) (CLI: --files FOLDER)",
                name=name,
            )
        return plugin

    async def assemble(
        self,
        prompt: str,
        token_limit: int = 2000,
        *,
        budget: Budget | None = None,
        now: datetime | None = None,
    ) -> AssembledContext:
        """The context for ``prompt`` from every memory type, within ``token_limit`` (or a
        full ``budget``), redacted by ``self.redaction``, and traced in the log."""
        chosen = budget or Budget(token_limit=token_limit)
        k = chosen.per_type_items
        await self.engine.indexer.warm()  # loading the model is not the turn's time budget
        registry = self.engine.memory_types
        # Every registered type this engine offers takes part; a budget's own shares win.
        # Lookups read raw: assemble redacts every item itself, and counts what it redacted.
        chosen = replace(chosen, shares={**registry.shares(), **chosen.shares})
        lookups: list[tuple[str, Lookup]] = [
            (kind.name, partial(kind.lookup, plugin, prompt, k, now))
            for kind in registry
            if (plugin := self.offered(kind.name)) is not None
        ]
        return await assemble(
            prompt,
            lookups,
            chosen,
            self.redaction,
            scope=self.scope,
            events=self.engine.events,
            headings=registry.headings(),
        )

    async def ingest(
        self,
        messages: Sequence[IngestMessage | Mapping[str, Any]],
        *,
        extractor: Extractor | None = None,
        strict: bool = False,
        progress: Callable[[str, int], None] | None = None,
        totals: Callable[[str, int], None] | None = None,
    ) -> IngestReport:
        """Form memories from a conversation: store ``messages`` (``{"role", "content"}``,
        optionally ``timestamp``, ``session_id``, ``id``) as episodes, extract profile facts,
        dated events, activities, goals and preferences and graph facts from them, and
        consolidate those into semantic and graph memory: added, updated (the
        old version kept as history), ended, unchanged or contradicted, each naming its
        source turns. ``progress`` / ``totals`` are told ``(phase, amount)`` as the phases
        ``store``, ``extract`` and ``form`` advance / start.

        The extractor is ``extractor`` if given; else the engine's chat model
        (``EngineConfig.llm``), falling back to the rules for the turns it fails on or finds
        nothing in (a note in the report says why) unless ``strict``; else the rules.

        Raises:
            ValidationError: a message is malformed (nothing is stored).
            LLMError: with ``strict``, the chat model failed (a subclass says how); the turns
                are stored, nothing is formed.
        """
        if extractor is None and self.engine.llm is not None:
            extractor = FallbackExtractor(ModelExtractor(self.engine.llm), strict=strict)
        episodic = self.episodic
        if self.engine.formation is not None:
            # Ingest forms its turns itself, now: they need no pending formation.
            plain = self.engine.provider(EPISODIC_SPEC, self.scope)
            plain.companion = None
            episodic = EpisodicMemory(plain, self.engine.config.type_limits.episodic)
        return await ingest_messages(
            episodic,
            self.semantic,
            self.graph,
            messages,
            subject=self.scope.user or "user",
            extractor=extractor,
            progress=progress,
            totals=totals,
        )

    async def clusters(self, *, threshold: float = DEFAULT_THRESHOLD) -> Clustering:
        """The semantic facts no category holds (memorized directly, not formed by
        ``ingest``), grouped by embedding similarity into named clusters, biggest first:
        deterministic for a given ``threshold`` (cosine to a cluster's centroid), named by
        the chat model when one is configured, else by their most distinctive words.

        Raises:
            ValidationError: no embedder is configured, or ``threshold`` is out of range.
        """
        return await cluster_facts(
            self.semantic, self.engine.indexer.embedder, threshold=threshold, llm=self.engine.llm
        )

    async def last_trace(self) -> TurnTraced | None:
        """The trace of this scope's latest ``assemble``, if any."""
        found = await last_traces(self.engine.events, self.scope, 1)
        return found[0] if found else None


class Engine:
    """An open Engram database. Use :func:`open` to create one."""

    def __init__(self, backend: Backend, config: EngineConfig | None = None) -> None:
        self.backend = backend
        self.config = config or EngineConfig()
        self.producer = ProducerRef(name=self.config.producer)
        self.working_store = WorkingStore(self.config.working)
        self.registry = ProviderRegistry(backend.events, self.producer)
        self.specs = (*self.config.projections(), *RESOURCE_SPECS)
        self.indexer = Indexer(
            backend, _embedder(self.config.embedder), self.config.search, self.config.reranker
        )
        self.llm = ChatClient(self.config.llm) if self.config.llm is not None else None
        self.graphs = GraphCache(backend)
        self.memory_types = self.config.memory_types or default_registry()
        #: Automatic formation, when configured (``EngineConfig.formation``).
        self.formation = (
            AutoFormation(self, RuleExtractor, lease_s=self.config.formation_lease_s)
            if self.config.formation == "auto"
            else None
        )
        self.files: FileStore | None = None
        if self.config.files is not None:
            self.files = FileStore(self.config.files, self.config.file_categories)
            for category in self.files.categories:
                if category not in self.memory_types:
                    self.memory_types.register(file_category_type(category))

    @property
    def events(self) -> EventStore:
        """The event log."""
        return self.backend.events

    @property
    def tenancy(self) -> Tenancy:
        """The tenants, users and API keys of this database."""
        return Tenancy(
            self.backend, self.provider, self.stored_namespaces, self.producer, self._forget_cached
        )

    @property
    def stored_namespaces(self) -> list[tuple[str, tuple[Level, ...]]]:
        """Every namespace records are stored in, with the scope levels of its partitions:
        the projections and resources, then the graph's entities and relations."""
        return [
            *((spec.namespace, spec.levels) for spec in self.all_specs()),
            *((namespace, GRAPH_LEVELS) for namespace in GRAPH_NAMESPACES),
        ]

    def _forget_cached(self, scopes: ScopeFilter) -> None:
        """Drop what this process holds of ``scopes`` after their records were deleted: the
        vector indexes and working graphs (all of them; they reload on use), the
        in-process working memory and the memory files of those scopes."""
        self.indexer.forget_all()
        self.graphs.drop()
        for scope in [s for s in self.working_store.partitions if scopes.matches(s)]:
            del self.working_store.partitions[scope]
        if self.files is not None:
            self.files.erase(scopes.matches)

    async def _start(self) -> None:
        await self.registry.refresh()
        # Register the built-in providers once per database (a no-op when unchanged).
        probe = ScopedMemory(self, Scope())
        await probe.manager.providers()
        await self._check_vector_model()
        if self.indexer.embedder is not None:
            await self.indexer.deferred.resume({spec.namespace: spec for spec in self.all_specs()})
        if self.formation is not None:
            await self.formation.resume()

    async def formed(self) -> None:
        """Wait until automatic formation has formed every turn memorized so far (and every
        turn a stopped process left pending); returns at once without it."""
        if self.formation is not None:
            await self.formation.wait()

    async def _check_vector_model(self) -> None:
        model = self.indexer.model
        if not model:
            return
        others = sorted(await self.backend.search.edge_vector_models() - {model})
        if not others:
            return
        if self.config.on_model_change == "reindex":
            await self.reindex(stale_only=True)
            return
        message = (
            f"the store holds vectors of {', '.join(others)}, not of the current model {model}: "
            "vector search skips those memories until they are embedded again "
            "(engram reindex --stale, or Engine.reindex(stale_only=True))"
        )
        if self.config.on_model_change == "error":
            raise StaleVectorsError(message, model=model, stored_models=others)
        warnings.warn(StaleVectorsWarning(message), stacklevel=_caller_level())

    def scope(
        self,
        tenant: str = DEFAULT_TENANT,
        user: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        plan: str | None = None,
    ) -> ScopedMemory:
        """The memory of one tenant / user / agent / session / plan.

        Raises:
            InvalidScopeError: a field is malformed or the tenant is empty.
        """
        return ScopedMemory(
            self, Scope(tenant=tenant, user=user, agent=agent, session=session, plan=plan)
        )

    def provider(self, spec: ProjectionSpec, scope: Scope) -> EventSourcedProvider:
        """The provider of namespace ``spec`` bound to ``scope``."""
        if self.files is not None and spec.namespace == FILES_PROVIDER_ID:
            return self.file_provider(scope)
        provider = EventSourcedProvider(
            self.backend,
            scope,
            provider_id=spec.namespace,
            spec=spec,
            indexer=self.indexer,
            producer=self.producer,
            max_value_bytes=self.config.max_value_bytes,
        )
        if spec.namespace in FORMED_NAMESPACES:
            provider.companion = self.formation
        return provider

    def file_provider(self, scope: Scope) -> FileMemoryProvider:
        """The memory-file provider of ``scope``.

        Raises:
            NotFoundError: this engine keeps no memory files.
        """
        if self.files is None:
            raise NotFoundError("this engine keeps no memory files (EngineConfig(files=…))")
        return FileMemoryProvider(
            self.backend,
            scope,
            self.files,
            indexer=self.indexer,
            producer=self.producer,
            max_value_bytes=self.config.max_value_bytes,
        )

    def all_specs(self) -> list[ProjectionSpec]:
        """The engine's projections and resources, then the namespaces of registered memory
        types that have one of their own."""
        known = {spec.namespace for spec in self.specs}
        extra = [spec for spec in self.memory_types.specs() if spec.namespace not in known]
        return [*self.specs, *extra]

    async def rebuild(self, progress: Callable[[int], None] | None = None) -> RebuildReport:
        """Recompute every projection from the event log (vectors of unchanged texts are
        kept; :meth:`reindex` recomputes those). With memory files, a person's edits are
        taken in first (each becomes an event) and every file is rendered again after.

        ``progress`` is called with the number of events processed since its last call.

        Raises:
            MemoryFileError: an edited memory file cannot be read (nothing was rebuilt).
        """
        # Owed part vectors are stored first: the queue names records by row id.
        await self.indexer.deferred.drain()
        started = time.perf_counter()
        if self.files is not None:
            for scope in self.files.scopes():
                await self.file_provider(scope).rescan()
        events = await self.events.count()
        stored = {
            spec.namespace: await rebuild_namespace(self.backend, spec, progress=progress)
            for spec in self.all_specs()
        }
        stored.update(await rebuild_graph(self.backend, progress=progress))
        self.graphs.drop()
        self.indexer.forget_all()
        await self.render_files()
        return RebuildReport(stored, events, time.perf_counter() - started)

    async def render_files(self) -> None:
        """Render every scope's memory files from the records (no-op without files)."""
        if self.files is None:
            return
        stored = await self.backend.scan(RecordQuery(FILES_PROVIDER_ID, None, hidden=None))
        for scope in sorted({*self.files.scopes(), *(r.scope for r in stored)}, key=str):
            await self.file_provider(scope).render()

    @asynccontextmanager
    async def bulk_load(
        self, *, index_memory_mb: int = INDEX_BUILD_MEMORY_MB
    ) -> AsyncIterator[None]:
        """Load many memories faster: while this runs, vector indexes that writes would
        create are noted instead, then built once from every row when it ends (with
        ``index_memory_mb`` megabytes; about 2,300 for a million 384-dimension vectors).
        Searches meanwhile are exact, and correct. Meant for filling a new store (what
        :meth:`restore` does); writers of a table wait while its index is built at the end.

        Raises:
            InvalidValueError: ``index_memory_mb`` is not a whole number from 1 to
                ``MAX_INDEX_BUILD_MEMORY_MB``.
        """
        memory = index_memory_mb
        if (
            isinstance(memory, bool)
            or not isinstance(memory, int)
            or not 0 < memory <= MAX_INDEX_BUILD_MEMORY_MB
        ):
            raise InvalidValueError(
                # Not the value itself: an int of 5,000 digits has no printable repr.
                "index_memory_mb must be a whole number of megabytes above 0 and at most "
                f"{MAX_INDEX_BUILD_MEMORY_MB:,}",
                field="index_memory_mb",
            )
        async with self.backend.bulk_load(memory):
            yield

    async def reindex(
        self, progress: Callable[[int], None] | None = None, *, stale_only: bool = False
    ) -> int:
        """Recompute every stored embedding vector from the records' texts; returns how
        many. ``progress`` is called with the number of records embedded since its last call.

        With ``stale_only``, only records without a vector of the current model are embedded
        (vectors of other models are dropped first): what a model change needs, and safe to
        run again after an interruption.
        """
        done = 0
        keep = self.indexer.model if stale_only else None
        for spec in self._vectored_specs():
            await self.backend.search.drop_vectors(spec.namespace, keep_model=keep)
            done += await self.indexer.reindex(spec, progress)
        return done

    async def reindex_total(self, *, stale_only: bool = False) -> int:
        """How many memories :meth:`reindex` would embed now (the total of a progress bar;
        with ``stale_only``, the memories less the vectors of the current model)."""
        if self.indexer.embedder is None:
            return 0
        live = 0
        for spec in self._vectored_specs():
            live += await self.backend.count(RecordQuery(spec.namespace, None))
        if not stale_only:
            return live
        current = (await self.vector_counts()).get(self.indexer.model, 0)
        return max(0, live - current)

    def _vectored_specs(self) -> list[ProjectionSpec]:
        return [spec for spec in (*self.specs, GRAPH_SPEC) if spec.vectors]

    async def vector_counts(self) -> dict[str, int]:
        """How many memories hold a vector, per embedding model (reads every vector)."""
        return await self.backend.search.vector_counts()

    async def export(self, *, page: int = 1000) -> AsyncIterator[dict[str, Any]]:
        """Everything stored, as plain data: every record of every namespace and scope
        (soft-forgotten ones flagged ``hidden``), then every event of the log."""
        for namespace, _ in self.stored_namespaces:
            offset = 0
            while True:
                batch = await self.backend.scan(
                    RecordQuery(namespace, None, hidden=None, limit=page, offset=offset)
                )
                for record in batch:
                    yield {
                        "kind": "record",
                        **record_entry(record).model_dump(mode="json"),
                        "hidden": record.hidden_at is not None,
                    }
                if len(batch) < page:
                    break
                offset += page
        async for event in self.events.stream():
            yield {"kind": "event", **event.model_dump(mode="json")}

    async def restore(
        self,
        source: str | Path,
        progress: Callable[[str, int], None] | None = None,
        *,
        totals: Callable[[str, int], None] | None = None,
    ) -> RestoreReport:
        """Load the export at ``source`` (:meth:`export` as JSON lines) into this empty
        database: its events appended as they were, every projection rebuilt from them,
        vectors computed with this engine's model. ``progress`` is told ``(phase, amount)``
        as events are appended (``"append"``), replayed (``"rebuild"``) and memories
        embedded (``"embed"``); ``totals`` is told ``(phase, total)`` as each phase starts.

        Raises:
            UsageError: there is no such file, or this database already holds memories.
            ValidationError: a line of the export is malformed (nothing was appended).
        """
        started = time.perf_counter()

        def told(phase: str) -> Callable[[int], None] | None:
            return None if progress is None else lambda amount: progress(phase, amount)

        def starts(phase: str, total: int) -> None:
            if totals is not None:
                totals(phase, total)

        path = Path(source)
        limit = self.config.max_value_bytes
        # Every line is checked before anything is written: a bad one leaves the database empty.
        expected, events = count_rows(path, limit)
        starts("append", events)
        appended = await append_export(self.events, path, told("append"), limit)
        starts("rebuild", await self.events.count())
        await self.rebuild(told("rebuild"))
        vectors = 0
        if self.indexer.embedder:
            starts("embed", await self.reindex_total(stale_only=True))
            async with self.bulk_load():
                vectors = await self.reindex(told("embed"), stale_only=True)
        stored = (await self.stats()).records
        seconds = time.perf_counter() - started
        return RestoreReport(appended, expected, stored, vectors, seconds)

    async def sweep_expired(self) -> int:
        """Remove expired persistent entries in every scope and namespace (the graph's plain
        entries included), each with ``memory.expired``."""
        count = 0
        for namespace, _ in self.stored_namespaces:
            expired = await self.backend.scan(
                RecordQuery(namespace, None, expired_at=utc_now(), hidden=None)
            )
            count += len(await expire_records(self.backend, expired, self.producer))
        self.indexer.forget_all()
        return count

    async def stats(self) -> BackendStats:
        """Counts and size of the stored data."""
        return await self.backend.stats()

    async def close(self) -> None:
        """Compute the part vectors still owed (left pending, in the store, if they cannot
        be), save the vector graphs that changed (``SearchConfig.save_graphs``), then close the
        backend (and the LLM client); idempotent. Memories still waiting for
        their vector keep waiting, in the store, for ``reindex(stale_only=True)``; turns
        not yet formed stay pending, in the store, for the next engine to open it."""
        if self.formation is not None:
            await self.formation.close()
        await self.indexer.deferred.close()
        await self.indexer.pending.close()
        await self.indexer.close()
        if self.llm is not None:
            await self.llm.aclose()
        await self.backend.close()

    async def __aenter__(self) -> Engine:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()


def _caller_level() -> int:
    """The ``stacklevel`` that attributes a warning to the first frame outside this package
    (``open`` is awaited, or entered as a context manager: the depth differs)."""
    package = str(Path(__file__).parent)
    frame, level = inspect.currentframe(), 1
    while frame is not None and frame.f_code.co_filename.startswith(package):
        frame, level = frame.f_back, level + 1
    return level - 1


def _embedder(choice: Embedder | Literal["default"] | None) -> Embedder | None:
    if choice == "default":
        from engramdb.index.batching import BatchingEmbedder
        from engramdb.index.minilm import MiniLMEmbedder

        # Concurrent requests (a service) share model runs instead of queueing one by one.
        return BatchingEmbedder(MiniLMEmbedder())
    return choice


async def _open_engine(
    target: str | Path, config: EngineConfig | None, options: dict[str, Any]
) -> Engine:
    if config is not None and config.files is not None:
        files_root(config.files)  # a memory folder no file could be written under: refused first
    backend = await open_backend(target, **options)
    try:
        engine = Engine(backend, config)
        await engine._start()
    except BaseException:
        await backend.close()
        raise
    return engine


class _Opening:
    """What :func:`open` returns: await it, or use it as an async context manager."""

    def __init__(
        self, target: str | Path, config: EngineConfig | None, options: dict[str, Any]
    ) -> None:
        self._args = (target, config, options)
        self._engine: Engine | None = None

    def __await__(self) -> Generator[Any, None, Engine]:
        return _open_engine(*self._args).__await__()

    async def __aenter__(self) -> Engine:
        self._engine = await _open_engine(*self._args)
        return self._engine

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._engine is not None:
            await self._engine.close()


def open(target: str | Path, *, config: EngineConfig | None = None, **options: Any) -> _Opening:
    """Open an Engram database: a SQLite file path, ``:memory:``, or a backend URL.

    ``options`` go to the backend (SQLite: ``synchronous="full"|"normal"``).

    Example::

        async with engramdb.open("memory.db") as engram:
            mem = engram.scope(tenant="acme", user="alice")
    """
    return _Opening(target, config, options)
