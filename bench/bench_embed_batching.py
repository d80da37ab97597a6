"""Concurrent callers embedding one short text each, with and without ``BatchingEmbedder``.

What a busy service asks of its model: ``--callers`` concurrent loops, each embedding one
sentence of 6–14 words at a time (a query, or a turn) for ``--seconds``. Run against the bare
MiniLM embedder (each call its own model run, in turn on the model's thread) and against the
same model behind a ``BatchingEmbedder`` (calls that meet are one model run) that sends a
batch at once or collects for 2 ms first, alternating, ``--rounds`` times each. Reports
texts/s and per-call latency.

Run by hand (not in CI)::

    python bench/bench_embed_batching.py --callers 1 8 50 --seconds 10 --rounds 2

Results are printed as a table and written as JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

from bench_common import percentiles, save_result
from rich.console import Console
from rich.table import Table

from engramdb.index import BatchingEmbedder, Embedder, MiniLMEmbedder

WORDS = (
    "invoice billing refund lisbon cat miso garden coffee meeting deadline report travel "
    "flight hotel budget python database memory agent plan research summary weekend"
).split()


async def caller(embedder: Embedder, deadline: float, seed: int, latencies: list[float]) -> None:
    rng = random.Random(seed)
    while time.monotonic() < deadline:
        # Distinct texts: no two callers ask for the same one, as in a real service.
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + f" {seed}"
        started = time.perf_counter()
        await embedder.embed_one(text)
        latencies.append(time.perf_counter() - started)


async def measure(embedder: Embedder, callers: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    started = time.monotonic()
    await asyncio.gather(
        *(caller(embedder, started + seconds, n, latencies) for n in range(callers))
    )
    elapsed = time.monotonic() - started
    return {
        "texts": len(latencies),
        "texts_per_s": round(len(latencies) / elapsed, 1),
        "latency_ms": percentiles(latencies),
    }


async def bench(callers: list[int], seconds: float, rounds: int) -> list[dict[str, Any]]:
    model = MiniLMEmbedder()
    await model.load()
    variants: dict[str, Embedder] = {
        "one call each": model,
        "batched, no wait": BatchingEmbedder(model, max_wait_s=0.0),
        "batched, 2 ms wait": BatchingEmbedder(model, max_wait_s=0.002),
    }
    rows = []
    for count in callers:
        for round_ in range(rounds):
            for name, embedder in variants.items():
                result = await measure(embedder, count, seconds)
                rows.append({"callers": count, "round": round_ + 1, "variant": name, **result})
    model.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--callers", type=int, nargs="+", default=[1, 8, 50])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    options = parser.parse_args()
    rows = asyncio.run(bench(options.callers, options.seconds, options.rounds))
    table = Table(title="concurrent embed_one calls, MiniLM int8, one thread")
    for column in ("callers", "round", "variant", "texts/s", "p50 ms", "p95 ms", "p99 ms"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    for row in rows:
        cut = row["latency_ms"]
        table.add_row(
            str(row["callers"]),
            str(row["round"]),
            row["variant"],
            f"{row['texts_per_s']:.1f}",
            *(f"{cut[p]:.1f}" for p in ("p50", "p95", "p99")),
        )
    Console().print(table)
    save_result("embed-batching", {"rows": rows})


if __name__ == "__main__":
    main()
