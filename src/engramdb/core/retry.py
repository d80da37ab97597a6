"""``RetryPolicy``: how every client of a remote model (chat, embeddings, rerank) waits for a
busy or flaky server, and ``retrying``, the one loop that applies it.

A request is tried again only when its failure says it may succeed later (``retryable`` in the
error's details: timeouts, refused connections, 408/409/429 and every 5xx). Between tries the
client waits an exponentially growing delay with jitter, so that many clients refused at the
same moment do not all come back at the same moment; when the server names its own wait
(``Retry-After``, as seconds or as an HTTP date) that wait is honoured instead. All of it is
bounded: when the tries run out, or the next wait would end past ``max_elapsed_s`` after the
first try began, the last failure is raised as the client's ``ModelUnavailableError``.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import TypeVar

from engramdb.core.errors import EngramRuntimeError, ModelUnavailableError

__all__ = [
    "NO_RETRIES",
    "RetryPolicy",
    "parse_retry_after",
    "patience",
    "retrying",
]

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long a client tries a request that may succeed later.

    Args:
        attempts: tries in all, the first included (1 never retries).
        base_delay_s: the wait before the second try; each later wait doubles it.
        max_delay_s: the longest one computed wait may be (a server's ``Retry-After`` may ask
            for more, within ``max_elapsed_s``).
        max_elapsed_s: no try starts later than this many seconds after the first one began.
        jitter: the share of each computed wait that is random (0 waits exactly the
            exponential delay, 1 anywhere between 0 and it). Half keeps waits apart without
            letting any of them shrink to nothing.

    Raises:
        ValueError: a setting is out of range.
    """

    attempts: int = 5
    base_delay_s: float = 0.5
    max_delay_s: float = 8.0
    max_elapsed_s: float = 30.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("attempts must be at least 1")
        if self.base_delay_s < 0 or self.max_delay_s < 0 or self.max_elapsed_s < 0:
            raise ValueError("delays must not be negative")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError("jitter must be between 0 and 1")

    def delay(self, retry: int, rng: random.Random | None = None) -> float:
        """The computed wait before retry number ``retry`` (1 for the second try)."""
        ceiling = min(self.max_delay_s, self.base_delay_s * 2.0 ** (retry - 1))
        draw = rng.random() if rng is not None else random.random()
        return ceiling * (1.0 - self.jitter * draw)

    def with_budget(self, max_elapsed_s: float) -> RetryPolicy:
        """This policy with a shorter (never a longer) bound on the time spent."""
        return replace(self, max_elapsed_s=min(self.max_elapsed_s, max_elapsed_s))


#: A policy that tries once: for callers with a cheap fallback of their own.
NO_RETRIES = RetryPolicy(attempts=1, max_elapsed_s=0.0)

# A caller on a latency-sensitive path (a search embedding its query) shortens the budget of
# every request it makes, whatever client and wrappers stand between it and the server.
_budget: ContextVar[float | None] = ContextVar("engram_retry_budget", default=None)


@contextmanager
def patience(max_elapsed_s: float) -> Iterator[None]:
    """Within the block, every retried request gives up after at most ``max_elapsed_s``
    (tasks started inside it keep the bound)."""
    token = _budget.set(max_elapsed_s)
    try:
        yield
    finally:
        _budget.reset(token)


def parse_retry_after(value: str | None, now: datetime | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), or
    ``None`` when it is absent or unreadable. A date in the past means no wait."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        seconds = (when - (now or datetime.now(UTC))).total_seconds()
    if seconds != seconds or seconds == float("inf"):  # NaN or infinity: unreadable
        return None
    return max(0.0, seconds)


async def retrying(
    operation: Callable[[], Awaitable[T]],
    policy: RetryPolicy,
    *,
    unavailable: type[ModelUnavailableError],
    what: str,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
) -> T:
    """``operation()``'s result, trying it again under ``policy`` while it fails with a
    retryable ``EngramRuntimeError`` (``details["retryable"]``; ``details["retry_after_s"]``
    names the server's wait).

    Raises:
        ModelUnavailableError: as ``unavailable``, after the last retryable failure (it is
            the ``__cause__``; ``details``: ``attempts``, ``waited_s`` and the failure's own).
        EngramRuntimeError: a failure that is not retryable, unchanged.
    """
    budget = _budget.get()
    if budget is not None:
        policy = policy.with_budget(budget)
    started = time.monotonic()
    waited = 0.0
    attempt = 0
    while True:
        attempt += 1
        try:
            return await operation()
        except EngramRuntimeError as exc:
            if not exc.details.get("retryable"):
                raise
            wait = _next_wait(policy, attempt, exc)
            elapsed = time.monotonic() - started
            if wait is None or elapsed + wait > policy.max_elapsed_s:
                raise unavailable(
                    f"{what} model unavailable after {attempt} "
                    f"{'try' if attempt == 1 else 'tries'} in {elapsed:.1f}s: {exc.message}",
                    **{**exc.details, "attempts": attempt, "waited_s": round(waited, 3)},
                ) from exc
        await sleep(wait)
        waited += wait


def _next_wait(policy: RetryPolicy, attempt: int, error: EngramRuntimeError) -> float | None:
    """The wait before the next try, or ``None`` when no try is left."""
    if attempt >= policy.attempts:
        return None
    asked = error.details.get("retry_after_s")
    if isinstance(asked, int | float):
        return float(asked)
    return policy.delay(attempt)
