"""Real local HTTP servers speaking OpenAI-compatible protocols: ``serving`` runs any
``JsonHandler``, and the ``server``/``fake`` fixtures run a server of ``/v1/chat/completions``
and ``/v1/embeddings``, for tests of everything that asks a chat or embedding model.

The server runs in a thread on 127.0.0.1 with an ephemeral port. What it answers, in order:

1. during an ``outage`` of an endpoint: 429 with ``Retry-After``, like a rate-limited API;
2. the next ``Reply`` a test queued for that endpoint (``fake.queue("chat", Reply.ok(...),
   Reply.rate_limited(retry_after="1"), Reply.error(500), Reply.slow(2.0), Reply.empty())``);
3. otherwise, by the requested model name: a canned answer registered in
   ``FakeChatServer.answers``, one of the failure modes below, or an echo; embeddings are
   deterministic vectors of ``fake.dimensions`` numbers per text.

``REPLAYED`` holds answers as local models really give them (thinking tags, code fences,
prose around the JSON, JSON cut short), for the structured-output tests.

Use it by importing the fixtures into a test module::

    from tests.helpers.openai_server import FakeChatServer, Reply, fake, server
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

import numpy as np
import pytest

LONG_ANSWER = " ".join(["The user adopted a dog named Rex and walks him every morning."] * 200)

_FACTS = '{"facts": [{"key": "city", "value": "Lisbon", "turn_ids": ["t1"]}]}'
#: Structured answers as chat models really give them, by what is wrong with them.
REPLAYED: dict[str, str] = {
    "well_behaved": _FACTS,
    "thinking": (
        "<think>\nThe user said {moved to Lisbon}. The schema wants facts with turn ids, so "
        'the city is Lisbon, from t1. Output: {"facts": []}? No, one fact.\n</think>\n\n' + _FACTS
    ),
    "fenced_with_prose": (
        "Sure! Here is the JSON you asked for:\n\n```json\n"
        + _FACTS
        + "\n```\n\nLet me know if you need anything else."
    ),
    "trailing_prose": _FACTS + "\n\nI found one fact: the user lives in Lisbon.",
    "trailing_comma_cut_short": (
        '{"facts": [{"key": "city", "value": "Lisbon", "turn_ids": ["t1"],}'
    ),
    "single_quotes": "{'facts': [{'key': 'city', 'value': 'Lisbon', 'turn_ids': ['t1']}]}",
    "wrong_shape": '{"city": "Lisbon"}',
    "not_json": "The user lives in Lisbon.",
    "only_thinking": "<think>\nThe user moved, so I should record the city and then",
    "empty": "",
}


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


Endpoint = Literal["chat", "embeddings"]


@dataclass(frozen=True)
class Reply:
    """One scripted answer: a status, a chat message's ``content`` or a raw ``body``, extra
    headers, and how long the server thinks before sending it."""

    status: int = 200
    content: str | None = None
    body: object | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0

    @classmethod
    def ok(cls, content: str) -> Reply:
        """A well-formed chat completion answering ``content``."""
        return cls(content=content)

    @classmethod
    def rate_limited(cls, retry_after: str | None = "1") -> Reply:
        """429 with ``Retry-After`` (seconds or an HTTP date; ``None`` sends none)."""
        headers = {"Retry-After": retry_after} if retry_after is not None else {}
        return cls(429, body={"error": {"message": "rate limit reached"}}, headers=headers)

    @classmethod
    def error(cls, status: int = 500, message: str = "internal error") -> Reply:
        """An error status with OpenAI's error shape."""
        return cls(status, body={"error": {"message": message}})

    @classmethod
    def slow(cls, delay_s: float, content: str = "too late") -> Reply:
        """An answer that comes after ``delay_s`` seconds (past a client's timeout)."""
        return cls(content=content, delay_s=delay_s)

    @classmethod
    def empty(cls) -> Reply:
        """A completion whose message has no text."""
        return cls(content="")


@dataclass
class FakeChatServer:
    """A running server: where it listens, what it was asked, canned answers by model name
    (``answers["my-model"] = "..."`` makes that model answer with that text), scripted replies
    per endpoint, and outages."""

    base_url: str
    requests: list[Seen] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)
    scripts: dict[str, deque[Reply]] = field(default_factory=dict)
    outages: dict[str, tuple[float, str]] = field(default_factory=dict)
    dimensions: int = 8

    def queue(self, endpoint: Endpoint, *replies: Reply) -> None:
        """Answer the next requests to ``endpoint`` with ``replies``, in order."""
        self.scripts.setdefault(endpoint, deque()).extend(replies)

    def outage(self, endpoint: Endpoint, seconds: float, retry_after: str = "1") -> None:
        """Answer every request to ``endpoint`` for the next ``seconds`` with 429."""
        self.outages[endpoint] = (time.monotonic() + seconds, retry_after)

    def asked(self, endpoint: Endpoint) -> list[Seen]:
        """The requests received by ``endpoint``."""
        return [r for r in self.requests if r.path.endswith(f"/{_PATHS[endpoint]}")]

    def reset(self) -> None:
        """No requests seen, no canned answers, scripts or outages."""
        self.requests.clear()
        self.answers.clear()
        self.scripts.clear()
        self.outages.clear()


