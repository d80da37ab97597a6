"""Many tenants on one PostgreSQL database: ingest rate and per-scope ``remember`` latency.

Writes ``--tenants`` × ``--per-tenant`` episodes (default 1,000 × 1,000 = 1,000,000) through
the public API — ``scope(tenant=…, user="u").episodic.memorize_many`` in batches — so every
memory has its event, its full-text row and its vectors (the whole text's and its sentences').
The writes run inside ``Engine.bulk_load``, as a restore's do: the HNSW index is built once
from the full table at the end, not grown a row at a time (``--row-by-row`` grows it).
The vectors are ``StandInEmbedder``'s seeded random unit vectors (see bench_recall.py): the
model would need days on two cores for a million turns, and storage and index costs do not
depend on what the vectors mean. Texts are LongMemEval_S's distinct user turns, read where
they lie (``--data``), reused across tenants.

Then, for ``--queries`` questions in ``--scopes`` random tenants, ``episodic.remember`` is
timed through an engine that embeds each question with the real model (MiniLM, one thread):
p50 / p95 per call. The store is kept (``--url``) so the query phase can be re-run alone
(``--skip-ingest``, with ``--tenants`` the tenants written). Last, what the store holds, how
fast it was written (from its rows' write times) and its size on disk, per table and index.

Run by hand (not in CI)::

    python bench/bench_million.py --url postgresql://postgres@127.0.0.1:5432/engram_million
    python bench/bench_million.py --tenants 100 --per-tenant 100   # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import time
from contextlib import nullcontext
from pathlib import Path

import psycopg
from bench_common import percentiles
from bench_recall import StandInEmbedder, read_longmemeval
from psycopg import sql
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.index.minilm import MiniLMEmbedder

DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")
SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def ensure_database(url: str) -> None:
    """Create the database ``url`` names when it does not exist."""
    name = url.rsplit("/", 1)[1]
    with psycopg.connect(SERVER, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not found:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


async def ingest(
    url: str,
    texts: list[str],
    tenants: int,
    per_tenant: int,
    batch: int,
    bulk: bool,
    index_memory_mb: int,
) -> tuple[float, float]:
    """Write the store; memories per second while writing, and the seconds spent building
    the vector index at the end (``bulk``: inside ``Engine.bulk_load``; else 0, as each
    write inserts into the index)."""
    config = EngineConfig(embedder=StandInEmbedder())
    total = tenants * per_tenant
    columns = (*Progress.get_default_columns()[:-1], MofNCompleteColumn(), TimeRemainingColumn())
    async with engramdb.open(url, config=config) as engine:
        loading = engine.bulk_load(index_memory_mb=index_memory_mb) if bulk else nullcontext()
        async with loading:
            started = time.perf_counter()
            with Progress(*columns, BarColumn(bar_width=None)) as progress:
                task = progress.add_task("memorize", total=total)
                n = 0
                for tenant in range(tenants):
                    episodic = engine.scope(tenant=f"t{tenant:05d}", user="u").episodic
                    for start in range(0, per_tenant, batch):
                        items = [
                            MemoryItem(text=texts[(n + i) % len(texts)], role="user")
                            for i in range(min(batch, per_tenant - start))
                        ]
                        await episodic.memorize_many(items)
                        n += len(items)
                        progress.update(task, completed=n)
            written = time.perf_counter()
        indexed = time.perf_counter()
    return total / (written - started), indexed - written


async def query(
    url: str, questions: list[str], tenants: int, scopes: int, queries: int
) -> tuple[float, list[float]]:
    """Seconds of the first ``remember`` after opening the store (model loaded first), and
    per ``remember`` in random scopes after, each question embedded by the real model."""
    chosen = random.Random(7).sample(range(tenants), min(scopes, tenants))
    config = EngineConfig(embedder=MiniLMEmbedder(threads=1))
    timings = []
    async with engramdb.open(url, config=config) as engine:
        await engine.indexer.warm()
        asked = time.perf_counter()
        await engine.scope(tenant=f"t{chosen[0]:05d}", user="u").episodic.remember(
            questions[0], limit=10
        )
        first = time.perf_counter() - asked
        for n in range(queries):
            episodic = engine.scope(tenant=f"t{chosen[n % len(chosen)]:05d}", user="u").episodic
            await episodic.remember(questions[-1 - n % len(questions)], limit=10)  # warm scope
            asked = time.perf_counter()
            await episodic.remember(questions[n % len(questions)], limit=10)
            timings.append(time.perf_counter() - asked)
    return first, timings


def describe_store(url: str, console: Console) -> None:
    """Print what the store holds (so a run stopped during ingest still says what it wrote,
    and how fast, from the rows' own write times) and its size on disk, per table."""
    with psycopg.connect(url) as conn:
        memories, tenants, seconds = conn.execute(
            "SELECT count(*), count(DISTINCT tenant), "
            "extract(epoch FROM max(created_at) - min(created_at)) FROM episodic_memory"
        ).fetchone() or (0, 0, None)
        console.print(
            f"store: {memories:,} memories over {tenants:,} tenants, written in "
            f"{float(seconds or 0):,.0f} s ({memories / float(seconds or 1):,.0f}/s)"
        )
        (database,) = conn.execute(
            "SELECT pg_size_pretty(pg_database_size(current_database()))"
        ).fetchone() or ("?",)
        console.print(f"database size: {database}")
        rows = conn.execute(
            "SELECT c.relname, pg_size_pretty(pg_total_relation_size(c.oid)), "
            "pg_size_pretty(pg_relation_size(c.oid)), "
            "pg_size_pretty(pg_total_relation_size(c.oid) - pg_relation_size(c.oid) "
            "- pg_indexes_size(c.oid)), pg_size_pretty(pg_indexes_size(c.oid)) "
            "FROM pg_class c WHERE c.relkind = 'r' AND c.relnamespace = 'public'::regnamespace "
            "AND pg_total_relation_size(c.oid) > 1048576 "
            "ORDER BY pg_total_relation_size(c.oid) DESC"
        ).fetchall()
        console.print("table: total (heap + TOAST + indexes)")
        for name, total, heap, toast, indexes in rows:
            console.print(f"  {name}: {total} ({heap} + {toast} + {indexes})")
        for name, size in conn.execute(
            "SELECT indexrelid::regclass::text, pg_size_pretty(pg_relation_size(indexrelid)) "
            "FROM pg_index WHERE indrelid = 'episodic_memory'::regclass "
            "ORDER BY pg_relation_size(indexrelid) DESC"
        ).fetchall():
            console.print(f"  index {name}: {size}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="postgresql://postgres@127.0.0.1:5432/engram_million")
    parser.add_argument("--tenants", type=int, default=1000)
    parser.add_argument("--per-tenant", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--scopes", type=int, default=50)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--skip-ingest", action="store_true")
    parser.add_argument("--index-memory-mb", type=int, default=3000)
    parser.add_argument(
        "--row-by-row",
        action="store_true",
        help="insert each vector into the index as it is written (no Engine.bulk_load)",
    )
    args = parser.parse_args()
    console = Console()
    texts, questions = read_longmemeval(args.data)
    ensure_database(args.url)
    if not args.skip_ingest:
        rate, building = asyncio.run(
            ingest(
                args.url,
                texts,
                args.tenants,
                args.per_tenant,
                args.batch,
                not args.row_by_row,
                args.index_memory_mb,
            )
        )
        console.print(
            f"ingest: {args.tenants * args.per_tenant:,} memories, {rate:,.0f}/s, then "
            f"{building:,.1f} s building the vector index (load average "
            f"{os.getloadavg()[0]:.1f})"
        )
    first, timings = asyncio.run(
        query(args.url, questions, args.tenants, args.scopes, args.queries)
    )
    console.print(f"first remember after opening the store: {first * 1000:,.1f} ms")
    cut = percentiles(timings)
    console.print(
        f"remember in {min(args.scopes, args.tenants)} scopes of {args.per_tenant:,}: "
        f"p50 {cut['p50']:.1f} ms, p95 {cut['p95']:.1f} ms (n={len(timings)}); "
        f"{platform.machine()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f}"
    )
    describe_store(args.url, console)


if __name__ == "__main__":
    main()
