"""Latency of ``EngramStore`` (LangGraph's store on Engram) on a fresh SQLite file with the
default embedding model: ``aput`` of items in ``--namespaces`` namespaces, ``aget``,
``asearch`` with a query within one namespace and across all, and a filter alone.

One caller, one call at a time, after a few untimed calls that load the model; each figure is
what a LangGraph node waits for. Run by hand (not in CI)::

    python bench/bench_langgraph_store.py --items 1000 --namespaces 10
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from bench_common import percentiles
from bench_recall import machine
from rich.console import Console
from rich.table import Table

from engramdb.integrations.langgraph import EngramStore

WORDS = "alice booked a trip to lisbon with her sister and paid for the hotel by card".split()


def sentence(i: int) -> str:
    """A different short sentence for each item."""
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9)) + f" (note {i})"


async def timed(calls: int, call: Callable[[int], Awaitable[Any]]) -> dict[str, float]:
    samples = []
    for i in range(calls):
        started = time.perf_counter()
        await call(i)
        samples.append(time.perf_counter() - started)
    return percentiles(samples)


async def run(items: int, namespaces: int, calls: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as folder:
        async with EngramStore.open(Path(folder) / "engram.db", tenant="bench") as store:

            def namespace(i: int) -> tuple[str, ...]:
                return ("memories", f"user-{i % namespaces}")

            for i in range(3):  # load the model
                await store.aput(("warm",), str(i), {"text": sentence(i)})
                await store.asearch(("warm",), query=sentence(i))
            return {
                "aput": await timed(
                    items,
                    lambda i: store.aput(namespace(i), f"k{i}", {"text": sentence(i), "n": i}),
                ),
                "aget": await timed(calls, lambda i: store.aget(namespace(i), f"k{i}")),
                "asearch one namespace": await timed(
                    calls, lambda i: store.asearch(namespace(i), query=sentence(i * 7))
                ),
                "asearch every namespace": await timed(
                    calls, lambda i: store.asearch(("memories",), query=sentence(i * 7))
                ),
                "asearch filter only": await timed(
                    calls, lambda i: store.asearch(namespace(i), filter={"n": {"$gte": i}})
                ),
            }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--namespaces", type=int, default=10)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    figures = asyncio.run(run(args.items, args.namespaces, args.calls))
    table = Table(title=f"EngramStore, {args.items} items in {args.namespaces} namespaces")
    for column in ("call", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column)
    for name, cut in figures.items():
        table.add_row(name, *(f"{cut[p]:.1f}" for p in ("p50", "p95", "p99")))
    Console().print(table)
    print(json.dumps({"machine": machine(), "figures": figures}, indent=1))


if __name__ == "__main__":
    main()
