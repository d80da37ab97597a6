"""Real local HTTP servers speaking OpenAI-compatible protocols: ``serving`` runs any
``JsonHandler``, and the ``server``/``fake`` fixtures run a chat-completions server, for tests
of everything that asks a chat model.

The server runs in a thread on 127.0.0.1 with an ephemeral port. What it answers is chosen by
the requested model name, so each test states what the "remote" side does: a canned answer
registered in ``FakeChatServer.answers``, one of the failure modes below, or an echo.

Use it by importing the fixtures into a test module::

    from tests.helpers.openai_server import FakeChatServer, fake, server
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

LONG_ANSWER = " ".join(["The user adopted a dog named Rex and walks him every morning."] * 200)


@dataclass
class Seen:
    """One request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class FakeChatServer:
    """A running server: where it listens, what it was asked, and canned answers by model
    name (``answers["my-model"] = "..."`` makes that model answer with that text)."""

    base_url: str
    requests: list[Seen] = field(default_factory=list)
    answers: dict[str, str] = field(default_factory=dict)


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

    def send(self, status: int, payload: object, content_type: str = "application/json") -> None:
        """Answer ``payload`` (JSON unless it is already bytes) with ``status``."""
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
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


def make_handler(log: list[Seen], answers: dict[str, str]) -> type[JsonHandler]:
    """A chat-completions handler answering by model name."""

    class Handler(JsonHandler):
        def do_POST(self) -> None:
            body = self.received()
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

    Handler.log = log
    return Handler


@pytest.fixture(scope="module")
def server() -> Iterator[FakeChatServer]:
    """A chat-completions server on 127.0.0.1 (an ephemeral port), for one test module."""
    log: list[Seen] = []
    answers: dict[str, str] = {}
    with serving(make_handler(log, answers)) as base_url:
        yield FakeChatServer(base_url, log, answers)


@pytest.fixture
def fake(server: FakeChatServer) -> FakeChatServer:
    """The module's server with an empty request log and no canned answers."""
    server.requests.clear()
    server.answers.clear()
    return server
