"""``mapped``: a future's result passed through a function, without a task of its own.

A task awaiting a future and returning a function of its result costs a task step, and one more
turn of the loop, before its own waiter can resume. A lone write's path from the model's answer
to its caller crosses several such links; callbacks keep each to one turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

__all__ = ["mapped"]

_S = TypeVar("_S")
_T = TypeVar("_T")


def mapped(
    source: asyncio.Future[_S],
    transform: Callable[[_S], _T],
    *,
    failure: Callable[[BaseException], _T] | None = None,
) -> asyncio.Future[_T]:
    """A future of ``transform(source.result())``, set when ``source`` is done.

    ``source``'s exception is its exception too, unless ``failure`` turns it into a result (it
    may raise to keep it an exception), and ``source``'s cancellation cancels it. Cancelling it
    leaves ``source`` alone: a source shared by several callers keeps running for the others.
    Its exception is always retrieved, so one nobody awaits is not reported as lost.
    """
    result: asyncio.Future[_T] = source.get_loop().create_future()

    def settle(done: asyncio.Future[_S]) -> None:
        if done.cancelled():
            result.cancel()
            return
        exc = done.exception()
        if result.done():
            return
        try:
            if exc is None:
                result.set_result(transform(done.result()))
            elif failure is not None:
                result.set_result(failure(exc))
            else:
                result.set_exception(exc)
        except Exception as raised:  # the transform's own failure is the caller's to see
            result.set_exception(raised)

    source.add_done_callback(settle)
    return result