_PATHS: dict[str, str] = {"chat": "chat/completions", "embeddings": "embeddings"}


def fake_vector(text: str, dimensions: int) -> list[float]:
    """What the fake embedding model answers for ``text``: deterministic, not unit length."""
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return [float(x) for x in rng.normal(size=dimensions) * 3.0]


def embeddings(texts: list[str], dimensions: int) -> dict[str, Any]:
    """An embeddings answer for ``texts``."""
    rows = [
        {"object": "embedding", "index": i, "embedding": fake_vector(t, dimensions)}
        for i, t in enumerate(texts)
    ]
    return {"object": "list", "data": rows, "model": "fake-embed"}


def completion(content: object) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
    }


class JsonHandler(BaseHTTPRequestHandler):
    """A request handler that logs each JSON request to ``log`` and answers JSON."""

    # Headers and body go out in two writes; without this, Nagle's algorithm and delayed
    # ACKs hold the body back ~40 ms per request.
    disable_nagle_algorithm = True
    log: list[Seen]

    def log_message(self, format: str, *args: Any) -> None:
        """Keep the test output clean."""

    def send(
        self,
        status: int,
        payload: object,
        content_type: str = "application/json",
        headers: dict[str, str] | None = None,
    ) -> None:
        """Answer ``payload`` (JSON unless it is already bytes) with ``status``."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout test); nothing to answer

    def received(self) -> Any:
        """The request's JSON body, after logging the request."""
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length))
        self.log.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, body))
        return body


@contextmanager
def serving(handler: type[JsonHandler]) -> Iterator[str]:
    """Run ``handler`` on 127.0.0.1 (an ephemeral port) in a thread; yields the API root."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    httpd.daemon_threads = True  # a slow handler must not hold up teardown
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    host, port = httpd.server_address[:2]
    try:
        yield f"http://{host!s}:{port}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


def make_handler(state: FakeChatServer) -> type[JsonHandler]:
    """A handler of chat completions and embeddings answering ``state``'s script, else by
    model name."""
    answers = state.answers

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.received()
            endpoint = "embeddings" if self.path.endswith("/embeddings") else "chat"
            until, retry_after = state.outages.get(endpoint, (0.0, ""))
            script = state.scripts.get(endpoint)
            if time.monotonic() < until:
                self.reply(Reply.rate_limited(retry_after))
            elif script:
                self.reply(script.popleft())
            elif endpoint == "embeddings":
                self.send(200, embeddings(body["input"], state.dimensions))
            else:
                self.by_model(body)

        def reply(self, reply: Reply) -> None:
            time.sleep(reply.delay_s)
            payload = reply.body if reply.body is not None else completion(reply.content)
            self.send(reply.status, payload, headers=reply.headers)

        def by_model(self, body: dict[str, Any]) -> None:
            model = body["model"]
            if model in answers:
                self.send(200, completion(answers[model]))
            elif model == "fail-401":
                self.send(401, {"error": {"message": "Incorrect API key provided", "code": 401}})
            elif model == "fail-404":
                self.send(404, {"error": "model not found"})
            elif model == "fail-429":
                self.send(429, {"error": {"message": "rate limit reached"}})
            elif model == "fail-500":
                self.send(500, b"internal error", "text/plain")
            elif model == "fail-503":
                self.send(503, b"", "text/plain")
            elif model == "slow":
                time.sleep(1.0)
                self.send(200, completion("too late"))
            elif model == "bad-json":
                self.send(200, b"<html>proxy error</html>", "text/html")
            elif model == "no-choices":
                self.send(200, {"choices": []})
            elif model == "null-content":
                self.send(200, completion(None))
            elif model == "empty":
                self.send(200, completion("   "))
            elif model == "fail-422":
                self.send(422, {"detail": "messages: field required"})
            elif model == "emoji":
                self.send(200, completion("😀😀😀 party"))
            elif model == "long":
                self.send(200, completion(LONG_ANSWER))
            elif model == "translate":
                # A forget translator: answers with one grammar instruction.
                self.send(200, completion('```\nmatching "old job"\n```'))
            else:
                # Echo: the answer tells what the model was asked, so tests can check it.
                _system, user = (m["content"] for m in body["messages"])
                self.send(200, completion(f"summary of {len(user)} characters"))

    Handler.log = state.requests
    return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    """A chat-completions and embeddings server on 127.0.0.1 (an ephemeral port), for one
    test module."""
    state = FakeChatServer("")
    with serving(make_handler(state)) as base_url:
        state.base_url = base_url
        yield state


@pytest.fixture
def fake(server: FakeChatServer) -> FakeChatServer:
    """The module's server with an empty request log and no canned answers or scripts."""
    server.reset()
    return server
