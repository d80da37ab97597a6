"""The blocking REST client covers the async one: every public coroutine method of
``MemoryClient``, ``GraphClient`` and ``WorkflowState`` has a twin of the same name and
parameters on its blocking view, made from the async method itself."""

from __future__ import annotations

import inspect
import threading

import pytest

from engramdb.client import (
    GraphClient,
    MemoryClient,
    SyncGraphClient,
    SyncMemoryClient,
    SyncWorkflowState,
    WorkflowState,
)
from engramdb.core.portal import SyncView, mirrored
from tests.unit.test_sync_surface import async_methods, parameters

#: Async methods whose blocking twin has another name: the view's ``close`` ends its loop too.
REPLACED = {"aclose": "close"}


@pytest.mark.parametrize(
    ("async_type", "view_type"),
    [
        (MemoryClient, SyncMemoryClient),
        (GraphClient, SyncGraphClient),
        (WorkflowState, SyncWorkflowState),
    ],
)
def test_every_client_method_has_a_blocking_twin(
    async_type: type[object], view_type: type[SyncView[object]]
) -> None:
    methods = async_methods(async_type)
    assert methods
    for name, method in methods.items():
        twin = getattr(view_type, REPLACED.get(name, name), None)
        assert twin is not None, f"{view_type.__name__} has no twin of {name}"
        if name not in REPLACED:
            assert parameters(twin) == parameters(method), name
            assert twin.__doc__ == method.__doc__, name
    extra = [
        name
        for name in dir(view_type)
        if not name.startswith("_")
        and not hasattr(async_type, name)
        and name not in {"wrapped", "over", "graph", *REPLACED.values()}  # graph: set in __init__
    ]
    assert not extra, f"{view_type.__name__} has {extra}, {async_type.__name__} does not"


def test_the_client_graph_is_a_blocking_view() -> None:
    with SyncMemoryClient("http://127.0.0.1:9") as memory:
        assert isinstance(memory.graph, SyncGraphClient)
        assert memory.graph.wrapped is memory.wrapped.graph


def test_a_method_added_later_gets_its_twin() -> None:
    class Grown(GraphClient):
        async def shortest_path(self, source: str, target: str, *, limit: int = 3) -> list[str]:
            """The names along the shortest path."""
            return [source, target][:limit]

    @mirrored(Grown)
    class SyncGrown(SyncView[Grown]):
        pass

    twin = vars(SyncGrown)["shortest_path"]
    assert inspect.signature(twin) == inspect.signature(Grown.shortest_path)
    with SyncMemoryClient("http://127.0.0.1:9") as memory:
        grown = SyncGrown(Grown(memory.wrapped), memory._portal)
        assert grown.shortest_path("a", "b", limit=1) == ["a"]  # type: ignore[attr-defined]


def test_a_wrong_argument_fails_before_any_thread_starts() -> None:
    before = threading.active_count()
    with pytest.raises(TypeError, match="api_kye"):
        SyncMemoryClient("http://127.0.0.1:9", api_kye="ek_x")
    assert threading.active_count() == before
