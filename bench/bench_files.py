"""Memory files (``FileMemoryProvider``) on the embedded default: what keeping a scope's
memories as markdown files costs next to the plain event-sourced store, and how long a rescan
of hand edits and a rebuild take.

One scope (tenant ``bench``, user ``alice``), entries spread over the three default categories
(``activity``, ``profile``, ``event``), generated chat-like sentences with a small metadata
object; no embedder (BM25 only), so the figures are the write path's. Phases, each on the
same fresh SQLite file (``synchronous="full"``):

1. ``--single`` writes one at a time through the file provider (each renders its category
   file), then the same through ``mem.persistent`` (no files) for comparison;
2. ``--entries`` written in ``write_many`` batches of ``--batch`` (one render per batch);
3. a rescan after a person edited 1 % of the blocks, removed 0.5 % and added 0.5 %;
4. ``engine.rebuild()`` (rescan, replay of the log, render of every file).

Run by hand (not in CI)::

    python bench/bench_files.py --single 500 --entries 10000

Results are printed as a table and written as JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_recall import machine, make_progress
from rich.console import Console
from rich.table import Table

import engramdb
from engramdb import EngineConfig
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest

RESULTS = Path(__file__).resolve().parent / "results"
CATEGORIES = ("activity", "profile", "event")
WORDS = ("booked", "cancelled", "moved", "reviewed", "planned", "shared", "finished")
THINGS = ("the onboarding checklist", "a trip to Porto", "the dentist visit", "the budget")


def sentence(n: int) -> str:
    """A deterministic chat-like sentence, different for every ``n``."""
    rng = random.Random(n)
    return f"Alice {rng.choice(WORDS)} {rng.choice(THINGS)} ({n}) last Tuesday."


def request(n: int) -> WriteRequest:
    """The ``n``-th entry."""
    return WriteRequest(f"m.{n:06}", sentence(n), CATEGORIES[n % 3], {"source": "bench", "turn": n})


async def timed_writes(
    provider: EventSourcedProvider, first: int, count: int, console: Console
) -> float:
    """Writes per second of ``count`` single writes."""
    requests = [request(n) for n in range(first, first + count)]
    with make_progress(console) as progress:
        task = progress.add_task(f"single writes ({provider.provider_id})", total=count)
        started = time.perf_counter()
        for r in requests:
            await provider.write(r.key, r.value, content_type=r.content_type, metadata=r.metadata)
            progress.advance(task)
        return count / (time.perf_counter() - started)


def hand_edit(folder: Path, entries: int) -> dict[str, int]:
    """Edit 1 % of the blocks' texts, remove 0.5 %, add 0.5 % by hand."""
    rng = random.Random(7)
    edited = set(rng.sample(range(entries), entries // 100))
    removed = set(rng.sample(sorted(set(range(entries)) - edited), entries // 200))
    for category in CATEGORIES:
        path = folder / f"{category}.md"
        blocks = path.read_text().split("\n## ")
        kept = [blocks[0]]
        for block in blocks[1:]:
            n = int(block.split("\n", 1)[0].removeprefix("m."))
            if n in removed:
                continue
            kept.append(block.replace("last Tuesday.", "last Friday.") if n in edited else block)
        added = [
            f"m.new.{category}.{i}\n\nAlice added this by hand ({i}).\n"
            for i in range(entries // 600)
        ]
        path.write_text("\n## ".join([*kept, *added]))
    return {"edited": len(edited), "removed": len(removed), "added": 3 * (entries // 600)}


async def run(single: int, entries: int, batch: int, console: Console) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        config = EngineConfig(embedder=None, files=Path(tmp) / "memory")
        async with engramdb.open(Path(tmp) / "bench.db", config=config) as engine:
            mem = engine.scope(tenant="bench", user="alice")
            files = mem.files
            assert files is not None
            result: dict[str, Any] = {"single": single, "entries": entries, "batch": batch}
            result["files_writes_per_s"] = await timed_writes(files, 0, single, console)
            result["plain_writes_per_s"] = await timed_writes(mem.persistent, 0, single, console)
            with make_progress(console) as progress:
                task = progress.add_task("write_many batches (files)", total=entries)
                started = time.perf_counter()
                for first in range(single, entries, batch):
                    chunk = [request(n) for n in range(first, min(entries, first + batch))]
                    await files.write_many(chunk)
                    progress.advance(task, len(chunk))
                result["batched_writes_per_s"] = (entries - single) / (
                    time.perf_counter() - started
                )
            folder = engine.files.path(mem.scope) if engine.files else Path()
            result["file_bytes"] = sum(p.stat().st_size for p in folder.glob("*.md"))
            result["hand_edits"] = hand_edit(folder, entries)
            started = time.perf_counter()
            report = await files.rescan()
            result["rescan_s"] = time.perf_counter() - started
            result["rescan_found"] = {
                "added": len(report.added),
                "changed": len(report.changed),
                "removed": len(report.removed),
            }
            started = time.perf_counter()
            await engine.rebuild()
            result["rebuild_s"] = time.perf_counter() - started
            return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--single", type=int, default=500)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=500)
    args = parser.parse_args()
    console = Console()
    result = asyncio.run(run(args.single, args.entries, args.batch, console))
    result["machine"] = machine()
    table = Table(title="memory files (one scope, SQLite, no embedder)")
    for column in ("measure", "value"):
        table.add_column(column)
    for name, value in result.items():
        if name != "machine":
            table.add_row(name, f"{value:,.1f}" if isinstance(value, float) else str(value))
    console.print(table)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"files-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(result, indent=2))
    console.print(f"written to {out}")


if __name__ == "__main__":
    main()
