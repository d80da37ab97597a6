"""One ``episodic.memorize`` at a time, with the default (batched) MiniLM and the bare one.

A lone writer is the case batching must not slow down: each turn and its sentences are one
model call either way, and a call that finds the model idle is sent at once. ``--turns``
turns of two or three sentences each are written one by one into a fresh SQLite file per
variant, in blocks of ``--block`` alternating between the variants; p50 / p95 per variant.

Run by hand (not in CI)::

    python bench/bench_memorize_one.py --turns 300 --block 50

Results are printed and written as JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import tempfile
import time
from pathlib import Path

from bench_common import percentiles, save_result
from bench_embed_batching import WORDS
from rich.console import Console
from rich.table import Table

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.index import BatchingEmbedder, MiniLMEmbedder


def turn(rng: random.Random) -> str:
    sentences = (
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 12))).capitalize() + "."
        for _ in range(rng.randint(2, 3))
    )
    return " ".join(sentences)


async def bench(turns: int, block: int) -> dict[str, list[float]]:
    model = MiniLMEmbedder()
    await model.load()
    configs = {
        "bare MiniLM": EngineConfig(embedder=model),
        "batched (default)": EngineConfig(embedder=BatchingEmbedder(model)),
    }
    samples: dict[str, list[float]] = {name: [] for name in configs}
    rng = random.Random(2026)
    with tempfile.TemporaryDirectory() as tmp:
        engines = {
            name: await engramdb.open(Path(tmp) / f"{n}.db", config=config)
            for n, (name, config) in enumerate(configs.items())
        }
        try:
            for start in range(0, turns, block):
                for name, engine in engines.items():
                    memory = engine.scope(tenant="bench", user="u")
                    for _ in range(min(block, turns - start)):
                        item = MemoryItem(text=turn(rng))
                        began = time.perf_counter()
                        await memory.episodic.memorize(item)
                        samples[name].append(time.perf_counter() - began)
        finally:
            for engine in engines.values():
                await engine.close()
    model.close()
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--block", type=int, default=50)
    options = parser.parse_args()
    samples = asyncio.run(bench(options.turns, options.block))
    table = Table(title=f"one episodic.memorize at a time, SQLite, {options.turns} turns each")
    for column in ("variant", "p50 ms", "p95 ms", "mean ms"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    cuts = {name: percentiles(values) for name, values in samples.items()}
    for name, cut in cuts.items():
        table.add_row(name, *(f"{cut[p]:.1f}" for p in ("p50", "p95", "mean")))
    Console().print(table)
    save_result("memorize-one", {"turns": options.turns, "latency_ms": cuts})


if __name__ == "__main__":
    main()
