"""``ChatClient`` and ``abstractive_summary`` against a real local HTTP server that speaks the
chat-completions protocol (``tests.helpers.openai_server.py``)."""

from __future__ import annotations

import json
import socket
import time
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from engramdb.core.errors import (
    EngramRuntimeError,
    LLMError,
    LLMUnavailableError,
    ModelUnavailableError,
    ValidationError,
)
from engramdb.core.intent import MemoryItem
from engramdb.core.retry import NO_RETRIES, RetryPolicy
from engramdb.llm import ChatClient, ChatModel, LLMConfig
from engramdb.orchestrator.summarize import abstractive_summary, summarize_items
from engramdb.orchestrator.tokens import count_tokens
from tests.helpers.openai_server import LONG_ANSWER, FakeChatServer, fake, server

__all__ = ["fake", "server"]  # fixtures used here

API_KEY = "sk-test-not-a-real-key"
#: Three quick tries: retry behaviour without making the suite wait.
QUICK = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_elapsed_s=5.0)


def client(fake: FakeChatServer, model: str = "echo", **kwargs: Any) -> ChatClient:
    kwargs.setdefault("api_key", API_KEY)
    kwargs.setdefault("base_url", fake.base_url)
    return ChatClient(LLMConfig(model=model, **kwargs))


ITEMS = [
    MemoryItem(
        id="dog",
        text="I adopted a dog named Rex. He is a golden retriever.",
        speaker="user",
        occurred_at=datetime(2023, 5, 30, tzinfo=UTC),
        importance=0.9,
    ),
    MemoryItem(
        id="sister",
        text="My sister Ana lives in Lisbon.",
        speaker="user",
        occurred_at=datetime(2023, 4, 1, tzinfo=UTC),
    ),
]


# -- ChatClient ------------------------------------------------------------------------------


async def test_a_completion_is_requested_and_its_text_returned(fake: FakeChatServer) -> None:
    async with client(fake) as chat:
        assert isinstance(chat, ChatModel)
        assert chat.config.model == "echo"
        answer = await chat.complete("Be brief.", "Hello there")
    assert answer == "summary of 11 characters"
    (request,) = fake.requests
    assert request.path == "/v1/chat/completions"
    assert request.body == {
        "model": "echo",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello there"},
        ],
    }
    assert request.headers["content-type"] == "application/json"


async def test_the_api_key_is_sent_as_a_bearer_token(fake: FakeChatServer) -> None:
    async with client(fake) as chat:
        await chat.complete("s", "u")
    async with client(fake, api_key=None) as anonymous:
        await anonymous.complete("s", "u")
    with_key, without_key = fake.requests
    assert with_key.headers["authorization"] == f"Bearer {API_KEY}"
    assert "authorization" not in without_key.headers


async def test_a_trailing_slash_in_the_base_url_is_ignored(fake: FakeChatServer) -> None:
    async with client(fake, base_url=fake.base_url + "/") as chat:
        await chat.complete("s", "u")
    assert fake.requests[0].path == "/v1/chat/completions"


@pytest.mark.parametrize(
    ("model", "status", "retryable", "reason"),
    [
        ("fail-401", 401, False, "Incorrect API key provided"),
        ("fail-404", 404, False, "model not found"),
        ("fail-422", 422, False, "messages: field required"),
        ("fail-429", 429, True, "rate limit reached"),
        ("fail-500", 500, True, "internal error"),
        ("fail-503", 503, True, "Service Unavailable"),
    ],
)
async def test_error_statuses_become_llm_errors(
    fake: FakeChatServer, model: str, status: int, retryable: bool, reason: str
) -> None:
    async with client(fake, model, retry=QUICK) as chat:
        with pytest.raises(LLMError) as caught:
            await chat.complete("s", "u")
    error = caught.value
    assert isinstance(error, EngramRuntimeError)
    # A busy server is tried as often as the policy allows, then named unavailable.
    assert error.code == ("llm_unavailable" if retryable else "llm_error")
    assert isinstance(error, ModelUnavailableError) is retryable
    assert len(fake.requests) == (QUICK.attempts if retryable else 1)
    assert error.details["status_code"] == status
    assert error.details["retryable"] is retryable
    assert reason in error.message
    assert API_KEY not in error.message
    assert API_KEY not in json.dumps(error.to_dict())


@pytest.mark.parametrize(
    ("model", "problem"),
    [
        ("bad-json", "not JSON"),
        ("no-choices", "no 'choices'"),
        ("null-content", "no message content"),
    ],
)
async def test_malformed_answers_become_llm_errors(
    fake: FakeChatServer, model: str, problem: str
) -> None:
    async with client(fake, model) as chat:
        with pytest.raises(LLMError, match=problem) as caught:
            await chat.complete("s", "u")
    assert caught.value.details["retryable"] is False


