"""``episodic.remember`` latency on PostgreSQL beside SQLite, on the same LongMemEval turns.

The first ``--turns`` distinct user turns of LongMemEval_S (file order, read at run time from
``--data``) go into one scope (``tenant="bench", user="u"``) of a SQLite file and of a
PostgreSQL database, through ``episodic.memorize_many`` with the default embedder (MiniLM
int8, one thread) behind the persistent embedding cache, so the second store costs no model
time. The stores are kept between runs (``--rebuild`` makes them afresh), so the same stores
can be timed by several source trees in turn (``PYTHONPATH=…/src``), interleaved.

Timing: both engines open the stores with one plain ``MiniLMEmbedder(threads=1)`` each, behind
a wrapper that answers the questions' vectors from a table filled before the timed passes.
Query embedding is the same work on both backends, so it is timed apart (the model alone,
once per question) and kept out of the remember figures; what is left is storage, search and
ranking. Each of ``--rounds`` rounds asks every question once of each backend, alternating
which backend goes first; one untimed question per engine comes first (it loads what a first
query loads). Each question's ranked keys and scores are written out, so two source trees
can be checked for giving the same results (``--compare A.json B.json``).

Run by hand (not in CI)::

    python bench/bench_pg_remember.py --turns 5882 --questions 100 --rounds 2
    python bench/bench_pg_remember.py --compare results/a.json results/b.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg
from bench_common import percentiles, save_result
from bench_recall import read_longmemeval
from psycopg import sql

import engramdb
from engramdb import EngineConfig
from engramdb.core.intent import MemoryItem
from engramdb.index.embedder import FloatArray
from engramdb.index.embedding_cache import PersistentEmbeddingCache
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig, SearchMode

DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")
TENANT, USER = "bench", "u"
BATCH = 256


class KnownQueries:
    """An embedder that answers the vectors of known query texts from a table and delegates
    everything else to ``inner``."""

    def __init__(self, inner: MiniLMEmbedder, known: dict[str, FloatArray]) -> None:
        self.inner = inner
        self.known = known
        self.model_id = inner.model_id
        self.dimensions = inner.dimensions

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        return await self.inner.embed(texts)

    async def embed_one(self, text: str) -> FloatArray:
        found = self.known.get(text)
        return found if found is not None else await self.inner.embed_one(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def server_database(server: str, name: str, *, fresh: bool) -> tuple[str, bool]:
    """The URL of database ``name`` on ``server`` and whether it had to be created."""
    with psycopg.connect(server, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists and fresh:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            exists = None
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base, _, _ = server.rpartition("/")
    return f"{base}/{name}", not exists


async def build(target: str, texts: Sequence[str], cache: Path) -> float:
    """Memorize ``texts`` into the bench scope of ``target``; seconds taken."""
    embedder = PersistentEmbeddingCache(MiniLMEmbedder(threads=1), cache)
    started = time.perf_counter()
    try:
        async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as engine:
            mem = engine.scope(tenant=TENANT, user=USER, session="haystack")
            for start in range(0, len(texts), BATCH):
                await mem.episodic.memorize_many(
                    [MemoryItem(text=t, role="user") for t in texts[start : start + BATCH]]
                )
                print(f"  {target[:40]}: {start + BATCH:,} / {len(texts):,}", file=sys.stderr)
    finally:
        await embedder.aclose()
    return time.perf_counter() - started


async def embed_questions(questions: Sequence[str]) -> tuple[dict[str, FloatArray], list[float]]:
    """Each question's vector from a fresh model, and how long each took."""
    model = MiniLMEmbedder(threads=1)
    await model.embed_one("warm-up")
    vectors, seconds = {}, []
    for question in questions:
        started = time.perf_counter()
        vectors[question] = await model.embed_one(question)
        seconds.append(time.perf_counter() - started)
    return vectors, seconds


