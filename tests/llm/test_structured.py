"""``ChatClient.complete_json`` against the local chat server replaying realistic answers:
well-behaved JSON, reasoning tags, code fences, prose, broken JSON, wrong shapes, empty
answers, servers without structured outputs, rate limits, errors and timeouts. Each ends in a
validated object or a typed error — never in an empty result."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from typing import Any

import pytest
from pydantic import BaseModel

from engramdb.core.errors import (
    LLMEmptyAnswerError,
    LLMError,
    LLMOutputError,
    LLMUnavailableError,
)
from engramdb.core.retry import RetryPolicy
from engramdb.llm import ChatClient, LLMConfig
from engramdb.llm.structured import UnreadableAnswer, read_json, strip_reasoning
from tests.helpers.openai_server import REPLAYED, FakeChatServer, Reply, fake, server

__all__ = ["fake", "server"]  # fixtures used here

QUICK = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_elapsed_s=5.0)
ASK = [
    {"role": "system", "content": "Extract facts about the user."},
    {"role": "user", "content": "[t1] user: I moved to Lisbon."},
]


class Fact(BaseModel):
    key: str
    value: str
    turn_ids: list[str]


class Facts(BaseModel):
    facts: list[Fact]


EXPECTED = Facts(facts=[Fact(key="city", value="Lisbon", turn_ids=["t1"])])


def client(fake: FakeChatServer, **settings: Any) -> ChatClient:
    settings.setdefault("retry", QUICK)
    return ChatClient(LLMConfig(base_url=fake.base_url, model="extractor", **settings))


async def test_a_well_behaved_answer_is_asked_for_by_schema_and_validated(
    fake: FakeChatServer,
) -> None:
    fake.queue("chat", Reply.ok(REPLAYED["well_behaved"]))
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
    (request,) = fake.asked("chat")
    response_format = request.body["response_format"]
    assert response_format["type"] == "json_schema"
    assert response_format["json_schema"]["name"] == "Facts"
    assert response_format["json_schema"]["schema"] == Facts.model_json_schema()
    assert request.body["messages"] == ASK
    assert request.body["temperature"] == 0


@pytest.mark.parametrize(
    "kind",
    [
        "thinking",
        "fenced_with_prose",
        "trailing_prose",
        "trailing_comma_cut_short",
        "single_quotes",
    ],
)
async def test_untidy_answers_are_read_in_one_request(fake: FakeChatServer, kind: str) -> None:
    fake.queue("chat", Reply.ok(REPLAYED[kind]))
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
    assert len(fake.asked("chat")) == 1


async def test_an_answer_that_does_not_fit_is_shown_to_the_model_and_asked_again(
    fake: FakeChatServer,
) -> None:
    fake.queue("chat", Reply.ok(REPLAYED["wrong_shape"]), Reply.ok(REPLAYED["well_behaved"]))
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
    first, second = fake.asked("chat")
    assert first.body["messages"] == ASK
    shown, asked = second.body["messages"][len(ASK) :]
    assert shown == {"role": "assistant", "content": REPLAYED["wrong_shape"]}
    assert asked["role"] == "user"
    assert "facts: Field required" in asked["content"]


@pytest.mark.parametrize("kind", ["wrong_shape", "not_json"])
async def test_no_usable_answer_in_every_try_is_a_typed_error(
    fake: FakeChatServer, kind: str
) -> None:
    fake.queue("chat", *[Reply.ok(REPLAYED[kind])] * 3)
    async with client(fake, json_attempts=3) as chat:
        with pytest.raises(LLMOutputError) as caught:
            await chat.complete_json(ASK, schema=Facts)
    error = caught.value
    assert not isinstance(error, LLMEmptyAnswerError)
    assert error.details["attempts"] == 3
    assert error.details["excerpt"] == REPLAYED[kind]
    assert error.details["reason"]
    assert len(fake.asked("chat")) == 3


@pytest.mark.parametrize("kind", ["empty", "only_thinking"])
async def test_empty_answers_are_a_typed_error(fake: FakeChatServer, kind: str) -> None:
    fake.queue("chat", *[Reply.ok(REPLAYED[kind])] * 2)
    async with client(fake) as chat:
        with pytest.raises(LLMEmptyAnswerError, match="empty") as caught:
            await chat.complete_json(ASK, schema=Facts, attempts=2)
    assert caught.value.code == "llm_empty_answer"
    assert isinstance(caught.value, LLMOutputError)


async def test_a_null_content_is_an_empty_answer(fake: FakeChatServer) -> None:
    fake.queue("chat", Reply(body={"choices": [{"message": {"content": None}}]}))
    async with client(fake) as chat:
        with pytest.raises(LLMEmptyAnswerError):
            await chat.complete_json(ASK, schema=Facts, attempts=1)


async def test_an_empty_plain_completion_is_a_typed_error(fake: FakeChatServer) -> None:
    fake.queue("chat", Reply.empty())
    async with client(fake) as chat:
        with pytest.raises(LLMEmptyAnswerError):
            await chat.complete("s", "u")


async def test_a_server_without_structured_outputs_is_asked_in_json_mode(
    fake: FakeChatServer,
) -> None:
    fake.queue(
        "chat",
        Reply.error(400, "response_format json_schema is not supported"),
        Reply.ok(REPLAYED["well_behaved"]),
        Reply.ok(REPLAYED["well_behaved"]),
    )
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
        assert chat.json_mode == "json_object"
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED  # remembered
    refused, accepted, later = fake.asked("chat")
    assert refused.body["response_format"]["type"] == "json_schema"
    for request in (accepted, later):
        assert request.body["response_format"] == {"type": "json_object"}
        instructions = request.body["messages"][-1]
        assert instructions["role"] == "system"
        assert '"facts"' in instructions["content"]  # the schema, spelled out


async def test_a_server_refusing_every_response_format_is_asked_by_prompt(
    fake: FakeChatServer,
) -> None:
    fake.queue(
        "chat",
        Reply.error(400, "unknown field response_format"),
        Reply.error(422, "unknown field response_format"),
        Reply.ok(REPLAYED["fenced_with_prose"]),
    )
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
        assert chat.json_mode == "prompt"
    assert "response_format" not in fake.asked("chat")[-1].body


async def test_a_refusal_not_about_the_format_is_raised(fake: FakeChatServer) -> None:
    fake.queue("chat", Reply.error(401, "Incorrect API key provided"))
    async with client(fake) as chat:
        with pytest.raises(LLMError, match="Incorrect API key") as caught:
            await chat.complete_json(ASK, schema=Facts)
        assert chat.json_mode == "json_schema"
    assert caught.value.details["status_code"] == 401


@pytest.mark.parametrize("how", ["seconds", "http-date"])
async def test_a_rate_limit_is_waited_out_as_the_server_asks(
    fake: FakeChatServer, how: str
) -> None:
    later = datetime.now(UTC) + timedelta(seconds=2)
    retry_after = "1" if how == "seconds" else format_datetime(later, usegmt=True)
    fake.queue("chat", Reply.rate_limited(retry_after), Reply.ok(REPLAYED["well_behaved"]))
    started = time.monotonic()
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
    # Not before the server's time (an HTTP date has whole seconds: at least 1 s from now).
    assert time.monotonic() - started >= 0.95
    assert len(fake.asked("chat")) == 2


@pytest.mark.parametrize("failure", [Reply.error(500), Reply.error(503, "overloaded")])
async def test_a_server_error_is_retried(fake: FakeChatServer, failure: Reply) -> None:
    fake.queue("chat", failure, Reply.ok(REPLAYED["well_behaved"]))
    async with client(fake) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
    assert len(fake.asked("chat")) == 2


async def test_a_timed_out_answer_is_asked_again(fake: FakeChatServer) -> None:
    fake.queue("chat", Reply.slow(1.0), Reply.ok(REPLAYED["well_behaved"]))
    async with client(fake, timeout_s=0.3) as chat:
        assert await chat.complete_json(ASK, schema=Facts) == EXPECTED
    assert len(fake.asked("chat")) == 2


async def test_a_server_that_stays_busy_is_a_typed_error(fake: FakeChatServer) -> None:
    fake.queue("chat", *[Reply.rate_limited("0")] * 3)
    async with client(fake) as chat:
        with pytest.raises(LLMUnavailableError, match="after 3 tries") as caught:
            await chat.complete_json(ASK, schema=Facts)
    assert caught.value.details["status_code"] == 429
    assert caught.value.details["retry_after_s"] == 0.0


# -- reading answers, without a server ----------------------------------------------------


def test_reasoning_blocks_are_removed_and_an_unclosed_one_leaves_nothing() -> None:
    assert strip_reasoning("<think>a {b}</think>{}<THINKING>c</THINKING> ok") == "{} ok"
    assert strip_reasoning('{"a": 1}<think>still going') == '{"a": 1}'
    assert strip_reasoning("<think>never done") == ""


def test_an_answer_with_nothing_to_read_says_why() -> None:
    with pytest.raises(UnreadableAnswer) as caught:
        read_json("   ", Facts)
    assert caught.value.empty
    with pytest.raises(UnreadableAnswer, match="no JSON") as caught:
        read_json("nothing here", Facts)
    assert not caught.value.empty
    with pytest.raises(UnreadableAnswer, match="does not fit"):
        read_json('{"facts": [{"key": "city"}]}', Facts)
