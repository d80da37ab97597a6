"""How the blocking API is made: ``Portal``, an event loop on a daemon thread that runs
coroutines for blocking callers; ``SyncView``, the base of every blocking view of an async
object; and the one-line declarations a view consists of:

- ``blocking(Async.method)``: the view's method runs the wrapped object's own ``method`` (an
  override included) on the portal and waits for its result;
- ``iterating(Async.method)``: the same for a method that returns an async iterator, whose
  items the view's method yields one by one;
- ``view(SyncThing)``: an attribute (or property) of the wrapped object that is itself an
  async object, seen through its own view;
- ``viewing(Async.method, SyncThing)``: a plain method that returns an async object, whose
  twin returns it seen through ``SyncThing``;
- ``ClosingView``: the base of a view that owns what it wraps (the engine's, the REST
  client's): ``close`` and the ``with`` block, written once;
- ``@mirrored(Async)``: a class decorator that gives a view the ``blocking`` (or
  ``iterating``) twin of every public async method it does not declare, so that a method added
  to ``Async`` has its twin at once (the REST client's view, whose class grows with the API).

The view's method has the async method's parameters (a new argument of the async method is
there at once, for type checkers too) and its docstring; there is no second implementation.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Generator
from types import TracebackType
from typing import Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload

from engramdb.core.errors import EngineClosedError, UsageError

# This module is the whole blocking machinery, of the engine's views and of the REST client's
# alike; it imports nothing heavier than the error tree, as the client installs alone.

P = ParamSpec("P")
R = TypeVar("R")
Y = TypeVar("Y")
W = TypeVar("W")
V = TypeVar("V", bound="SyncView[Any]")


class Portal:
    """An event loop on a daemon thread that runs coroutines for blocking callers."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, daemon=True, name="engram-sync"
        )
        self._thread.start()

    @property
    def closed(self) -> bool:
        """Whether :meth:`stop` has run."""
        return self._loop.is_closed()

    def call(self, coro: Coroutine[Any, Any, R]) -> R:
        """Run ``coro`` on the loop and wait for its result (or its exception).

        Raises:
            EngineClosedError: the portal was stopped (its engine closed).
            UsageError: called from the loop's own thread (from a progress callback, say),
                where waiting would never end.
        """
        if threading.current_thread() is self._thread:
            coro.close()
            raise UsageError(
                "a blocking call from inside the engine's own loop (a progress callback?) "
                "would wait for itself; use the async API there"
            )
        try:
            future = asyncio.run_coroutine_threadsafe(coro, self._loop)
        except RuntimeError:  # the loop is closed
            coro.close()
            raise EngineClosedError("the engine is closed") from None
        try:
            return future.result()
        except BaseException:
            # Interrupted while waiting (Ctrl-C): the work stops too, rather than running on.
            future.cancel()
            raise

    def iterate(self, items: AsyncIterator[Y]) -> Generator[Y, None, None]:
        """The items of ``items``, each fetched on the loop as the caller asks for it."""
        try:
            while not isinstance(item := self.call(_next(items)), _End):
                yield item
        finally:
            closing = getattr(items, "aclose", None)
            if closing is not None and not self.closed:
                self.call(closing())

    def stop(self) -> None:
        """Stop the loop and its thread; work still pending on it is cancelled."""
        if self.closed:
            return
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.run_until_complete(_cancel_pending())
        self._loop.close()


async def _cancel_pending() -> None:
    current = asyncio.current_task()
    pending = [task for task in asyncio.all_tasks() if task is not current]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)
    await asyncio.get_running_loop().shutdown_asyncgens()


class _End:
    """What ``_next`` returns after the last item."""


async def _next(items: AsyncIterator[Y]) -> Y | _End:
    try:
        return await anext(items)
    except StopAsyncIteration:
        return _End()


