"""``mapped``: a future's result through a function, its failure and cancellation passed on."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

import pytest

from engramdb.core.futures import mapped


async def test_the_result_is_transformed() -> None:
    source: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    doubled = mapped(source, lambda n: n * 2)
    assert not doubled.done()
    source.set_result(21)
    assert await doubled == 42


async def test_a_failure_is_passed_on_or_turned_into_a_result() -> None:
    loop = asyncio.get_running_loop()
    plain: asyncio.Future[int] = loop.create_future()
    handled: asyncio.Future[int] = loop.create_future()
    refused: asyncio.Future[int] = loop.create_future()

    def only_lookups(exc: BaseException) -> int:
        if isinstance(exc, LookupError):
            return -1
        raise exc

    mapped_plain = mapped(plain, str)
    mapped_handled = mapped(handled, str, failure=only_lookups)
    mapped_refused = mapped(refused, str, failure=only_lookups)
    plain.set_exception(KeyError("k"))
    handled.set_exception(KeyError("k"))
    refused.set_exception(ValueError("v"))
    with pytest.raises(KeyError):
        await mapped_plain
    assert await mapped_handled == -1
    with pytest.raises(ValueError, match="v"):
        await mapped_refused


async def test_a_transform_that_raises_fails_the_mapped_future_only() -> None:
    source: asyncio.Future[int] = asyncio.get_running_loop().create_future()
    broken = mapped(source, lambda n: 1 // n)
    source.set_result(0)
    with pytest.raises(ZeroDivisionError):
        await broken
    assert source.result() == 0


async def test_cancellation_goes_from_the_source_only() -> None:
    loop = asyncio.get_running_loop()
    source: asyncio.Future[int] = loop.create_future()
    given_up = mapped(source, str)
    followed = mapped(source, str)
    given_up.cancel()
    await asyncio.sleep(0)
    assert not source.cancelled()
    source.set_result(7)
    assert await followed == "7"

    cancelled: asyncio.Future[int] = loop.create_future()
    after = mapped(cancelled, str)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await after


async def test_a_failure_nobody_awaits_is_not_reported_as_lost() -> None:
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        source: asyncio.Future[int] = loop.create_future()
        abandoned = mapped(source, str)
        abandoned.cancel()
        source.set_exception(RuntimeError("nobody looks"))
        await asyncio.sleep(0)
        del source, abandoned
        gc.collect()
        assert reported == []
    finally:
        loop.set_exception_handler(None)
