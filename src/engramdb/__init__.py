"""Engram: long-term memory for LLM agents.

Open a database with :func:`open` (async) or :func:`open_sync`, take a scope with
``engine.scope(tenant=..., user=...)`` and use its ``manager`` (rfc-2002 provider API).
"""

from engramdb.core.errors import (
    AuthenticationError,
    ConflictError,
    DuplicateProviderError,
    EngineClosedError,
    EngramError,
    EngramRuntimeError,
    EntityNotFoundError,
    GraphMemoryError,
    InvalidKeyError,
    InvalidScopeError,
    InvalidTraversalError,
    InvalidValueError,
    MigrationError,
    NoProviderForTierError,
    NotFoundError,
    PermissionDeniedError,
    ProviderNotFoundError,
    ProviderReadOnlyError,
    RecallError,
    RelationNotFoundError,
    StaleVectorsError,
    StaleVectorsWarning,
    StorageError,
    UnsupportedTargetError,
    UsageError,
    ValidationError,
    ValueTooLargeError,
)
from engramdb.core.events import (
    DomainEvent,
    EventEnvelope,
    MemoryDeleted,
    MemoryExpired,
    MemoryIndexed,
    MemoryInvalidated,
    MemoryLinked,
    MemoryProviderRegistered,
    MemoryWritten,
    ProducerRef,
    TraceContext,
)
from engramdb.core.intent import (
    CapacityInfo,
    ForgetResult,
    MemorizeResult,
    MemoryItem,
    SummaryResult,
)
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.core.types import (
    MemoryEntry,
    MemoryTier,
    ProviderCapabilities,
    RecallQuery,
    RecallResult,
    RecallScope,
)
from engramdb.engine import Engine, EngineConfig, RebuildReport, ScopedMemory, open
from engramdb.manager.manager import MemoryManager, ProviderFailure, RecallReport
from engramdb.manager.registry import ProviderRegistry
from engramdb.orchestrator.plugin import TypeLimits
from engramdb.orchestrator.type_limits import MemoryTypeLimits
from engramdb.providers.base import MemoryProvider
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.graph import (
    EntityType,
    GraphEntity,
    GraphMemoryProvider,
    GraphPath,
    GraphRelation,
    GraphTraversal,
    RelationType,
    TraversalPattern,
)
from engramdb.providers.working import WorkingMemoryLimits, WorkingMemoryProvider, WorkingStore
from engramdb.storage.backend import Backend, EventQuery, EventStore
from engramdb.storage.registry import register_backend
from engramdb.storage.sqlite import SqliteBackend
from engramdb.sync import SyncEngine, open_sync

__version__ = "0.1.0"

__all__ = [
    "AuthenticationError",
    "Backend",
    "CapacityInfo",
    "ConflictError",
    "DomainEvent",
    "DuplicateProviderError",
    "Engine",
    "EngineClosedError",
    "EngineConfig",
    "EngramError",
    "EngramRuntimeError",
    "EntityNotFoundError",
    "EntityType",
    "EventEnvelope",
    "EventQuery",
    "EventSourcedProvider",
    "EventStore",
    "ForgetResult",
    "GraphEntity",
    "GraphMemoryError",
    "GraphMemoryProvider",
    "GraphPath",
    "GraphRelation",
    "GraphTraversal",
    "InvalidKeyError",
    "InvalidScopeError",
    "InvalidTraversalError",
    "InvalidValueError",
    "MemorizeResult",
    "MemoryDeleted",
    "MemoryEntry",
    "MemoryExpired",
    "MemoryIndexed",
    "MemoryInvalidated",
    "MemoryItem",
    "MemoryLinked",
    "MemoryManager",
    "MemoryProvider",
    "MemoryProviderRegistered",
    "MemoryTier",
    "MemoryTypeLimits",
    "MemoryWritten",
    "MigrationError",
    "NoProviderForTierError",
    "NotFoundError",
    "PermissionDeniedError",
    "ProducerRef",
    "ProviderCapabilities",
    "ProviderFailure",
    "ProviderNotFoundError",
    "ProviderReadOnlyError",
    "ProviderRegistry",
    "RebuildReport",
    "RecallError",
    "RecallQuery",
    "RecallReport",
    "RecallResult",
    "RecallScope",
    "RelationNotFoundError",
    "RelationType",
    "Scope",
    "ScopeFilter",
    "ScopedMemory",
    "SqliteBackend",
    "StaleVectorsError",
    "StaleVectorsWarning",
    "StorageError",
    "SummaryResult",
    "SyncEngine",
    "TraceContext",
    "TraversalPattern",
    "TypeLimits",
    "UnsupportedTargetError",
    "UsageError",
    "ValidationError",
    "ValueTooLargeError",
    "WorkingMemoryLimits",
    "WorkingMemoryProvider",
    "WorkingStore",
    "__version__",
    "open",
    "open_sync",
    "register_backend",
]
