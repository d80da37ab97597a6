"""The async Python client of the Engram REST service.

``MemoryClient`` has one method per endpoint, returning the service's typed models and
raising the engine's typed errors (the graph's under ``MemoryClient.graph``, a
``GraphClient``); ``WorkflowState`` wraps a plan's working memory. ``SyncMemoryClient``,
``SyncGraphClient`` and ``SyncWorkflowState`` are their blocking twins, method for method.

Example::

    async with MemoryClient("http://127.0.0.1:8000", api_key=key) as memory:
        await memory.store_knowledge("Error 402 means insufficient funds.")
        facts = await memory.search_knowledge("what does 402 mean?")
"""

from engramdb.client.client import MemoryClient
from engramdb.client.errors import ServiceUnavailableError
from engramdb.client.graph import GraphClient
from engramdb.client.sync import SyncGraphClient, SyncMemoryClient, SyncWorkflowState
from engramdb.client.workflow import WorkflowState

__all__ = [
    "GraphClient",
    "MemoryClient",
    "ServiceUnavailableError",
    "SyncGraphClient",
    "SyncMemoryClient",
    "SyncWorkflowState",
    "WorkflowState",
]
