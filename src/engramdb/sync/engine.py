"""``open_sync`` and the blocking views of the engine: ``SyncEngine``, ``SyncScopedMemory``,
``SyncEventStore`` (the event log) and ``SyncTenancy``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engramdb.core.portal import ClosingView
from engramdb.core.scope import Scope
from engramdb.engine import Engine, EngineConfig, ScopedMemory
from engramdb.engine import open as open_async
from engramdb.orchestrator.tenancy import Tenancy
from engramdb.storage.backend import INDEX_BUILD_MEMORY_MB, EventStore
from engramdb.sync.memory_types import (
    SyncConversationMemory,
    SyncEpisodicMemory,
    SyncMemoryType,
    SyncPlans,
    SyncProceduralMemory,
    SyncSemanticMemory,
    SyncSessions,
    SyncTaskContexts,
    SyncWorkingMemory,
)
from engramdb.sync.portal import Portal, SyncView, blocking, invoke, iterating, view, viewing
from engramdb.sync.providers import (
    SyncEventSourcedProvider,
    SyncFileMemoryProvider,
    SyncGraphMemoryProvider,
    SyncMemoryManager,
    SyncWorkingMemoryProvider,
)


class SyncEventStore(SyncView[EventStore]):
    """Blocking view of the event log (``EventStore``)."""

    append = blocking(EventStore.append)
    read = blocking(EventStore.read)
    stream = iterating(EventStore.stream)
    last_position = blocking(EventStore.last_position)
    count = blocking(EventStore.count)


class SyncTenancy(SyncView[Tenancy]):
    """Blocking view of ``Tenancy``: tenants, users and API keys."""

    create_tenant = blocking(Tenancy.create_tenant)
    get_tenant = blocking(Tenancy.get_tenant)
    ensure_tenant = blocking(Tenancy.ensure_tenant)
    list_tenants = blocking(Tenancy.list_tenants)
    delete_tenant = blocking(Tenancy.delete_tenant)
    create_user = blocking(Tenancy.create_user)
    ensure_user = blocking(Tenancy.ensure_user)
    list_users = blocking(Tenancy.list_users)
    delete_user = blocking(Tenancy.delete_user)
    create_key = blocking(Tenancy.create_key)
    revoke_key = blocking(Tenancy.revoke_key)
    list_keys = blocking(Tenancy.list_keys)
    verify_key = blocking(Tenancy.verify_key)


class SyncScopedMemory(SyncView[ScopedMemory]):
    """Blocking view of a ``ScopedMemory``: its memory types, providers, graph and manager
    are blocking views too (``mem.episodic.remember(…)``, ``mem.manager.store(…)``)."""

    working = view(SyncWorkingMemory)
    episodic = view(SyncEpisodicMemory)
    semantic = view(SyncSemanticMemory)
    procedural = view(SyncProceduralMemory)
    conversation = view(SyncConversationMemory)
    graph = view(SyncGraphMemoryProvider)
    manager = view(SyncMemoryManager)
    persistent = view(SyncEventSourcedProvider)
    working_provider = view(SyncWorkingMemoryProvider)
    tasks = view(SyncTaskContexts)
    plans = view(SyncPlans)
    sessions = view(SyncSessions)
    assemble = blocking(ScopedMemory.assemble)
    ingest = blocking(ScopedMemory.ingest)
    clusters = blocking(ScopedMemory.clusters)
    last_trace = blocking(ScopedMemory.last_trace)

    @property
    def scope(self) -> Scope:
        """The scope this memory belongs to."""
        return self.wrapped.scope

    def types(self) -> list[SyncMemoryType[Any]]:
        """The memory types of this scope."""
        views = (self.working, self.episodic, self.semantic, self.procedural, self.conversation)
        return list(views)

    @property
    def files(self) -> SyncFileMemoryProvider | None:
        """The scope's memory files (``None`` unless the engine keeps them)."""
        found = self.wrapped.files
        return None if found is None else SyncFileMemoryProvider(found, self._portal)

    def memory_type(self, name: str) -> SyncMemoryType[Any]:
        """The registered memory type ``name`` (see ``ScopedMemory.memory_type``)."""
        return SyncMemoryType(self.wrapped.memory_type(name), self._portal)


class SyncEngine(ClosingView[Engine]):
    """Blocking view of an ``Engine``, from :func:`open_sync`. Close it (or use ``with``) to
    close the engine and stop the thread its loop runs on.

    Progress callbacks (``rebuild``, ``reindex``, ``restore``) run on the engine's own
    threads, not the caller's, and must not call the engine (from the loop's thread that is
    refused with ``UsageError``).
    """

    events = view(SyncEventStore)
    tenancy = view(SyncTenancy)
    rebuild = blocking(Engine.rebuild)
    reindex = blocking(Engine.reindex)
    reindex_total = blocking(Engine.reindex_total)
    vector_counts = blocking(Engine.vector_counts)
    export = iterating(Engine.export)
    restore = blocking(Engine.restore)
    sweep_expired = blocking(Engine.sweep_expired)
    stats = blocking(Engine.stats)
    render_files = blocking(Engine.render_files)
    formed = blocking(Engine.formed)

    @property
    def config(self) -> EngineConfig:
        """The engine's settings."""
        return self.wrapped.config

    scope = viewing(Engine.scope, SyncScopedMemory)
    provider = viewing(Engine.provider, SyncEventSourcedProvider)
    file_provider = viewing(Engine.file_provider, SyncFileMemoryProvider)

    @contextmanager
    def bulk_load(self, *, index_memory_mb: int = INDEX_BUILD_MEMORY_MB) -> Iterator[None]:
        """Blocking twin of ``Engine.bulk_load``: vector indexes built once when it ends."""
        loading = self.wrapped.bulk_load(index_memory_mb=index_memory_mb)
        self._run(loading.__aenter__)
        try:
            yield
        except BaseException as exc:
            if not self._run(loading.__aexit__, type(exc), exc, exc.__traceback__):
                raise
        else:
            self._run(loading.__aexit__, None, None, None)

    def _closing(self) -> Callable[[], Awaitable[None]]:
        return self.wrapped.close


def open_sync(
    target: str | Path, *, config: EngineConfig | None = None, **options: Any
) -> SyncEngine:
    """Blocking :func:`engramdb.open`: the engine runs on a private event-loop thread.

    Example::

        with engramdb.open_sync("memory.db") as engram:
            mem = engram.scope(tenant="acme", user="alice")
            hits = mem.episodic.remember("where does the user live?")
    """
    portal = Portal()
    try:
        engine = portal.call(invoke(_opened, target, config, options))
    except BaseException:
        portal.stop()
        raise
    return SyncEngine(engine, portal)


async def _opened(
    target: str | Path, config: EngineConfig | None, options: dict[str, Any]
) -> Engine:
    return await open_async(target, config=config, **options)
