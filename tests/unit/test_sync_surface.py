"""The blocking API covers the async one: every public coroutine (and async iterator) method
of every object reachable from an ``Engine`` and a ``ScopedMemory`` has a twin of the same
name and parameters on the object's blocking view, and every attribute that is an async object
itself is a view of one."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb.engine import Engine
from engramdb.sync import SyncEngine, SyncView

#: Attributes of async objects that are the engine's plumbing rather than its API: reached
#: through the objects above them, never called by an application.
INTERNAL = {
    "backend": "the storage contract, driven by the providers",
    "indexer": "the indexed tier, driven by the providers",
    "registry": "the provider registry, driven by the manager",
    "graphs": "the cache of working graphs",
    "writer": "the graph's write path",
    "extractor": "the graph's entity extraction",
    "llm": "the chat model client, when one is configured",
    "engine": "a scope's way back to its engine",
}


def async_methods(cls: type) -> dict[str, Callable[..., Any]]:
    """The public coroutine and async-iterator methods of ``cls``."""
    found = {}
    for name in dir(cls):
        member = getattr(cls, name, None)
        if not name.startswith("_") and (
            inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member)
        ):
            found[name] = member
    return found


def is_async_api(value: object) -> bool:
    """Whether ``value`` is an Engram object with coroutine methods."""
    cls = type(value)
    return cls.__module__.startswith("engramdb.") and bool(async_methods(cls))


def parameters(function: Callable[..., Any]) -> list[inspect.Parameter]:
    """The parameters after ``self``."""
    return list(inspect.signature(function).parameters.values())[1:]


def pairs(
    async_obj: object, sync_obj: object, path: str, seen: set[tuple[type, type]]
) -> Iterator[tuple[str, object, object]]:
    """Every (path, async object, view) pair reachable from the given one, each kind once."""
    kind = (type(async_obj), type(sync_obj))
    if kind in seen:
        return
    seen.add(kind)
    yield path, async_obj, sync_obj
    methods = async_methods(type(async_obj))
    for name in dir(async_obj):
        if name.startswith("_") or name in methods or name in INTERNAL:
            continue
        if inspect.isfunction(getattr(type(async_obj), name, None)):
            continue  # a plain method
        value = getattr(async_obj, name)
        if is_async_api(value):
            yield from pairs(value, getattr(sync_obj, name, None), f"{path}.{name}", seen)


@pytest.fixture
def engines(tmp_path: Path) -> Iterator[tuple[Engine, SyncEngine]]:
    config = engramdb.EngineConfig(embedder=None)
    with engramdb.open_sync(tmp_path / "surface.db", config=config) as engram:
        yield engram.wrapped, engram


def test_every_async_method_has_a_blocking_twin(engines: tuple[Engine, SyncEngine]) -> None:
    engine, engram = engines
    seen: set[tuple[type, type]] = set()
    found = [
        *pairs(engine, engram, "engine", seen),
        *pairs(engine.scope("acme", "alice"), engram.scope("acme", "alice"), "scope", seen),
    ]
    missing, different, checked = [], [], 0
    for path, async_obj, view in found:
        assert isinstance(view, SyncView), f"{path} has no blocking view, got {view!r}"
        assert type(view.wrapped) is type(async_obj), path
        for name, method in async_methods(type(async_obj)).items():
            twin = getattr(type(view), name, None)
            if twin is None:
                missing.append(f"{path}.{name}")
            elif parameters(twin) != parameters(method):
                different.append(f"{path}.{name}: {inspect.signature(twin)}")
            checked += 1
    assert not missing, f"no blocking twin: {missing}"
    assert not different, f"parameters differ from the async method: {different}"
    # What the walk reached: the engine, a scope and everything the README names.
    reached = {type(view).__name__ for _, _, view in found}
    assert reached >= {
        "SyncEngine",
        "SyncEventStore",
        "SyncTenancy",
        "SyncScopedMemory",
        "SyncMemoryManager",
        "SyncGraphMemoryProvider",
        "SyncWorkingMemory",
        "SyncEpisodicMemory",
        "SyncSemanticMemory",
        "SyncProceduralMemory",
        "SyncConversationMemory",
        "SyncTaskContexts",
        "SyncPlans",
        "SyncSessions",
        "SyncEventSourcedProvider",
        "SyncWorkingMemoryProvider",
    }
    assert checked > 150


def test_views_offer_nothing_the_async_object_lacks(
    engines: tuple[Engine, SyncEngine],
) -> None:
    engine, engram = engines
    seen: set[tuple[type, type]] = set()
    found = [
        *pairs(engine, engram, "engine", seen),
        *pairs(engine.scope("acme", "alice"), engram.scope("acme", "alice"), "scope", seen),
    ]
    for path, async_obj, view in found:
        extra = [
            name
            for name in dir(type(view))
            if not name.startswith("_") and name != "wrapped" and not hasattr(async_obj, name)
        ]
        assert not extra, f"{path}: the view has {extra}, the async object does not"


def test_a_twin_must_carry_the_name_of_what_it_wraps() -> None:
    from engramdb.orchestrator.working import WorkingMemory
    from engramdb.sync.portal import blocking

    # Python 3.11 wraps an error of __set_name__ in a RuntimeError; 3.12 raises it as it is.
    with pytest.raises((TypeError, RuntimeError)) as raised:

        class Misnamed(SyncView[WorkingMemory]):
            fetch = blocking(WorkingMemory.get)

    error = raised.value.__cause__ or raised.value
    assert isinstance(error, TypeError)
    assert "Misnamed.fetch must be named 'get'" in str(error)


def test_twins_carry_the_async_docstrings(engines: tuple[Engine, SyncEngine]) -> None:
    _, engram = engines
    mem = engram.scope("acme", "alice")
    assert mem.episodic.remember.__doc__ == engram.wrapped.scope().episodic.remember.__doc__
    assert type(mem.episodic).remember.__doc__
    assert inspect.signature(mem.manager.store) == inspect.signature(
        engram.wrapped.scope().manager.store
    )
