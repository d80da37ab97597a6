"""The client's own logic: error answers back to typed errors, retries under one
idempotency key, an unreachable service."""

from __future__ import annotations

from collections.abc import Sequence

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
from tests.helpers.openai_server import JsonHandler, serving


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


def _scripted(
    answers: Sequence[tuple[int, object] | None], keys: list[str | None]
) -> type[JsonHandler]:
    """A handler that records each request's idempotency key and gives the next scripted
    answer: ``(status, body)``, or ``None`` to drop the connection without answering."""

    class Handler(JsonHandler):
        def _answer(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            keys.append(self.headers.get("Idempotency-Key"))
            answer = answers[min(len(keys), len(answers)) - 1]
            if answer is None:
                self.close_connection = True  # the client sees the connection drop
                return
            self.send(*answer)

        do_GET = do_POST = _answer

    return Handler


async def test_writes_are_retried_under_one_idempotency_key() -> None:
    keys: list[str | None] = []
    answers = [
        None,
        (503, {"error": "storage_error", "message": "busy"}),
        (201, {"id": "k", "status": "created"}),
    ]
    with serving(_scripted(answers, keys)) as api:
        async with MemoryClient(api.removesuffix("/v1"), retries=2) as client:
            result = await client.store_knowledge("a fact")
    assert result.id == "k"
    assert len(keys) == 3
    assert len(set(keys)) == 1
    assert keys[0] is not None


async def test_reads_carry_no_idempotency_key_and_give_up_in_the_end() -> None:
    keys: list[str | None] = []
    with serving(_scripted([None], keys)) as api:
        async with MemoryClient(api.removesuffix("/v1"), retries=1) as client:
            with pytest.raises(ServiceUnavailableError):
                await client.health()
    assert keys == [None, None]
