"""Rule-based extraction throughput on LongMemEval_S haystacks.

Loads the benchmark file (read where it lies, never copied), turns each haystack's turns
into formation turns exactly as ``engram ingest --haystack`` does, and times
``RuleExtractor`` over them: turns/s (and characters/s) over every turn of the haystacks
chosen, with the items found per category and per rule. Loading and conversion are outside
the clock; only extraction is timed, in wall time and in this process's CPU time (which a
machine busy with other work does not stretch). Run by hand (not in CI)::

    python bench/bench_formation.py /work/shared/eval/data/longmemeval_s_cleaned.json.xz
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_recall import machine, make_progress
from rich.console import Console

from engramdb.evaluation.datasets import load_dataset
from engramdb.formation.ingest import to_turns
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.sources import haystack_messages
from engramdb.formation.types import Turn

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--haystacks", type=int, default=0, help="the first N (0: all)")
    parser.add_argument("--out", type=Path, default=RESULTS / "formation.json")
    args = parser.parse_args()
    console = Console(stderr=True)

    loading = time.perf_counter()
    dataset = load_dataset(args.dataset)
    haystacks = list(dataset.haystacks)[: args.haystacks or None]
    now = datetime.now(tz=UTC)
    batches: list[list[Turn]] = [
        [turn for turn, _ in to_turns(haystack_messages(h), now)] for h in haystacks
    ]
    console.print(f"loaded {len(haystacks)} haystacks in {time.perf_counter() - loading:.1f}s")

    extractor = RuleExtractor()
    categories: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    turns = characters = 0
    seconds = cpu = 0.0
    with make_progress(console) as progress:
        task = progress.add_task("extract", total=sum(len(b) for b in batches))
        for batch in batches:
            started, used = time.perf_counter(), time.process_time()
            found = extractor.extract_now(batch)
            seconds += time.perf_counter() - started
            cpu += time.process_time() - used
            turns += len(batch)
            characters += sum(len(t.text) for t in batch)
            categories.update(item.category for item in found.items)
            rules.update(item.pattern for item in found.items)
            progress.advance(task, len(batch))
    result: dict[str, Any] = {
        "dataset": str(args.dataset),
        "sha256": dataset.sha256,
        "haystacks": len(haystacks),
        "turns": turns,
        "characters": characters,
        "seconds": round(seconds, 3),
        "turns_per_s": round(turns / seconds, 1),
        "cpu_seconds": round(cpu, 3),
        "turns_per_cpu_s": round(turns / cpu, 1),
        "loadavg": os.getloadavg(),
        "characters_per_s": round(characters / seconds),
        "items": sum(categories.values()),
        "items_per_100_turns": round(100 * sum(categories.values()) / turns, 2),
        "categories": dict(categories.most_common()),
        "rules": dict(rules.most_common()),
        "machine": machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