async def invoke(method: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
    """Call ``method`` and await what it returns: on the loop, so even the synchronous part of
    an async method runs on the loop's thread."""
    return await method(*args, **kwargs)


class SyncView(Generic[W]):
    """A blocking view of ``wrapped``, an object of the async API, whose coroutines run on
    ``portal``."""

    def __init__(self, wrapped: W, portal: Portal) -> None:
        self.wrapped = wrapped
        self._portal = portal

    def _run(self, method: Callable[P, Awaitable[R]], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``method(*args, **kwargs)`` on the portal and wait for it."""
        return self._portal.call(invoke(method, *args, **kwargs))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} of {self.wrapped!r}>"


class ClosingView(SyncView[W]):
    """A blocking view that owns what it wraps (an engine, a client): ``close``, or leaving
    its ``with`` block, closes the wrapped object on the portal and then stops the portal,
    unless the portal was lent to it (``owns_portal=False``). The portal stops even when the
    wrapped object fails to close, so no loop thread is left behind."""

    def __init__(self, wrapped: W, portal: Portal, *, owns_portal: bool = True) -> None:
        super().__init__(wrapped, portal)
        self._owns_portal = owns_portal

    def _closing(self) -> Callable[[], Awaitable[object]]:
        """The wrapped object's own coroutine method that closes it."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the wrapped object, and the loop thread if this view started it; closing a
        view whose loop is stopped does nothing."""
        if self._portal.closed:
            return
        try:
            self._run(self._closing())
        finally:
            if self._owns_portal:
                self._portal.stop()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


class _Twin:
    """A view attribute that wraps the method of the same name of the wrapped object."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self.name = method.__name__
        self.method = method
        self.__doc__ = method.__doc__

    def __set_name__(self, owner: type[Any], name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__name__}.{name} must be named {self.name!r}, as it wraps")

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.signature(self.method)


class _Blocking(_Twin, Generic[P, R]):
    def __init__(self, method: Callable[Concatenate[Any, P], Awaitable[R]]) -> None:
        super().__init__(method)

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(self, obj: SyncView[Any], owner: type[Any] | None = None) -> Callable[P, R]: ...

    def __get__(
        self, obj: SyncView[Any] | None, owner: type[Any] | None = None
    ) -> Self | Callable[P, R]:
        if obj is None:
            return self
        method: Callable[P, Awaitable[R]] = getattr(obj.wrapped, self.name)
        run = obj._run

        @functools.wraps(method)
        def blocking_twin(*args: P.args, **kwargs: P.kwargs) -> R:
            return run(method, *args, **kwargs)

        return blocking_twin

    def __call__(self, obj: SyncView[Any], /, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.__get__(obj)(*args, **kwargs)


class _Iterating(_Twin, Generic[P, Y]):
    def __init__(self, method: Callable[Concatenate[Any, P], AsyncIterator[Y]]) -> None:
        super().__init__(method)

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(
        self, obj: SyncView[Any], owner: type[Any] | None = None
    ) -> Callable[P, Generator[Y, None, None]]: ...

    def __get__(
        self, obj: SyncView[Any] | None, owner: type[Any] | None = None
    ) -> Self | Callable[P, Generator[Y, None, None]]:
        if obj is None:
            return self
        method: Callable[P, AsyncIterator[Y]] = getattr(obj.wrapped, self.name)
        portal = obj._portal

        @functools.wraps(method)
        def iterating_twin(*args: P.args, **kwargs: P.kwargs) -> Generator[Y, None, None]:
            return portal.iterate(method(*args, **kwargs))

        return iterating_twin

    def __call__(
        self, obj: SyncView[Any], /, *args: P.args, **kwargs: P.kwargs
    ) -> Generator[Y, None, None]:
        return self.__get__(obj)(*args, **kwargs)


class _Viewing(_Twin, Generic[P, V]):
    def __init__(self, method: Callable[Concatenate[Any, P], Any], view_type: type[V]) -> None:
        super().__init__(method)
        self.view_type = view_type

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(self, obj: SyncView[Any], owner: type[Any] | None = None) -> Callable[P, V]: ...

    def __get__(
        self, obj: SyncView[Any] | None, owner: type[Any] | None = None
    ) -> Self | Callable[P, V]:
        if obj is None:
            return self
        method: Callable[P, Any] = getattr(obj.wrapped, self.name)
        view_type, portal = self.view_type, obj._portal

        @functools.wraps(method)
        def viewing_twin(*args: P.args, **kwargs: P.kwargs) -> V:
            return view_type(method(*args, **kwargs), portal)

        return viewing_twin

    def __call__(self, obj: SyncView[Any], /, *args: P.args, **kwargs: P.kwargs) -> V:
        return self.__get__(obj)(*args, **kwargs)


class _View(Generic[V]):
    def __init__(self, view_type: type[V]) -> None:
        self.view_type = view_type
        self.name = ""

    def __set_name__(self, owner: type[Any], name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(self, obj: SyncView[Any], owner: type[Any] | None = None) -> V: ...

    def __get__(self, obj: SyncView[Any] | None, owner: type[Any] | None = None) -> Self | V:
        if obj is None:
            return self
        return self.view_type(getattr(obj.wrapped, self.name), obj._portal)


def blocking(method: Callable[Concatenate[Any, P], Awaitable[R]]) -> _Blocking[P, R]:
    """The blocking twin of the coroutine method ``method``, as a view attribute of the same
    name: ``remember = blocking(EpisodicMemory.remember)``."""
    return _Blocking(method)


def iterating(
    method: Callable[Concatenate[Any, P], AsyncIterator[Y]],
) -> _Iterating[P, Y]:
    """The blocking twin of ``method``, which returns an async iterator: the twin returns an
    iterator that fetches each item on the portal as it is asked for."""
    return _Iterating(method)


def viewing(method: Callable[Concatenate[Any, P], Any], view_type: type[V]) -> _Viewing[P, V]:
    """The blocking twin of the plain method ``method``, which returns an async object: the
    twin returns it seen through ``view_type`` (``scope = viewing(Engine.scope,
    SyncScopedMemory)``)."""
    return _Viewing(method, view_type)


def view(view_type: type[V]) -> _View[V]:
    """An attribute of the wrapped object that is an async object itself, seen through
    ``view_type``: ``episodic = view(SyncEpisodicMemory)``."""
    return _View(view_type)


def mirrored(
    async_type: type[Any], *, replaced: frozenset[str] = frozenset()
) -> Callable[[type[V]], type[V]]:
    """A class decorator: the view gets the blocking twin of every public coroutine (and
    async-iterator) method of ``async_type`` that it does not declare itself, except the
    ``replaced`` ones (an ``aclose`` that the view's own ``close`` stands for)."""

    def decorate(view_type: type[V]) -> type[V]:
        for name, member in inspect.getmembers(async_type):
            if name.startswith("_") or name in replaced or hasattr(view_type, name):
                continue
            twin: _Twin
            if inspect.iscoroutinefunction(member):
                twin = _Blocking(member)
            elif inspect.isasyncgenfunction(member):
                twin = _Iterating(member)
            else:
                continue
            setattr(view_type, name, twin)
        return view_type

    return decorate
