"""The client's own logic: error answers back to typed errors, retries under one
idempotency key, an unreachable service."""

from __future__ import annotations

import httpx
import pytest

from engramdb.client import MemoryClient, ServiceUnavailableError
from engramdb.client.errors import error_class, raise_for_answer
from engramdb.core.errors import (
    EngramRuntimeError,
    InvalidKeyError,
    NotFoundError,
    UsageError,
    ValueTooLargeError,
)


def test_codes_map_back_to_the_error_tree() -> None:
    assert error_class("not_found", 404) is NotFoundError
    assert error_class("invalid_key", 422) is InvalidKeyError
    assert error_class("value_too_large", 413) is ValueTooLargeError
    assert error_class("something_new", 418) is UsageError
    assert error_class("something_new", 502) is EngramRuntimeError


def test_answers_that_are_not_json_still_raise() -> None:
    raise_for_answer(httpx.Response(204))
    with pytest.raises(EngramRuntimeError, match="bad gateway"):
        raise_for_answer(httpx.Response(502, text="bad gateway"))
    with pytest.raises(UsageError) as caught:
        raise_for_answer(httpx.Response(400, json=["odd"]))
    assert caught.value.details["status_code"] == 400


async def test_writes_are_retried_under_one_idempotency_key() -> None:
    seen: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["Idempotency-Key"])
        if len(seen) == 1:
            raise httpx.ConnectError("dropped", request=request)
        if len(seen) == 2:
            return httpx.Response(503, json={"error": "storage_error", "message": "busy"})
        return httpx.Response(201, json={"id": "k", "status": "created"})

    async with MemoryClient(transport=httpx.MockTransport(answer), retries=2) as client:
        result = await client.store_knowledge("a fact")
    assert result.id == "k"
    assert len(seen) == 3
    assert len(set(seen)) == 1


async def test_reads_carry_no_idempotency_key_and_give_up_in_the_end() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        assert "Idempotency-Key" not in request.headers
        raise httpx.ConnectError("refused", request=request)

    async with MemoryClient(transport=httpx.MockTransport(answer), retries=1) as client:
        with pytest.raises(ServiceUnavailableError):
            await client.health()
