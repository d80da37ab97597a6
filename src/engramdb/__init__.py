"""Engram: long-term memory for LLM agents.

Open a database with :func:`open` (async) or :func:`open_sync`, take a scope with
``engine.scope(tenant=..., user=...)`` and use its ``manager`` (rfc-2002 provider API).

Every name but the errors is imported on first use (PEP 562), so that ``import engramdb`` and
the ``engram`` command start without loading the storage, index and model machinery they may
not need.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as _distribution_version
from typing import TYPE_CHECKING, Any

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
    InvalidPatternError,
    InvalidScopeError,
    InvalidTraversalError,
    InvalidValueError,
    MemoryFileError,
    MigrationError,
    ModelUnavailableError,
    NoProviderForTierError,
    NotFoundError,
    PartialRecallWarning,
    PermissionDeniedError,
    ProviderNotFoundError,
    ProviderReadOnlyError,
    RecallError,
    RecallQueryError,
    RelationNotFoundError,
    StaleVectorsError,
    StaleVectorsWarning,
    StorageError,
    UnsafePathError,
    UnsupportedTargetError,
    UsageError,
    ValidationError,
    ValueTooLargeError,
    VersionConflictError,
)

if TYPE_CHECKING:
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
    from engramdb.core.retry import RetryPolicy
    from engramdb.core.scope import (
        Scope,
        ScopeFilter,
    )
    from engramdb.core.types import (
        MemoryEntry,
        MemoryTier,
        ProviderCapabilities,
        RecallQuery,
        RecallResult,
        RecallScope,
    )
    from engramdb.engine import (
        Engine,
        EngineConfig,
        RebuildReport,
        ScopedMemory,
        open,
    )
    from engramdb.formation.clusters import Cluster, Clustering
    from engramdb.formation.ingest import IngestMessage, IngestReport
    from engramdb.formation.model_extraction import FallbackExtractor, ModelExtractor
    from engramdb.formation.rules import RuleExtractor
    from engramdb.formation.types import ExtractedItem, Extractor
    from engramdb.manager.manager import (
        MemoryManager,
        ProviderFailure,
        RecallReport,
    )
    from engramdb.manager.registry import ProviderRegistry
    from engramdb.orchestrator.memory_types import (
        MemoryType,
        MemoryTypeRegistry,
        register_memory_type,
    )
    from engramdb.orchestrator.plugin import TypeLimits
    from engramdb.orchestrator.type_limits import MemoryTypeLimits
    from engramdb.providers.base import MemoryProvider
    from engramdb.providers.event_sourced import EventSourcedProvider
    from engramdb.providers.files import FileMemoryProvider, FileStore, RescanReport
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
    from engramdb.providers.working import (
        WorkingMemoryLimits,
        WorkingMemoryProvider,
        WorkingStore,
    )
    from engramdb.storage.backend import (
        Backend,
        EventQuery,
        EventStore,
    )
    from engramdb.storage.registry import register_backend
    from engramdb.storage.sqlite import SqliteBackend
    from engramdb.sync import (
        SyncEngine,
        open_sync,
    )


def _installed_version() -> str:
    """The version of the installed distribution: engramdb, or engramdb-client (the client
    installed alone); a source tree on sys.path that was never installed has none."""
    for distribution in ("engramdb", "engramdb-client"):
        try:
            return _distribution_version(distribution)
        except PackageNotFoundError:
            continue
    return "0+unknown"


__version__ = _installed_version()

#: Where each lazily imported public name lives.
_LAZY: dict[str, str] = {
    "DomainEvent": "engramdb.core.events",
    "EventEnvelope": "engramdb.core.events",
    "MemoryDeleted": "engramdb.core.events",
    "MemoryExpired": "engramdb.core.events",
    "MemoryIndexed": "engramdb.core.events",
    "MemoryInvalidated": "engramdb.core.events",
    "MemoryLinked": "engramdb.core.events",
    "MemoryProviderRegistered": "engramdb.core.events",
    "MemoryWritten": "engramdb.core.events",
    "ProducerRef": "engramdb.core.events",
    "TraceContext": "engramdb.core.events",
    "CapacityInfo": "engramdb.core.intent",
    "ForgetResult": "engramdb.core.intent",
    "MemorizeResult": "engramdb.core.intent",
    "MemoryItem": "engramdb.core.intent",
    "SummaryResult": "engramdb.core.intent",
    "RetryPolicy": "engramdb.core.retry",
    "Scope": "engramdb.core.scope",
    "ScopeFilter": "engramdb.core.scope",
    "MemoryEntry": "engramdb.core.types",
    "MemoryTier": "engramdb.core.types",
    "ProviderCapabilities": "engramdb.core.types",
    "RecallQuery": "engramdb.core.types",
    "RecallResult": "engramdb.core.types",
    "RecallScope": "engramdb.core.types",
    "Engine": "engramdb.engine",
    "EngineConfig": "engramdb.engine",
    "RebuildReport": "engramdb.engine",
    "ScopedMemory": "engramdb.engine",
    "open": "engramdb.engine",
    "MemoryManager": "engramdb.manager.manager",
    "ProviderFailure": "engramdb.manager.manager",
    "RecallReport": "engramdb.manager.manager",
    "ProviderRegistry": "engramdb.manager.registry",
    "MemoryType": "engramdb.orchestrator.memory_types",
    "MemoryTypeRegistry": "engramdb.orchestrator.memory_types",
    "register_memory_type": "engramdb.orchestrator.memory_types",
    "TypeLimits": "engramdb.orchestrator.plugin",
    "MemoryTypeLimits": "engramdb.orchestrator.type_limits",
    "MemoryProvider": "engramdb.providers.base",
    "EventSourcedProvider": "engramdb.providers.event_sourced",
    "FileMemoryProvider": "engramdb.providers.files",
    "FileStore": "engramdb.providers.files",
    "RescanReport": "engramdb.providers.files",
    "EntityType": "engramdb.providers.graph",
    "GraphEntity": "engramdb.providers.graph",
    "GraphMemoryProvider": "engramdb.providers.graph",
    "GraphPath": "engramdb.providers.graph",
    "GraphRelation": "engramdb.providers.graph",
    "GraphTraversal": "engramdb.providers.graph",
    "RelationType": "engramdb.providers.graph",
    "TraversalPattern": "engramdb.providers.graph",
    "WorkingMemoryLimits": "engramdb.providers.working",
    "WorkingMemoryProvider": "engramdb.providers.working",
    "WorkingStore": "engramdb.providers.working",
    "Backend": "engramdb.storage.backend",
    "EventQuery": "engramdb.storage.backend",
    "EventStore": "engramdb.storage.backend",
    "register_backend": "engramdb.storage.registry",
    "SqliteBackend": "engramdb.storage.sqlite",
    "SyncEngine": "engramdb.sync",
    "open_sync": "engramdb.sync",
    "ExtractedItem": "engramdb.formation.types",
    "Extractor": "engramdb.formation.types",
    "IngestMessage": "engramdb.formation.ingest",
    "IngestReport": "engramdb.formation.ingest",
    "RuleExtractor": "engramdb.formation.rules",
    "Cluster": "engramdb.formation.clusters",
    "Clustering": "engramdb.formation.clusters",
    "FallbackExtractor": "engramdb.formation.model_extraction",
    "ModelExtractor": "engramdb.formation.model_extraction",
}


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'engramdb' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is an ordinary attribute
    return value


def __dir__() -> list[str]:
    """The public names, loaded or not (and none of this module's own helpers)."""
    return sorted(__all__)


__all__ = [
    "AuthenticationError",
    "Backend",
    "CapacityInfo",
    "Cluster",
    "Clustering",
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
    "ExtractedItem",
    "Extractor",
    "FallbackExtractor",
    "FileMemoryProvider",
    "FileStore",
    "ForgetResult",
    "GraphEntity",
    "GraphMemoryError",
    "GraphMemoryProvider",
    "GraphPath",
    "GraphRelation",
    "GraphTraversal",
    "IngestMessage",
    "IngestReport",
    "InvalidKeyError",
    "InvalidPatternError",
    "InvalidScopeError",
    "InvalidTraversalError",
    "InvalidValueError",
    "MemorizeResult",
    "MemoryDeleted",
    "MemoryEntry",
    "MemoryExpired",
    "MemoryFileError",
    "MemoryIndexed",
    "MemoryInvalidated",
    "MemoryItem",
    "MemoryLinked",
    "MemoryManager",
    "MemoryProvider",
    "MemoryProviderRegistered",
    "MemoryTier",
    "MemoryType",
    "MemoryTypeLimits",
    "MemoryTypeRegistry",
    "MemoryWritten",
    "MigrationError",
    "ModelExtractor",
    "ModelUnavailableError",
    "NoProviderForTierError",
    "NotFoundError",
    "PartialRecallWarning",
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
    "RecallQueryError",
    "RecallReport",
    "RecallResult",
    "RecallScope",
    "RelationNotFoundError",
    "RelationType",
    "RescanReport",
    "RetryPolicy",
    "RuleExtractor",
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
    "UnsafePathError",
    "UnsupportedTargetError",
    "UsageError",
    "ValidationError",
    "ValueTooLargeError",
    "VersionConflictError",
    "WorkingMemoryLimits",
    "WorkingMemoryProvider",
    "WorkingStore",
    "__version__",
    "open",
    "open_sync",
    "register_backend",
    "register_memory_type",
]
