"""The blocking API, for code without an event loop: :func:`open_sync` and its views.

Every object of the async API reachable from an ``Engine`` has a blocking twin here, named
``Sync`` + its class name (``SyncEngine``, ``SyncScopedMemory``, ``SyncEpisodicMemory``,
``SyncMemoryManager``, ``SyncGraphMemoryProvider``, ``SyncTenancy``, ``SyncEventStore``, …),
and every coroutine method of the async object is a method of its twin with the same
parameters. Each twin method is one line that runs the async method on the engine's private
loop thread (``sync/portal.py``); there is no second implementation::

    with engramdb.open_sync("memory.db") as engram:
        mem = engram.scope(tenant="acme", user="alice")
        mem.episodic.memorize(engramdb.MemoryItem(text="I moved to Lisbon"))
        mem.manager.store("user.city", "Lisbon", tier=engramdb.MemoryTier.PERSISTENT)
        context = mem.assemble("where does the user live?")

The async object behind a view is its ``wrapped`` attribute.
"""

from engramdb.sync.engine import (
    SyncEngine,
    SyncEventStore,
    SyncScopedMemory,
    SyncTenancy,
    open_sync,
)
from engramdb.sync.memory_types import (
    SyncConversationMemory,
    SyncEpisodicMemory,
    SyncMemoryType,
    SyncPlans,
    SyncProceduralMemory,
    SyncResourceStore,
    SyncSemanticMemory,
    SyncSessions,
    SyncTaskContexts,
    SyncWorkingMemory,
)
from engramdb.sync.portal import SyncView
from engramdb.sync.providers import (
    SyncEventSourcedProvider,
    SyncGraphMemoryProvider,
    SyncMemoryManager,
    SyncMemoryProvider,
    SyncWorkingMemoryProvider,
)

__all__ = [
    "SyncConversationMemory",
    "SyncEngine",
    "SyncEpisodicMemory",
    "SyncEventSourcedProvider",
    "SyncEventStore",
    "SyncGraphMemoryProvider",
    "SyncMemoryManager",
    "SyncMemoryProvider",
    "SyncMemoryType",
    "SyncPlans",
    "SyncProceduralMemory",
    "SyncResourceStore",
    "SyncScopedMemory",
    "SyncSemanticMemory",
    "SyncSessions",
    "SyncTaskContexts",
    "SyncTenancy",
    "SyncView",
    "SyncWorkingMemory",
    "SyncWorkingMemoryProvider",
    "open_sync",
]
