"""Where a PostgreSQL ``episodic.remember`` and ``episodic.memorize`` spend their time: each
storage call's count and time, and the round trips to the server, per operation.

A round trip is counted each time the client waits for the server outside pipeline mode, and
once for each pipeline it sends. The store is the one ``bench_pg_remember.py`` builds
(``--database``); the questions' vectors are computed before the timed passes, as there.
The ``--writes`` one-at-a-time memorizes go to a scope of their own, deleted at the end.

Run by hand (not in CI)::

    python bench/bench_pg_round_trips.py --questions 50 --writes 100
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import psycopg
from bench_common import percentiles
from bench_pg_remember import DATA, TENANT, USER, KnownQueries, embed_questions
from bench_recall import read_longmemeval

import engramdb
from engramdb import EngineConfig
from engramdb.core.intent import MemoryItem
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.storage.postgres.backend import PostgresBackend
from engramdb.storage.postgres.search import PostgresSearch

calls: dict[str, list[float]] = defaultdict(list)
trips = [0]


def count_trips() -> None:
    """Count the client's waits for the server (pipelines once each)."""
    wait = psycopg.AsyncConnection.wait

    async def counted(self: Any, gen: Any, *args: Any, **kwargs: Any) -> Any:
        if self._pipeline is None:
            trips[0] += 1
        return await wait(self, gen, *args, **kwargs)

    pipeline_enter = psycopg.AsyncPipeline.__aenter__
    pipeline_sync = psycopg.AsyncPipeline.sync
    pipeline_exit = psycopg.AsyncPipeline.__aexit__

    async def entered(self: Any) -> Any:
        # Entering pipeline mode waits on nothing from the server.
        found = await pipeline_enter(self)
        trips[0] -= 1
        return found

    async def synced(self: Any) -> Any:
        trips[0] += 1
        return await pipeline_sync(self)

    async def counted_exit(self: Any, *args: Any) -> Any:
        trips[0] += 1
        return await pipeline_exit(self, *args)

    setattr(psycopg.AsyncConnection, "wait", counted)  # noqa: B010
    for name, replacement in (
        ("__aenter__", entered),
        ("sync", synced),
        ("__aexit__", counted_exit),
    ):
        setattr(psycopg.AsyncPipeline, name, replacement)


def timed(cls: type, name: str) -> None:
    """Record every call of ``cls.name``'s time under ``cls.name``."""
    original: Callable[..., Any] = getattr(cls, name)

    @functools.wraps(original)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return await original(*args, **kwargs)
        finally:
            calls[f"{cls.__name__}.{name}"].append(time.perf_counter() - started)

    setattr(cls, name, wrapper)


def report(title: str, ops: int, seconds: list[float], trip_count: int) -> None:
    cut = percentiles(seconds)
    print(
        f"\n{title}: {ops} calls, p50 {cut['p50']:.1f} ms, p95 {cut['p95']:.1f} ms, "
        f"{trip_count / ops:.1f} round trips each"
    )
    for name, spent in sorted(calls.items(), key=lambda kv: -sum(kv[1])):
        print(
            f"  {name:42} {len(spent) / ops:5.2f} per op, "
            f"{sum(spent) / len(spent) * 1e3:6.2f} ms each, {sum(spent) / ops * 1e3:6.2f} ms per op"
        )


async def main(url: str, questions: list[str], writes: list[str]) -> None:
    vectors, _ = await embed_questions(questions)
    count_trips()
    for name in (
        "text",
        "nearest",
        "neighbours",
        "vector_sets",
        "document_frequencies",
        "document_count",
        "text_pruned",
        "text_best",
        "nearest_best",
    ):
        if hasattr(PostgresSearch, name):  # the one-round-trip searches are newer
            timed(PostgresSearch, name)
    for name in ("scan", "commit"):
        timed(PostgresBackend, name)
    config = EngineConfig(embedder=KnownQueries(MiniLMEmbedder(threads=1), vectors))
    async with engramdb.open(url, config=config) as engine:
        mem = engine.scope(tenant=TENANT, user=USER).episodic
        await mem.remember(questions[0])
        calls.clear()
        trips[0], seconds = 0, []
        for question in questions[1:]:
            started = time.perf_counter()
            await mem.remember(question)
            seconds.append(time.perf_counter() - started)
        report("remember", len(seconds), seconds, trips[0])
        writer = engine.scope(tenant=TENANT, user="round-trips").episodic
        await writer.memorize(MemoryItem(text="Warm up. The model loads now."))
        calls.clear()
        trips[0], seconds = 0, []
        for text in writes:
            started = time.perf_counter()
            await writer.memorize(MemoryItem(text=text, role="user"))
            seconds.append(time.perf_counter() - started)
        report("memorize", len(seconds), seconds, trips[0])
        await writer.forget("everything", mode="hard")


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--writes", type=int, default=100)
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/pgremember_bench")
    args = parser.parse_args()
    turns, asked = read_longmemeval(DATA)
    print(f"load average {os.getloadavg()}")
    asyncio.run(
        main(
            args.url,
            list(dict.fromkeys(asked))[: args.questions + 1],
            turns[-args.writes :],
        )
    )
    print(f"load average {os.getloadavg()}")