async def test_a_slow_server_times_out(fake: FakeChatServer) -> None:
    async with client(fake, "slow", timeout_s=0.2, retry=NO_RETRIES) as chat:
        started = time.perf_counter()
        with pytest.raises(LLMError, match="timed out") as caught:
            await chat.complete("s", "u")
    assert time.perf_counter() - started < 0.9
    assert caught.value.details["retryable"] is True


async def test_an_unreachable_server_is_an_llm_error() -> None:
    # A port that was just free and has nothing listening: the connection is refused.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = LLMConfig(base_url=f"http://127.0.0.1:{port}/v1", model="m", timeout_s=2, retry=QUICK)
    async with ChatClient(config) as chat:
        with pytest.raises(LLMUnavailableError, match="failed") as caught:
            await chat.complete("s", "u")
    assert caught.value.details["retryable"] is True


async def test_a_given_http_client_is_used_and_left_open(fake: FakeChatServer) -> None:
    async with httpx.AsyncClient() as http:
        chat = ChatClient(LLMConfig(base_url=fake.base_url, model="echo"), client=http)
        await chat.complete("s", "u")
        await chat.aclose()
        assert not http.is_closed
    assert len(fake.requests) == 1


def test_config_is_checked_and_hides_the_key() -> None:
    config = LLMConfig(base_url="http://127.0.0.1:1/v1/", model="m", api_key=API_KEY)
    assert API_KEY not in repr(config)
    assert config.url == "http://127.0.0.1:1/v1/chat/completions"
    assert config.timeout_s == 30
    with pytest.raises(ValueError, match="base_url"):
        LLMConfig(base_url=" ", model="m")
    with pytest.raises(ValueError, match="model"):
        LLMConfig(base_url="http://x", model="")
    with pytest.raises(ValueError, match="timeout_s"):
        LLMConfig(base_url="http://x", model="m", timeout_s=0)


# -- abstractive_summary ---------------------------------------------------------------------


async def test_the_model_is_shown_the_extractive_lines(fake: FakeChatServer) -> None:
    async with client(fake) as chat:
        result = await abstractive_summary(chat, ITEMS, 50)
    (request,) = fake.requests
    _system, user = (m["content"] for m in request.body["messages"])
    assert "at most 50 tokens" in user
    assert "- [2023-05-30] user: I adopted a dog named Rex. He is a golden retriever." in user
    assert "- [2023-04-01] user: My sister Ana lives in Lisbon." in user
    assert result.text == f"summary of {len(user)} characters"
    assert result.tokens == count_tokens(result.text)
    assert result.source_ids == ["sister", "dog"]


@pytest.mark.parametrize("limit", [1, 5, 37, 120])
async def test_a_rambling_answer_is_cut_to_the_limit(fake: FakeChatServer, limit: int) -> None:
    assert count_tokens(LONG_ANSWER) > 2000
    async with client(fake, "long") as chat:
        result = await abstractive_summary(chat, ITEMS, limit)
    assert result.tokens == count_tokens(result.text) <= limit
    assert result.tokens >= limit - 1  # cut near the limit, not far below it
    assert LONG_ANSWER.startswith(result.text)
    assert result.source_ids == ["sister", "dog"]


@pytest.mark.parametrize("model", ["fail-500", "fail-401", "slow", "bad-json", "empty"])
async def test_a_failing_model_falls_back_to_the_extractive_summary(
    fake: FakeChatServer, model: str
) -> None:
    async with client(fake, model, timeout_s=0.2, retry=QUICK) as chat:
        result = await abstractive_summary(chat, ITEMS, 30, scope="recent")
    assert result == summarize_items(ITEMS, token_limit=30, scope="recent")
    assert result.tokens <= 30


async def test_an_answer_with_no_prefix_within_the_limit_falls_back(fake: FakeChatServer) -> None:
    # One emoji counts 4 tokens: under a limit of 3 nothing of the answer can be kept.
    async with client(fake, "emoji") as chat:
        result = await abstractive_summary(chat, ITEMS, 3)
    assert result == summarize_items(ITEMS, token_limit=3)
    assert result.text


async def test_nothing_to_summarize_asks_no_model(fake: FakeChatServer) -> None:
    async with client(fake) as chat:
        result = await abstractive_summary(chat, [], 30)
        assert (result.text, result.tokens, result.source_ids) == ("", 0, [])
        with pytest.raises(ValidationError):
            await abstractive_summary(chat, ITEMS, 0)
        with pytest.raises(ValidationError):
            await abstractive_summary(chat, ITEMS, 30, scope="nonsense")
    assert fake.requests == []
