"""``RetryPolicy`` and ``retrying``: exponential waits with jitter, ``Retry-After`` honoured,
every wait bounded, and a typed error when the model stays unavailable."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from engramdb.core.errors import (
    EmbedderError,
    EmbedderUnavailableError,
    EngramError,
    LLMError,
    LLMUnavailableError,
    ModelUnavailableError,
    RerankError,
    RerankUnavailableError,
)
from engramdb.core.retry import NO_RETRIES, RetryPolicy, parse_retry_after, patience, retrying

NOW = datetime(2026, 5, 4, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("3", 3.0),
        (" 1.5 ", 1.5),
        ("0", 0.0),
        ("-4", 0.0),
        (format_datetime(NOW + timedelta(seconds=42), usegmt=True), 42.0),
        (format_datetime(NOW - timedelta(hours=1), usegmt=True), 0.0),
        ("Mon, 04 May 2026 12:00:07", 7.0),  # no zone: read as UTC
        (None, None),
        ("", None),
        ("soon", None),
        ("nan", None),
        ("inf", None),
    ],
)
def test_retry_after_reads_seconds_and_http_dates(header: str | None, seconds: float) -> None:
    assert parse_retry_after(header, now=NOW) == seconds


def test_waits_grow_exponentially_with_jitter_and_a_ceiling() -> None:
    policy = RetryPolicy(base_delay_s=1.0, max_delay_s=5.0, jitter=0.5)
    rng = random.Random(7)
    for retry, ceiling in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 5.0), (9, 5.0)]:
        waits = [policy.delay(retry, rng) for _ in range(200)]
        assert all(ceiling / 2 <= w <= ceiling for w in waits)
        assert len(set(waits)) > 100  # jittered: clients refused together come back apart
    assert RetryPolicy(jitter=0.0).delay(2) == 1.0


@pytest.mark.parametrize(
    "settings",
    [{"attempts": 0}, {"base_delay_s": -1}, {"max_elapsed_s": -1}, {"jitter": 1.5}],
    ids=str,
)
def test_settings_out_of_range_are_refused(settings: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must"):
        RetryPolicy(**settings)  # type: ignore[arg-type]


class Script:
    """An operation failing with the listed errors in turn, then answering ``"ok"``."""

    def __init__(self, *failures: EngramError) -> None:
        self.failures = list(failures)
        self.calls = 0

    async def __call__(self) -> str:
        self.calls += 1
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


def busy(**details: object) -> EmbedderError:
    return EmbedderError("answered 429", retryable=True, status_code=429, **details)


async def test_a_busy_server_is_retried_honouring_retry_after() -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    operation = Script(busy(retry_after_s=2.5), busy(), busy(retry_after_s=0.0))
    policy = RetryPolicy(attempts=4, base_delay_s=0.01, max_elapsed_s=60.0)
    result = await retrying(
        operation, policy, unavailable=EmbedderUnavailableError, what="embeddings", sleep=sleep
    )
    assert result == "ok"
    assert operation.calls == 4
    assert slept[0] == 2.5  # the server's own wait
    assert 0.005 <= slept[1] <= 0.02  # the policy's second delay, jittered
    assert slept[2] == 0.0


async def test_running_out_of_tries_raises_the_clients_unavailable_error() -> None:
    async def sleep(seconds: float) -> None:
        pass

    operation = Script(*(busy() for _ in range(5)))
    with pytest.raises(EmbedderUnavailableError, match="after 3 tries") as caught:
        await retrying(
            operation,
            RetryPolicy(attempts=3),
            unavailable=EmbedderUnavailableError,
            what="embeddings",
            sleep=sleep,
        )
    error = caught.value
    assert isinstance(error, EmbedderError)
    assert isinstance(error, ModelUnavailableError)
    assert error.details["attempts"] == 3
    assert error.details["status_code"] == 429
    assert isinstance(error.__cause__, EmbedderError)
    assert operation.calls == 3


async def test_a_retry_after_past_the_budget_gives_up_at_once() -> None:
    operation = Script(busy(retry_after_s=120.0))
    with pytest.raises(EmbedderUnavailableError) as caught:
        await retrying(
            operation,
            RetryPolicy(max_elapsed_s=30.0),
            unavailable=EmbedderUnavailableError,
            what="embeddings",
        )
    assert operation.calls == 1
    assert caught.value.details["retry_after_s"] == 120.0


async def test_a_failure_retrying_cannot_fix_is_raised_unchanged() -> None:
    refused = EmbedderError("answered 401", retryable=False, status_code=401)
    operation = Script(refused)
    with pytest.raises(EmbedderError) as caught:
        await retrying(
            operation, RetryPolicy(), unavailable=EmbedderUnavailableError, what="embeddings"
        )
    assert caught.value is refused
    assert operation.calls == 1


async def test_patience_shortens_every_budget_inside_it() -> None:
    operation = Script(busy(retry_after_s=1.0))
    with patience(0.5), pytest.raises(EmbedderUnavailableError):
        await retrying(
            operation, RetryPolicy(), unavailable=EmbedderUnavailableError, what="embeddings"
        )
    assert operation.calls == 1
    with pytest.raises(EmbedderUnavailableError):
        await retrying(
            Script(busy()), NO_RETRIES, unavailable=EmbedderUnavailableError, what="embeddings"
        )


def test_each_unavailable_error_is_also_its_clients_error() -> None:
    assert issubclass(LLMUnavailableError, LLMError)
    assert issubclass(RerankUnavailableError, RerankError)
    assert issubclass(EmbedderUnavailableError, EmbedderError)
    codes = {LLMUnavailableError.code, RerankUnavailableError.code, EmbedderUnavailableError.code}
    assert len(codes) == 3
