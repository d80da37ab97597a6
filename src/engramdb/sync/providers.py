"""Blocking views of the provider API (rfc-2002): ``SyncMemoryProvider`` for any
``MemoryProvider``, ``SyncEventSourcedProvider``, ``SyncWorkingMemoryProvider``,
``SyncGraphMemoryProvider`` (graph memory) and ``SyncMemoryManager``."""

from __future__ import annotations

from typing import Any, TypeVar

from engramdb.core.types import MemoryTier
from engramdb.manager.manager import MemoryManager
from engramdb.providers.base import MemoryProvider
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.files import FileMemoryProvider
from engramdb.providers.graph import GraphMemoryProvider
from engramdb.providers.working import WorkingMemoryProvider
from engramdb.sync.portal import Portal, SyncView, blocking, view

TP = TypeVar("TP", bound=MemoryProvider)


class SyncMemoryProvider(SyncView[TP]):
    """Blocking view of a ``MemoryProvider``."""

    write = blocking(MemoryProvider.write)
    read = blocking(MemoryProvider.read)
    delete = blocking(MemoryProvider.delete)
    search = blocking(MemoryProvider.search)
    list_keys = blocking(MemoryProvider.list_keys)
    rebuild = blocking(MemoryProvider.rebuild)
    close = blocking(MemoryProvider.close)


class SyncEventSourcedProvider(SyncMemoryProvider[EventSourcedProvider]):
    """Blocking view of an ``EventSourcedProvider``."""

    write = blocking(EventSourcedProvider.write)
    delete = blocking(EventSourcedProvider.delete)
    update = blocking(EventSourcedProvider.update)
    write_many = blocking(EventSourcedProvider.write_many)
    upsert_similar = blocking(EventSourcedProvider.upsert_similar)
    read_record = blocking(EventSourcedProvider.read_record)
    forget = blocking(EventSourcedProvider.forget)
    restore = blocking(EventSourcedProvider.restore)
    search_hits = blocking(EventSourcedProvider.search_hits)
    count = blocking(EventSourcedProvider.count)
    entries = blocking(EventSourcedProvider.entries)
    evict = blocking(EventSourcedProvider.evict)
    sweep_expired = blocking(EventSourcedProvider.sweep_expired)


class SyncFileMemoryProvider(SyncEventSourcedProvider):
    """Blocking view of a ``FileMemoryProvider`` (the scope's memory files)."""

    rescan = blocking(FileMemoryProvider.rescan)
    render = blocking(FileMemoryProvider.render)


class SyncWorkingMemoryProvider(SyncMemoryProvider[WorkingMemoryProvider]):
    """Blocking view of a ``WorkingMemoryProvider`` (tier 1, in this process)."""

    clear = blocking(WorkingMemoryProvider.clear)


class SyncGraphMemoryProvider(SyncMemoryProvider[GraphMemoryProvider]):
    """Blocking view of a scope's graph memory (``GraphMemoryProvider``)."""

    entries = view(SyncEventSourcedProvider)
    add_entity = blocking(GraphMemoryProvider.add_entity)
    add_entities = blocking(GraphMemoryProvider.add_entities)
    get_entity = blocking(GraphMemoryProvider.get_entity)
    find_entity = blocking(GraphMemoryProvider.find_entity)
    merge_entities = blocking(GraphMemoryProvider.merge_entities)
    add_relation = blocking(GraphMemoryProvider.add_relation)
    add_relations = blocking(GraphMemoryProvider.add_relations)
    invalidate_relation = blocking(GraphMemoryProvider.invalidate_relation)
    delete_relation = blocking(GraphMemoryProvider.delete_relation)
    get_relations = blocking(GraphMemoryProvider.get_relations)
    traverse = blocking(GraphMemoryProvider.traverse)
    paths = blocking(GraphMemoryProvider.paths)
    search_entities = blocking(GraphMemoryProvider.search_entities)
    ingest = blocking(GraphMemoryProvider.ingest)
    export_json = blocking(GraphMemoryProvider.export_json)
    working_graph = blocking(GraphMemoryProvider.working_graph)


def provider_view(provider: MemoryProvider, portal: Portal) -> SyncMemoryProvider[Any]:
    """The most specific blocking view of ``provider``."""
    if isinstance(provider, GraphMemoryProvider):
        return SyncGraphMemoryProvider(provider, portal)
    if isinstance(provider, EventSourcedProvider):
        return SyncEventSourcedProvider(provider, portal)
    if isinstance(provider, WorkingMemoryProvider):
        return SyncWorkingMemoryProvider(provider, portal)
    return SyncMemoryProvider(provider, portal)


class SyncMemoryManager(SyncView[MemoryManager]):
    """Blocking view of a ``MemoryManager``; the providers it hands out come as views."""

    register_provider = blocking(MemoryManager.register_provider)
    providers = blocking(MemoryManager.providers)
    store = blocking(MemoryManager.store)
    read = blocking(MemoryManager.read)
    delete = blocking(MemoryManager.delete)
    list_keys = blocking(MemoryManager.list_keys)
    recall = blocking(MemoryManager.recall)
    recall_report = blocking(MemoryManager.recall_report)
    close = blocking(MemoryManager.close)

    def get_provider(self, provider_id: str) -> SyncMemoryProvider[Any]:
        """See ``MemoryManager.get_provider``."""
        return provider_view(self._run(self.wrapped.get_provider, provider_id), self._portal)

    def providers_by_tier(self, tier: MemoryTier) -> list[SyncMemoryProvider[Any]]:
        """See ``MemoryManager.providers_by_tier``."""
        found = self._run(self.wrapped.providers_by_tier, tier)
        return [provider_view(provider, self._portal) for provider in found]
