"""``SyncMemoryClient``: the blocking twin of ``MemoryClient``, for code without an event loop.

Each method runs the async client's method of the same name and parameters on a private loop
thread (``core/portal.py``) and waits for it; the twins are made from ``MemoryClient``'s own
coroutine methods, so a method added to the async client is here at once::

    with SyncMemoryClient("http://127.0.0.1:8000", api_key=key) as memory:
        memory.store_knowledge("Error 402 means insufficient funds.")
        facts = memory.search_knowledge("what does 402 mean?")
        memory.graph.add_entity("Alice", "person")
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Self

from engramdb.client.client import MemoryClient
from engramdb.client.graph import GraphClient
from engramdb.client.workflow import WorkflowState
from engramdb.core.portal import ClosingView, Portal, SyncView, mirrored, view


@mirrored(GraphClient)
class SyncGraphClient(SyncView[GraphClient]):
    """Blocking view of ``GraphClient``: ``memory.graph.traverse(…)``."""

    if TYPE_CHECKING:  # the twins are made at import, from GraphClient's methods

        def __getattr__(self, name: str) -> Any: ...


@mirrored(MemoryClient, replaced=frozenset({"aclose"}))
class SyncMemoryClient(ClosingView[MemoryClient]):
    """Blocking client of one Engram service for one identity; takes ``MemoryClient``'s
    arguments (``api_key=…``, ``tenant_id=…``, ``transport=…`` for an ``httpx`` transport).
    The graph endpoints are under ``graph``; ``close`` (or the ``with`` block) ends it."""

    graph = view(SyncGraphClient)

    if TYPE_CHECKING:  # the twins are made at import, from MemoryClient's methods

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, base_url: str = "http://127.0.0.1:8000", **options: Any) -> None:
        client = MemoryClient(base_url, **options)  # a wrong argument fails before a thread starts
        super().__init__(client, Portal())

    @classmethod
    def over(cls, client: MemoryClient, portal: Portal) -> Self:
        """The blocking view of ``client`` on an existing ``portal``: the loop of an engine
        opened with ``open_sync``, whose app an ``ASGITransport`` serves in process."""
        made = cls.__new__(cls)
        ClosingView.__init__(made, client, portal, owns_portal=False)
        return made

    def _closing(self) -> Callable[[], Awaitable[None]]:
        return self.wrapped.aclose


@mirrored(WorkflowState)
class SyncWorkflowState(SyncView[WorkflowState]):
    """Blocking view of ``WorkflowState``: a plan's working memory over the sync client."""

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Any: ...

    def __init__(self, client: SyncMemoryClient, plan_id: str) -> None:
        super().__init__(WorkflowState(client.wrapped, plan_id), client._portal)
