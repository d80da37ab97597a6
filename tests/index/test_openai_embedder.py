"""``OpenAIEmbedder`` against a real local HTTP server that speaks the embeddings protocol
(``tests/helpers/openai_server.py``). Its behaviour is chosen by the requested model name, so
each test states what the "remote" side does.
"""

from __future__ import annotations

import socket
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import numpy as np
import pytest

from engramdb.core.errors import (
    EmbedderError,
    EmbedderUnavailableError,
    InvalidValueError,
    ModelUnavailableError,
)
from engramdb.core.retry import NO_RETRIES, RetryPolicy
from engramdb.index import Embedder, OpenAIEmbedder
from engramdb.index.embedder import FloatArray
from tests.helpers.openai_server import JsonHandler, Seen, serving

DIMS = 8
API_KEY = "sk-test-not-a-real-key"
#: Three quick tries: retry behaviour without making the suite wait.
QUICK = RetryPolicy(attempts=3, base_delay_s=0.01, max_delay_s=0.02, max_elapsed_s=5.0)


def raw_vector(text: str) -> FloatArray:
    """What the fake model returns for ``text``: deterministic and deliberately not unit."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return (rng.normal(size=DIMS) * 3.0).astype(np.float32)


def unit(vector: FloatArray) -> FloatArray:
    scaled: FloatArray = vector / np.linalg.norm(vector)
    return scaled


@dataclass
class FakeEmbeddingsServer:
    base_url: str
    requests: list[Seen] = field(default_factory=list)


def make_handler(log: list[Seen]) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.received()
            model, texts = body["model"], body["input"]
            if model == "fail-401":
                self.send(401, {"error": {"message": "Incorrect API key provided", "code": 401}})
            elif model == "fail-429":
                self.send(429, {"error": "rate limit reached"})
            elif model == "fail-503":
                self.send(503, b"upstream overloaded", "text/plain")
            elif model == "fail-400":
                self.send(400, {"error": {"message": "input must not be empty"}})
            elif model == "slow":
                time.sleep(1.0)
                self.send(200, {"data": []})
            elif model == "bad-json":
                self.send(200, b"<html>proxy error</html>", "text/html")
            elif model == "bad-shape":
                self.send(200, {"data": [{"index": 0, "embedding": [1.0, 2.0]}]})
            elif model == "missing-row":
                self.send(200, {"data": [{"index": 0, "embedding": raw_vector("x").tolist()}]})
            elif model == "repeated-index":
                rows = [{"index": 0, "embedding": raw_vector(t).tolist()} for t in texts]
                self.send(200, {"data": rows})
            else:
                rows = [
                    {"object": "embedding", "index": i, "embedding": raw_vector(t).tolist()}
                    for i, t in enumerate(texts)
                ]
                # Answer out of order: the client must sort by ``index``.
                rows.reverse()
                self.send(200, {"object": "list", "data": rows, "model": model})

    Handler.log = log
    return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[FakeEmbeddingsServer]:
    log: list[Seen] = []
    with serving(make_handler(log)) as base_url:
        yield FakeEmbeddingsServer(base_url, log)


@pytest.fixture
def fake(server: FakeEmbeddingsServer) -> FakeEmbeddingsServer:
    server.requests.clear()
    return server


def embedder(
    fake: FakeEmbeddingsServer, model: str = "fake-embed", **kwargs: Any
) -> OpenAIEmbedder:
    kwargs.setdefault("api_key", API_KEY)
    kwargs.setdefault("base_url", fake.base_url)
    return OpenAIEmbedder(model, dimensions=DIMS, **kwargs)


async def test_rows_come_back_in_input_order_and_unit_length(fake: FakeEmbeddingsServer) -> None:
    texts = ["first", "second", "third"]
    async with embedder(fake) as client:
        assert isinstance(client, Embedder)
        vectors = await client.embed(texts)
    assert vectors.shape == (3, DIMS)
    assert vectors.dtype == np.float32
    for row, text in zip(vectors, texts, strict=True):
        np.testing.assert_allclose(row, unit(raw_vector(text)), atol=1e-6)
    (request,) = fake.requests
    assert request.path == "/v1/embeddings"
    assert request.body == {"model": "fake-embed", "input": texts}


async def test_the_api_key_is_sent_as_a_bearer_token(fake: FakeEmbeddingsServer) -> None:
    async with embedder(fake) as client:
        await client.embed_one("hello")
    async with embedder(fake, api_key=None) as anonymous:
        await anonymous.embed_one("hello")
    with_key, without_key = fake.requests
    assert with_key.headers["authorization"] == f"Bearer {API_KEY}"
    assert "authorization" not in without_key.headers
    assert with_key.headers["content-type"] == "application/json"


async def test_large_inputs_are_sent_in_batches(fake: FakeEmbeddingsServer) -> None:
    texts = [f"text {i}" for i in range(5)]
    async with embedder(fake, batch_size=2) as client:
        vectors = await client.embed(texts)
    assert [r.body["input"] for r in fake.requests] == [texts[0:2], texts[2:4], texts[4:5]]
    expected = np.stack([unit(raw_vector(t)) for t in texts])
    np.testing.assert_allclose(vectors, expected, atol=1e-6)


async def test_no_texts_send_no_request(fake: FakeEmbeddingsServer) -> None:
    async with embedder(fake) as client:
        assert (await client.embed([])).shape == (0, DIMS)
    assert fake.requests == []


async def test_dimensions_can_be_requested(fake: FakeEmbeddingsServer) -> None:
    async with embedder(fake, send_dimensions=True, base_url=fake.base_url + "/") as client:
        await client.embed_one("hello")
        assert client.model_id == f"fake-embed@{DIMS}"
    (request,) = fake.requests
    assert request.path == "/v1/embeddings"
    assert request.body["dimensions"] == DIMS


@pytest.mark.parametrize(
    ("model", "status", "retryable", "reason"),
    [
        ("fail-400", 400, False, "input must not be empty"),
        ("fail-401", 401, False, "Incorrect API key provided"),
        ("fail-429", 429, True, "rate limit reached"),
        ("fail-503", 503, True, "upstream overloaded"),
    ],
)
async def test_error_statuses_become_embedder_errors(
    fake: FakeEmbeddingsServer, model: str, status: int, retryable: bool, reason: str
) -> None:
    async with embedder(fake, model=model, retry=QUICK) as client:
        with pytest.raises(EmbedderError) as caught:
            await client.embed(["hello"])
    error = caught.value
    assert error.details["status_code"] == status
    assert error.details["retryable"] is retryable
    assert reason in error.message
    assert API_KEY not in error.message
    # A busy server is tried as often as the policy allows, then named unavailable; a
    # refusal that retrying cannot fix is raised at once.
    assert isinstance(error, EmbedderUnavailableError) is retryable
    assert isinstance(error, ModelUnavailableError) is retryable
    assert len(fake.requests) == (QUICK.attempts if retryable else 1)


@pytest.mark.parametrize("model", ["bad-json", "bad-shape", "missing-row", "repeated-index"])
async def test_malformed_answers_become_embedder_errors(
    fake: FakeEmbeddingsServer, model: str
) -> None:
    async with embedder(fake, model=model) as client:
        with pytest.raises(EmbedderError, match="malformed") as caught:
            await client.embed(["one", "two"] if model != "bad-shape" else ["one"])
    assert caught.value.details["status_code"] == 200


async def test_a_timeout_becomes_a_retryable_embedder_error(fake: FakeEmbeddingsServer) -> None:
    async with embedder(fake, model="slow", timeout=0.2, retry=NO_RETRIES) as client:
        with pytest.raises(EmbedderError, match="timed out") as caught:
            await client.embed(["hello"])
    assert caught.value.details["retryable"] is True
    assert "status_code" not in caught.value.details


async def test_an_unreachable_server_becomes_an_embedder_error() -> None:
    with socket.socket() as probe:  # a port that was free a moment ago and is now closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    client = OpenAIEmbedder(
        "m", dimensions=DIMS, base_url=f"http://127.0.0.1:{port}/v1", retry=QUICK
    )
    async with client:
        with pytest.raises(EmbedderUnavailableError, match="failed") as caught:
            await client.embed(["hello"])
    assert caught.value.details["attempts"] == QUICK.attempts


async def test_a_callers_client_is_used_and_left_open(fake: FakeEmbeddingsServer) -> None:
    async with httpx.AsyncClient(headers={"X-Trace": "t-1"}) as http:
        async with embedder(fake, client=http) as client:
            await client.embed_one("hello")
        assert not http.is_closed
    assert fake.requests[0].headers["x-trace"] == "t-1"


async def test_non_string_input_is_a_validation_error(fake: FakeEmbeddingsServer) -> None:
    async with embedder(fake) as client:
        with pytest.raises(InvalidValueError):
            await client.embed([None])  # type: ignore[list-item]
    assert fake.requests == []


@pytest.mark.parametrize("settings", [{"dimensions": 0}, {"batch_size": 0}, {"model": ""}], ids=str)
def test_settings_out_of_range_are_refused(settings: dict[str, Any]) -> None:
    arguments: dict[str, Any] = {"model": "m", "dimensions": DIMS, **settings}
    with pytest.raises(ValueError, match=next(iter(settings))):
        OpenAIEmbedder(**arguments)
