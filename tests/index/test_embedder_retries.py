"""``OpenAIEmbedder`` and ``HttpReranker`` through a server that is busy, failing or slow for a
while (``tests/helpers/openai_server.py`` scripts each answer): they wait as the policy and
the server say, and once the policy gives up they raise their ``ModelUnavailableError``."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

from engramdb.core.errors import EmbedderError, EmbedderUnavailableError, ModelUnavailableError
from engramdb.core.retry import RetryPolicy
from engramdb.index import OpenAIEmbedder
from tests.helpers.openai_server import FakeChatServer, Reply, fake, fake_vector, server

__all__ = ["fake", "server"]  # fixtures used here

QUICK = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_elapsed_s=5.0)


def embedder(fake: FakeChatServer, **settings: Any) -> OpenAIEmbedder:
    settings.setdefault("retry", QUICK)
    return OpenAIEmbedder(
        "fake-embed", dimensions=fake.dimensions, base_url=fake.base_url, **settings
    )


def expected(text: str, dimensions: int) -> np.ndarray[Any, Any]:
    vector = np.array(fake_vector(text, dimensions), dtype=np.float32)
    return vector / np.linalg.norm(vector)


@pytest.mark.parametrize(
    "failure",
    [
        Reply.rate_limited("0.2"),
        Reply.rate_limited(None),
        Reply.error(500),
        Reply.error(502, "bad gateway"),
        Reply.error(503, "overloaded"),
        Reply.slow(1.0),
    ],
    ids=["429-retry-after", "429", "500", "502", "503", "timeout"],
)
async def test_a_passing_failure_is_retried_and_the_vectors_come_back(
    fake: FakeChatServer, failure: Reply
) -> None:
    fake.queue("embeddings", failure)
    async with embedder(fake, timeout=0.3) as client:
        vectors = await client.embed(["hello", "world"])
    np.testing.assert_allclose(vectors[0], expected("hello", fake.dimensions), atol=1e-6)
    np.testing.assert_allclose(vectors[1], expected("world", fake.dimensions), atol=1e-6)
    assert len(fake.asked("embeddings")) == 2


async def test_retry_after_is_honoured(fake: FakeChatServer) -> None:
    fake.queue("embeddings", Reply.rate_limited("0.5"), Reply.rate_limited("0.5"))
    started = time.monotonic()
    async with embedder(fake) as client:
        await client.embed_one("hello")
    assert time.monotonic() - started >= 1.0
    assert len(fake.asked("embeddings")) == 3


async def test_an_outage_longer_than_the_policy_is_a_typed_error(fake: FakeChatServer) -> None:
    fake.outage("embeddings", 30.0, retry_after="0")
    async with embedder(fake) as client:
        with pytest.raises(EmbedderUnavailableError) as caught:
            await client.embed(["hello"])
    error = caught.value
    assert isinstance(error, ModelUnavailableError)
    assert isinstance(error, EmbedderError)
    assert error.details["attempts"] == QUICK.attempts
    assert error.details["status_code"] == 429
    assert len(fake.asked("embeddings")) == QUICK.attempts


async def test_a_refusal_is_not_retried(fake: FakeChatServer) -> None:
    fake.queue("embeddings", Reply.error(401, "Incorrect API key provided"))
    async with embedder(fake) as client:
        with pytest.raises(EmbedderError, match="Incorrect API key") as caught:
            await client.embed(["hello"])
    assert not isinstance(caught.value, ModelUnavailableError)
    assert len(fake.asked("embeddings")) == 1
