"""A real local ``/rerank`` server for tests of rerankers: ``rerank_server`` yields its API root
and the log of what it was asked.

Use it by importing the fixture into a test module::

    from tests.helpers.rerank_server import rerank_server
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest

from tests.helpers.openai_server import JsonHandler, Seen, serving


class RerankHandler(JsonHandler):
    """Scores each document by whether it holds the word the model is named after
    (``word:kibble``), best first as real servers answer; other model names fail."""

    def do_POST(self) -> None:
        body = self.received()
        model, documents = body["model"], body["documents"]
        if model.startswith("word:"):
            word = model.removeprefix("word:")
            scores = [0.9 if word in doc.lower() else 0.1 for doc in documents]
            order = sorted(range(len(documents)), key=lambda i: -scores[i])
            self.send(200, {"results": [{"index": i, "relevance_score": scores[i]} for i in order]})
        elif model == "fail-500":
            self.send(500, b"overloaded", "text/plain")
        elif model == "short":
            self.send(200, {"results": [{"index": 0, "relevance_score": 0.5}]})
        elif model == "repeated":
            self.send(200, {"results": [{"index": 0, "relevance_score": 0.5}] * len(documents)})
        elif model == "text-score":
            results = [{"index": i, "relevance_score": "high"} for i in range(len(documents))]
            self.send(200, {"results": results})
        elif model == "nan":
            results = [{"index": i, "relevance_score": math.nan} for i in range(len(documents))]
            self.send(200, {"results": results})
        else:
            self.send(200, b"<html>proxy error</html>", "text/html")


@pytest.fixture(scope="module")
def rerank_server() -> Iterator[tuple[str, list[Seen]]]:
    log: list[Seen] = []
    handler = type("Handler", (RerankHandler,), {"log": log})
    with serving(handler) as base_url:
        yield base_url, log