async def measure(
    targets: dict[str, str],
    questions: Sequence[str],
    warm: str,
    rounds: int,
    limit: int,
    mode: SearchMode,
    held: int | None = None,
) -> dict[str, Any]:
    """remember timings per backend (query vectors known), the query embedding alone, and each
    question's ranked keys and scores per backend."""
    vectors, embed_s = await embed_questions([warm, *questions])
    samples: dict[str, list[float]] = {name: [] for name in targets}
    results: dict[str, dict[str, list[tuple[str, float]]]] = {name: {} for name in targets}
    first: dict[str, float] = {}

    def config() -> EngineConfig:
        return EngineConfig(
            embedder=KnownQueries(MiniLMEmbedder(threads=1), vectors),
            search=SearchConfig(mode=mode)
            if held is None
            else SearchConfig(mode=mode, held_vectors=held),
        )

    async with (
        engramdb.open(targets["sqlite"], config=config()) as lite,
        engramdb.open(targets["postgresql"], config=config()) as pg,
    ):
        mems = {
            "sqlite": lite.scope(tenant=TENANT, user=USER).episodic,
            "postgresql": pg.scope(tenant=TENANT, user=USER).episodic,
        }
        for name, mem in mems.items():
            started = time.perf_counter()
            await mem.remember(warm, limit=limit)
            first[name] = (time.perf_counter() - started) * 1e3
        for round_no in range(rounds):
            for i, question in enumerate(questions):
                order = list(mems) if (i + round_no) % 2 == 0 else list(mems)[::-1]
                for name in order:
                    started = time.perf_counter()
                    found = await mems[name].remember(question, limit=limit)
                    samples[name].append(time.perf_counter() - started)
                    if round_no == 0:
                        results[name][question] = [
                            (str(item.key or item.id), round(item.score or 0, 6)) for item in found
                        ]
    return {
        "remember_ms": {name: percentiles(s) for name, s in samples.items()},
        "first_query_ms": first,
        "query_embedding_ms": percentiles(embed_s[1:]),
        "results": results,
    }


def compare(paths: Sequence[str]) -> None:
    """Whether two runs ranked every question alike, per backend."""
    a, b = (json.loads(Path(p).read_text())["results"] for p in paths)
    for backend in a:
        same = sum(a[backend][q] == b[backend].get(q) for q in a[backend])
        same_keys = sum(
            [k for k, _ in a[backend][q]] == [k for k, _ in b[backend].get(q, [])]
            for q in a[backend]
        )
        print(
            f"{backend}: {same} / {len(a[backend])} questions with the same keys and scores, "
            f"{same_keys} with the same keys in the same order"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5882)
    parser.add_argument("--questions", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--mode", choices=["hybrid", "bm25", "vector"], default="hybrid")
    parser.add_argument(
        "--held-vectors",
        type=int,
        help="SearchConfig.held_vectors (0: PostgreSQL searches every vector itself)",
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--sqlite", type=Path, default=Path("/tmp/pgremember-bench.db"))
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--database", default="pgremember_bench")
    parser.add_argument("--cache", type=Path, default=Path("/tmp/pgremember-embeddings.db"))
    parser.add_argument("--rebuild", action="store_true", help="Make both stores afresh.")
    parser.add_argument("--drop", action="store_true", help="Drop both stores at the end.")
    parser.add_argument("--compare", nargs=2, metavar="RESULT_JSON")
    args = parser.parse_args()
    if args.compare:
        compare(args.compare)
        return
    turns, questions = read_longmemeval(args.data)
    texts = turns[: args.turns]
    asked = list(dict.fromkeys(questions))[: args.questions + 1]
    if args.rebuild and args.sqlite.exists():
        for suffix in ("", "-wal", "-shm"):
            Path(f"{args.sqlite}{suffix}").unlink(missing_ok=True)
    url, created = server_database(args.server, args.database, fresh=args.rebuild)
    built: dict[str, float] = {}
    if not args.sqlite.exists():
        built["sqlite"] = asyncio.run(build(str(args.sqlite), texts, args.cache))
    if created:
        built["postgresql"] = asyncio.run(build(url, texts, args.cache))
        # What autovacuum would do within a minute: plans are those of an analyzed table.
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE")
    figures = asyncio.run(
        measure(
            {"sqlite": str(args.sqlite), "postgresql": url},
            asked[1:],
            asked[0],
            args.rounds,
            args.limit,
            args.mode,
            args.held_vectors,
        )
    )
    for name, cut in figures["remember_ms"].items():
        print(f"remember {name}: p50 {cut['p50']:.1f} ms, p95 {cut['p95']:.1f} ms")
    cut = figures["query_embedding_ms"]
    print(f"query embedding alone: p50 {cut['p50']:.1f} ms, p95 {cut['p95']:.1f} ms")
    save_result(
        "pg-remember",
        {
            "engramdb": engramdb.__file__,
            "turns": len(texts),
            "questions": len(asked) - 1,
            "rounds": args.rounds,
            "mode": args.mode,
            "held_vectors": args.held_vectors,
            "built_s": built,
            **figures,
        },
    )
    if args.drop:
        args.sqlite.unlink(missing_ok=True)
        with psycopg.connect(args.server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(args.database))
            )


if __name__ == "__main__":
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    main()
