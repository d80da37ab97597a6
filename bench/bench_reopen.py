"""A reopened large store: how long the open and the first ``remember`` take.

``build`` writes ``--memories`` episodes (default 100,000) into one scope through the public API
(``episodic.memorize_many``), each with its event, full-text row and vectors (the whole text's
and its sentences'), then closes the store without searching it. The vectors are
``StandInEmbedder``'s seeded random unit vectors (see bench_recall.py): the model would need
hours on two cores, and what is timed here (reading vectors, building or loading the HNSW graph)
does not depend on what they mean. Texts are LongMemEval_S's distinct user turns.

``reopen`` opens the store, times the open, the first ``remember`` (which loads the partition's
vector index: on SQLite, builds or loads its HNSW graph) and ``--queries`` more, and closes it
(timed too: a changed graph is saved then). The queries are embedded by the stand-in as well, so
no model load is timed (the real model's first load comes on top, alike for every version).
Run it with ``PYTHONPATH`` naming the tree to measure, interleaving versions (A, B, A, B) so both
see the same load.

``touch`` writes ``--writes`` more episodes and deletes ``--deletes`` through an engine that never
searches (so no graph is loaded or saved): the next ``reopen`` finds a saved graph behind the
stored vectors and patches it.

Run by hand (not in CI)::

    python bench/bench_reopen.py build --target /tmp/reopen.db
    PYTHONPATH=src python bench/bench_reopen.py reopen --target /tmp/reopen.db
    python bench/bench_reopen.py build --target postgresql://postgres@127.0.0.1:5432/engram_reopen
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench_common import percentiles, save_result
from bench_million import DATA, ensure_database
from bench_recall import StandInEmbedder, read_longmemeval
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig

TENANT, USER = "bench", "reopen"


def is_postgres(target: str) -> bool:
    return target.startswith("postgresql://")


async def build(target: str, texts: list[str], memories: int, batch: int) -> dict[str, Any]:
    """Write the store; its size and rate."""
    config = EngineConfig(embedder=StandInEmbedder())
    started = time.perf_counter()
    columns = (*Progress.get_default_columns()[:-1], MofNCompleteColumn(), TimeRemainingColumn())
    async with engramdb.open(target, config=config) as engine:
        episodic = engine.scope(tenant=TENANT, user=USER).episodic
        with Progress(*columns, BarColumn(bar_width=None)) as progress:
            task = progress.add_task("memorize", total=memories)
            for start in range(0, memories, batch):
                items = [
                    MemoryItem(text=texts[n % len(texts)], role="user", metadata={"n": n})
                    for n in range(start, min(memories, start + batch))
                ]
                await episodic.memorize_many(items)
                progress.update(task, completed=start + len(items))
    seconds = time.perf_counter() - started
    return {"memories": memories, "seconds": seconds, "per_second": memories / seconds}


async def reopen(target: str, questions: list[str], queries: int) -> dict[str, Any]:
    """Open, first ``remember``, ``queries`` more, close: each timed."""
    config = EngineConfig(embedder=StandInEmbedder())
    folder = None if is_postgres(target) else Path(f"{target}.vectors")
    saved_before = bool(folder and any(folder.glob("*.manifest")))
    t0 = time.perf_counter()
    engine = await engramdb.open(target, config=config)
    open_s = time.perf_counter() - t0
    episodic = engine.scope(tenant=TENANT, user=USER).episodic
    t0 = time.perf_counter()
    first = await episodic.remember(questions[0], limit=10)
    first_s = time.perf_counter() - t0
    timings = []
    for question in questions[1 : queries + 1]:
        t0 = time.perf_counter()
        await episodic.remember(question, limit=10)
        timings.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    await engine.close()
    close_s = time.perf_counter() - t0
    kept = list(folder.iterdir()) if folder is not None and folder.exists() else []
    graph_bytes = sum(path.stat().st_size for path in kept)
    return {
        "open_ms": open_s * 1e3,
        "first_remember_ms": first_s * 1e3,
        "first_hits": len(first),
        "next_remember_ms": percentiles(timings) if len(timings) > 1 else None,
        "close_ms": close_s * 1e3,
        "saved_graph_before": saved_before,
        "saved_graph_bytes_after": graph_bytes,
    }


async def touch(target: str, texts: list[str], writes: int, deletes: int) -> dict[str, Any]:
    """Write and delete behind a saved graph (this engine never searches)."""
    config = EngineConfig(embedder=StandInEmbedder())
    async with engramdb.open(target, config=config) as engine:
        episodic = engine.scope(tenant=TENANT, user=USER).episodic
        stamp = time.time_ns()
        written = await episodic.memorize_many(
            [
                MemoryItem(text=f"{texts[n % len(texts)]} ({stamp}-{n})", role="user")
                for n in range(writes)
            ]
        )
        for result in written[:deletes]:
            await episodic.provider.delete(result.id)
    return {"writes": writes, "deletes": deletes}


def version() -> dict[str, str]:
    """Which engramdb this process runs: its folder and that tree's commit."""
    folder = Path(engramdb.__file__).resolve().parent
    commit = subprocess.run(
        ["git", "-C", str(folder), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {"engramdb": str(folder), "commit": commit}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("phase", choices=("build", "reopen", "touch"))
    parser.add_argument("--target", required=True, help="a SQLite file or a postgresql:// URL")
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--queries", type=int, default=20)
    parser.add_argument("--writes", type=int, default=1_000)
    parser.add_argument("--deletes", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    console = Console()
    texts, questions = read_longmemeval(args.data)
    if is_postgres(args.target) and args.phase == "build":
        ensure_database(args.target)
    if args.phase == "build":
        result = asyncio.run(build(args.target, texts, args.memories, args.batch))
    elif args.phase == "reopen":
        result = asyncio.run(reopen(args.target, questions, args.queries))
    else:
        result = asyncio.run(touch(args.target, texts, args.writes, args.deletes))
    result = {"phase": args.phase, "target": args.target, **version(), **result}
    result["load_average_after"] = os.getloadavg()
    console.print(json.dumps(result))
    save_result(f"reopen-{args.phase}", result)


if __name__ == "__main__":
    main()
