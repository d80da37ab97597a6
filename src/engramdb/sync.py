"""Blocking wrappers for code without an event loop. Each method is one line that runs the
async implementation on a private event-loop thread; there is no second implementation."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import DEFAULT_TENANT
from engramdb.core.types import MemoryEntry, MemoryTier, RecallQuery, RecallResult
from engramdb.engine import Engine, EngineConfig, RebuildReport, ScopedMemory
from engramdb.engine import open as open_async
from engramdb.providers.graph import (
    GraphEntity,
    GraphIngest,
    GraphMemoryProvider,
    GraphPath,
    GraphRelation,
    GraphTraversal,
)
from engramdb.providers.graph.types import Direction
from engramdb.storage.backend import EventQuery

T = TypeVar("T")


class _Portal:
    """An event loop on a daemon thread that runs coroutines for blocking callers."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="engram-sync"
        )
        self._thread.start()

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()


class SyncGraph:
    """Blocking view of a scope's graph memory (``GraphMemoryProvider``)."""

    def __init__(self, graph: GraphMemoryProvider, portal: _Portal) -> None:
        self.graph, self._portal = graph, portal

    def add_entity(self, entity: GraphEntity, *, resolve: bool = True) -> MemoryEntry:
        """See ``GraphMemoryProvider.add_entity``."""
        return self._portal.call(self.graph.add_entity(entity, resolve=resolve))

    def add_entities(
        self, entities: Sequence[GraphEntity], *, resolve: bool = True
    ) -> list[MemoryEntry]:
        """See ``GraphMemoryProvider.add_entities``."""
        return self._portal.call(self.graph.add_entities(entities, resolve=resolve))

    def get_entity(self, entity_id: str) -> GraphEntity | None:
        """See ``GraphMemoryProvider.get_entity``."""
        return self._portal.call(self.graph.get_entity(entity_id))

    def find_entity(self, name: str, entity_type: str) -> GraphEntity | None:
        """See ``GraphMemoryProvider.find_entity``."""
        return self._portal.call(self.graph.find_entity(name, entity_type))

    def merge_entities(self, kept_id: str, merged_id: str) -> GraphEntity:
        """See ``GraphMemoryProvider.merge_entities``."""
        return self._portal.call(self.graph.merge_entities(kept_id, merged_id))

    def delete(self, key: str) -> bool:
        """See ``GraphMemoryProvider.delete``."""
        return self._portal.call(self.graph.delete(key))

    def add_relation(
        self, source_id: str, target_id: str, *args: Any, **options: Any
    ) -> GraphRelation:
        """See ``GraphMemoryProvider.add_relation``."""
        return self._portal.call(self.graph.add_relation(source_id, target_id, *args, **options))

    def add_relations(self, relations: Sequence[GraphRelation]) -> list[GraphRelation]:
        """See ``GraphMemoryProvider.add_relations``."""
        return self._portal.call(self.graph.add_relations(relations))

    def invalidate_relation(self, relation_id: str, *, at: datetime | None = None) -> GraphRelation:
        """See ``GraphMemoryProvider.invalidate_relation``."""
        return self._portal.call(self.graph.invalidate_relation(relation_id, at=at))

    def delete_relation(self, relation_id: str) -> None:
        """See ``GraphMemoryProvider.delete_relation``."""
        self._portal.call(self.graph.delete_relation(relation_id))

    def get_relations(
        self,
        entity_id: str,
        direction: Direction = "outgoing",
        relation_type: str | None = None,
        **options: Any,
    ) -> list[GraphRelation]:
        """See ``GraphMemoryProvider.get_relations``."""
        found = self.graph.get_relations(entity_id, direction, relation_type, **options)
        return self._portal.call(found)

    def traverse(self, traversal: GraphTraversal) -> list[GraphEntity]:
        """See ``GraphMemoryProvider.traverse``."""
        return self._portal.call(self.graph.traverse(traversal))

    def paths(self, traversal: GraphTraversal) -> list[GraphPath]:
        """See ``GraphMemoryProvider.paths``."""
        return self._portal.call(self.graph.paths(traversal))

    def search_entities(self, query: str, **options: Any) -> list[tuple[GraphEntity, float]]:
        """See ``GraphMemoryProvider.search_entities``."""
        return self._portal.call(self.graph.search_entities(query, **options))

    def ingest(self, text: str, **options: Any) -> GraphIngest:
        """See ``GraphMemoryProvider.ingest``."""
        return self._portal.call(self.graph.ingest(text, **options))

    def export_json(self, path: str | Path) -> Path:
        """See ``GraphMemoryProvider.export_json``."""
        return self._portal.call(self.graph.export_json(path))


class SyncMemory:
    """Blocking view of a ``ScopedMemory``'s manager, and of its graph (``graph``)."""

    def __init__(self, memory: ScopedMemory, portal: _Portal) -> None:
        self.memory, self._portal = memory, portal
        self.graph = SyncGraph(memory.graph, portal)

    def store(
        self, key: str, value: Any, *, tier: MemoryTier = MemoryTier.WORKING, **options: Any
    ) -> MemoryEntry:
        """See ``MemoryManager.store``."""
        return self._portal.call(self.memory.manager.store(key, value, tier=tier, **options))

    def read(self, key: str, provider_id: str | None = None) -> MemoryEntry | None:
        """See ``MemoryManager.read``."""
        return self._portal.call(self.memory.manager.read(key, provider_id))

    def delete(self, key: str, **options: Any) -> list[str]:
        """See ``MemoryManager.delete``."""
        return self._portal.call(self.memory.manager.delete(key, **options))

    def list_keys(self, **options: Any) -> list[str]:
        """See ``MemoryManager.list_keys``."""
        return self._portal.call(self.memory.manager.list_keys(**options))

    def recall(self, query: RecallQuery | str) -> list[RecallResult]:
        """See ``MemoryManager.recall``; a string is a query over all tiers."""
        q = query if isinstance(query, RecallQuery) else RecallQuery(query=query)
        return self._portal.call(self.memory.manager.recall(q))


class SyncEngine:
    """Blocking view of an ``Engine``; close it (or use ``with``) to stop its thread."""

    def __init__(self, engine: Engine, portal: _Portal) -> None:
        self.engine, self._portal = engine, portal

    def scope(
        self,
        tenant: str = DEFAULT_TENANT,
        user: str | None = None,
        agent: str | None = None,
        session: str | None = None,
        plan: str | None = None,
    ) -> SyncMemory:
        """See ``Engine.scope``."""
        return SyncMemory(self.engine.scope(tenant, user, agent, session, plan), self._portal)

    def events(self, query: EventQuery | None = None) -> list[EventEnvelope]:
        """Events of the log matching ``query``."""
        return self._portal.call(self.engine.events.read(query))

    def rebuild(self) -> RebuildReport:
        """See ``Engine.rebuild``."""
        return self._portal.call(self.engine.rebuild())

    def close(self) -> None:
        """Close the engine and stop the loop thread."""
        self._portal.call(self.engine.close())
        self._portal.stop()

    def __enter__(self) -> SyncEngine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def open_sync(
    target: str | Path, *, config: EngineConfig | None = None, **options: Any
) -> SyncEngine:
    """Blocking :func:`engramdb.open`."""
    portal = _Portal()
    try:
        engine = portal.call(_awaited(open_async(target, config=config, **options)))
    except BaseException:
        portal.stop()
        raise
    return SyncEngine(engine, portal)


async def _awaited(opening: Any) -> Engine:
    engine: Engine = await opening
    return engine
