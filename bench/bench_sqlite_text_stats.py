"""SQLite full-text query time as one partition grows: the full-text part of ``remember`` (the
query words kept after common-word pruning, then ``SqliteSearch.text``) at 2,000, 10,000,
30,000 and 100,000 records in one scope, with another tenant holding as many records again
beside it in the same file (``bench_text_stats.py`` measures the same on PostgreSQL).

Records are synthetic chat-like sentences (``bench_recall.synthetic_sentences``), written
through ``SqliteBackend.commit`` (so every write trigger runs), questions the matching
synthetic questions; each size is timed on the same questions after its writes (warm cache).
With ``--commits N`` it also times N writes of one record each into the partition (every
trigger runs, as for a lone ``memorize``), then deletes them again. The file at ``--db`` is
grown, not replaced: run the script once per size against one file per code version (or the
same file, when the versions share a schema), alternating versions, under the same load::

    for n in 2000 10000 30000 100000; do
      PYTHONPATH=<old src>:. python bench_sqlite_text_stats.py --db old.db --sizes $n --out o$n.json
      PYTHONPATH=../src:. python bench_sqlite_text_stats.py --db new.db --sizes $n --out n$n.json
    done
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sqlite3
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_common import percentiles
from bench_recall import machine, make_progress, synthetic_questions, synthetic_sentences
from bench_text_stats import BATCH, MINE, THEIRS, record, size_row, table
from rich.console import Console

from engramdb.core.scope import Scope
from engramdb.storage.records import Delete, Put
from engramdb.storage.sqlite.backend import SqliteBackend


def held(path: Path, scope: Scope) -> int:
    """How many records ``scope`` already holds in the file."""
    if not path.exists():
        return 0
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM records WHERE tenant = ?", (scope.tenant,)
        ).fetchone()
    return int(count)


async def fill(
    backend: SqliteBackend, scope: Scope, texts: Sequence[str], start: int, console: Console
) -> None:
    """Store ``texts`` in ``scope`` (keys numbered from ``start``), a batch per commit."""
    with make_progress(console) as progress:
        task = progress.add_task(f"write {scope.tenant}", total=len(texts))
        for at in range(0, len(texts), BATCH):
            chunk = texts[at : at + BATCH]
            await backend.commit(
                [Put(record(f"r{start + at + n}", t, scope)) for n, t in enumerate(chunk)], []
            )
            progress.advance(task, len(chunk))


async def time_commits(backend: SqliteBackend, count: int) -> dict[str, float]:
    """Percentiles of ``count`` one-record commits into the partition, in milliseconds (the
    records are deleted again afterwards, so the file stays as it was grown)."""
    texts = synthetic_sentences(count, seed=13)
    samples = []
    for at, text in enumerate(texts):
        began = time.perf_counter()
        await backend.commit([Put(record(f"w{at}", text, MINE))], [])
        samples.append(time.perf_counter() - began)
    await backend.commit([Delete("episodic", MINE, f"w{at}") for at in range(count)], [])
    return percentiles(samples)


async def run(
    path: Path, sizes: Sequence[int], queries: int, limit: int, commits: int, console: Console
) -> dict[str, Any]:
    """Grow the partition of ``path`` through ``sizes`` and time the questions at each."""
    # The texts depend only on the largest size asked for ever, so a grown file stays a prefix.
    texts = synthetic_sentences(200_000, seed=7)
    mine, theirs = texts[:100_000], texts[100_000:]
    questions = synthetic_questions(queries, seed=11)
    rows = []
    backend = await SqliteBackend.open(path, synchronous="normal")
    try:
        for size in sorted(sizes):
            for scope, pool in ((MINE, mine), (THEIRS, theirs)):
                have = held(path, scope)
                await fill(backend, scope, pool[have:size], have, console)
            row = await size_row(backend, size, questions, limit, console)
            if commits:
                timing = await time_commits(backend, commits)
                row.update({f"commit_{name}": value for name, value in timing.items()})
                console.print(
                    f"{size:>7} records: one-record commit p50 {timing['p50']:.2f} ms, "
                    f"p95 {timing['p95']:.2f}"
                )
            rows.append(row)
    finally:
        await backend.close()
    return {"sizes": rows, "queries": queries, "limit": limit, "machine": machine()}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="the file to grow")
    parser.add_argument("--sizes", default="2000,10000,30000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--limit", type=int, default=50, help="hits asked per query")
    parser.add_argument("--commits", type=int, default=0, help="one-record commits to time")
    parser.add_argument("--out", type=Path, help="write the JSON results here")
    args = parser.parse_args(argv)
    console = Console()
    sizes = [int(s) for s in args.sizes.split(",")]
    results = asyncio.run(run(args.db, sizes, args.queries, args.limit, args.commits, console))
    console.print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
