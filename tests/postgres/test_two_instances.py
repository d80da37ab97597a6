"""Two ``engram serve`` processes on one PostgreSQL database are one service: what is written
through one is found through the other — episodic search, semantic search and the graph —
within a bounded time, and each instance's caches follow the other's writes."""

from __future__ import annotations

import os
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

import httpx
import pytest

from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.postgres.database import empty_database

BOUND_S = 10.0


@pytest.fixture
def two_instances(tmp_path: Path) -> Iterator[tuple[httpx.Client, httpx.Client]]:
    url = empty_database()
    with ExitStack() as stack:
        clients = []
        for name in ("a", "b"):
            port = free_port()
            command = [
                *(sys.executable, "-m", "engramdb.cli", "--db", url, "serve"),
                *("--port", str(port)),
            ]
            base = f"http://127.0.0.1:{port}"
            env = {**os.environ, "HF_HUB_OFFLINE": "1"}
            stack.enter_context(
                serving(command, f"{base}/healthz", log=tmp_path / f"{name}.log", env=env)
            )
            clients.append(stack.enter_context(httpx.Client(base_url=base, timeout=30)))
        yield clients[0], clients[1]


def found_within(client: httpx.Client, path: str, params: dict[str, str], word: str) -> float:
    """Seconds until ``word`` is in the answer; fails after ``BOUND_S``."""
    started = time.monotonic()
    while True:
        answer = client.get(path, params=params)
        assert answer.status_code == 200, answer.text
        if word in answer.text:
            return time.monotonic() - started
        assert time.monotonic() - started < BOUND_S, f"{word} not found through the other"
        time.sleep(0.02)


def test_a_write_through_one_instance_is_found_through_the_other(
    two_instances: tuple[httpx.Client, httpx.Client],
) -> None:
    a, b = two_instances
    for writer, reader in ((a, b), (b, a)):
        word = f"zq{uuid.uuid4().hex[:8]}"
        # Each reader has searched before, so its caches hold the state before the write.
        found_within(reader, "/v1/memory/episodic/search", {"q": "warm up"}, "")
        written = writer.post("/v1/memory/episodic", json={"role": "user", "content": word})
        assert written.status_code == 201
        found_within(reader, "/v1/memory/episodic/search", {"q": word}, word)
        fact = writer.post("/v1/memory/semantic", json={"content": f"the code is {word}"})
        assert fact.status_code == 201
        found_within(reader, "/v1/memory/semantic/search", {"q": word}, word)
        entity = {"name": f"Person{word}", "entity_type": "person"}
        assert writer.post("/v1/memory/graph/entities", json=entity).status_code == 201
        found_within(reader, "/v1/memory/graph/search", {"q": f"Person{word}"}, word)
