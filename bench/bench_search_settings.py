"""Search settings compared on one stored copy of a retrieval benchmark.

``engram eval`` ingests a data set afresh for every run; comparing a dozen settings that way
costs a dozen ingests. This script ingests once, through the public API (the harness's own
``ingest``, into a kept SQLite file), then asks every question of that store once per setting
with ``remember(limit=50)`` and scores the rankings with the harness's ``score_hits``: the
same protocol, figures equal to ``engram eval`` for the same settings.

    python bench/bench_search_settings.py ../shared/eval/data/longmemeval_s_cleaned.json.xz \\
        --db s.db --set time_boost=0.2 --set part_candidates=0,session_weight=0.1

Each ``--set`` is one setting: comma-separated ``field=value`` pairs of ``SearchConfig`` (as
``engram eval --set`` takes them); the defaults run first. Vectors come from the persistent
embedding cache, so a second run embeds nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import engramdb
from engramdb.cli.eval_command import default_embedding_cache, parse_search_settings
from engramdb.evaluation.datasets import Dataset, load_dataset
from engramdb.evaluation.harness import (
    EngramTarget,
    EvalSettings,
    eval_embedder,
    ingest,
    score_hits,
)
from engramdb.index.embedder import Embedder
from engramdb.index.search_config import SearchConfig


async def ask_all(
    dataset: Dataset, db: Path, embedder: Embedder, settings: dict[str, Any]
) -> dict[str, dict[str, float]]:
    """Turn scores per category (and ``overall``) for one setting."""
    config = engramdb.EngineConfig(search=SearchConfig(**settings), embedder=embedder)
    scored: dict[str, list[dict[str, float]]] = defaultdict(list)
    async with engramdb.open(db, config=config) as engine:
        target = EngramTarget(engine)
        for haystack in dataset.haystacks:
            for question in haystack.questions:
                hits = await target.remember(
                    haystack.haystack_id, question.question, 50, question.asked_at
                )
                scores, _ = score_hits(
                    hits, question.evidence_turns, question.evidence_sessions, EvalSettings()
                )
                scored[question.category].append(scores["turn"])
                scored["overall"].append(scores["turn"])
    return {
        category: {metric: sum(s[metric] for s in rows) / len(rows) for metric in rows[0]}
        for category, rows in scored.items()
    }


async def main(args: argparse.Namespace) -> None:
    dataset = load_dataset(args.dataset)
    variants: list[dict[str, Any]] = [{}]
    variants += [parse_search_settings(spec.split(",")) for spec in args.set]
    async with eval_embedder(args.embedding_cache) as embedder:
        if not args.db.exists():
            started = time.perf_counter()
            config = engramdb.EngineConfig(embedder=embedder)
            async with engramdb.open(args.db, config=config) as engine:
                await ingest(dataset.haystacks, EngramTarget(engine), EvalSettings())
            print(f"ingested into {args.db} in {time.perf_counter() - started:.0f} s")
        for settings in variants:
            scores = await ask_all(dataset, args.db, embedder, settings)
            overall = scores.pop("overall")
            label = ", ".join(f"{k}={v}" for k, v in settings.items()) or "defaults"
            cats = " ".join(f"{c[:12]} {s['recall_all@10']:.3f}" for c, s in sorted(scores.items()))
            print(
                f"{label}: R@5 {overall['recall_all@5']:.3f} R@10 {overall['recall_all@10']:.3f} "
                f"NDCG@10 {overall['ndcg_any@10']:.3f} | {cats}",
                flush=True,
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--db", type=Path, required=True, help="The store, made if missing.")
    parser.add_argument("--set", action="append", default=[], help="field=value[,field=value]")
    parser.add_argument("--embedding-cache", type=Path, default=default_embedding_cache())
    asyncio.run(main(parser.parse_args()))
