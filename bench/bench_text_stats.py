"""PostgreSQL full-text query time as one partition grows: the full-text part of
``remember`` (the query words kept after common-word pruning, then the BM25 statement
``PostgresSearch.text``) at 2,000, 10,000, 30,000 and 100,000 records in one scope, with
another tenant holding as many records again beside it.

Records are synthetic chat-like sentences (``bench_recall.synthetic_sentences``), questions
the matching synthetic questions; each size is timed on the same questions after the writes
(warm cache). The script creates its own database on the server and drops it afterwards. Run
by hand (not in CI)::

    python bench/bench_text_stats.py --sizes 2000,10000,30000,100000 --queries 100
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from bench_common import percentiles
from bench_recall import machine, make_progress, synthetic_questions, synthetic_sentences
from psycopg import sql
from rich.console import Console
from rich.table import Table

from engramdb.core.scope import Scope
from engramdb.providers.indexing import Indexer
from engramdb.storage.backend import Backend
from engramdb.storage.postgres.backend import PostgresBackend
from engramdb.storage.records import Put, Record, RecordQuery

SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
DATABASE = "engram_bench_text_stats"
MINE = Scope(tenant="bench", user="u")
THEIRS = Scope(tenant="other", user="u")
BATCH = 2000
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def record(key: str, text: str, scope: Scope) -> Record:
    """An episodic record whose full-text key is ``text``."""
    return Record("episodic", scope, key, {"text": text}, "turn", {}, T0, text=text)


async def fill(url: str, scope: Scope, texts: Sequence[str], start: int, console: Console) -> None:
    """Store ``texts`` in ``scope`` (keys numbered from ``start``), a batch per statement, in
    one bulk ``INSERT`` each (the write path is not what is measured here; the statistics'
    triggers run as on any write)."""
    columns = "tenant_uuid, user_uuid, namespace, tenant, user_id, agent, session, plan"
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        with make_progress(console) as progress:
            task = progress.add_task(f"write {scope.tenant}", total=len(texts))
            for at in range(0, len(texts), BATCH):
                chunk = list(texts[at : at + BATCH])
                keys = [f"r{start + at + n}" for n in range(len(chunk))]
                await conn.execute(
                    f"INSERT INTO episodic_memory ({columns}, key, value, content_type, metadata, "
                    "text, created_at) "
                    f"SELECT {columns}, k, to_json(t), 'turn', '{{}}', t, now() "
                    "FROM (SELECT * FROM episodic_memory WHERE tenant = %s AND key = 'seed') s, "
                    "unnest(%s::text[], %s::text[]) AS u(k, t)",
                    (scope.tenant, keys, chunk),
                )
                progress.advance(task, len(chunk))
        # As autovacuum would after so many rows: the planner sees the grown tables.
        await conn.execute("ANALYZE")


async def time_queries(backend: Backend, questions: Sequence[str], limit: int) -> dict[str, float]:
    """Percentiles of the full-text part of one ``remember`` per question, in milliseconds:
    the words kept after pruning, then the BM25 statement."""
    indexer = Indexer(backend)
    query = RecordQuery("episodic", MINE)

    async def one(question: str) -> None:
        match = await indexer.full_text_match(question, "episodic", MINE)
        if match:
            await backend.search.text(query, match, limit)

    for question in questions[:5]:  # warm the plan cache, the pages and the statistics
        await one(question)
    samples = []
    for question in questions:
        began = time.perf_counter()
        await one(question)
        samples.append(time.perf_counter() - began)
    return percentiles(samples)


async def size_row(
    backend: Backend, size: int, questions: Sequence[str], limit: int, console: Console
) -> dict[str, float]:
    """The questions timed at ``size`` records, as a row of the results (and a printed line)."""
    timing = await time_queries(backend, questions, limit)
    console.print(f"{size:>7} records: p50 {timing['p50']:.1f} ms, p95 {timing['p95']:.1f}")
    return {"records": size, **timing}


async def run(
    database: str, sizes: Sequence[int], queries: int, limit: int, console: Console
) -> dict[str, Any]:
    """Grow one partition through ``sizes`` and time the questions at each."""
    texts = synthetic_sentences(2 * max(sizes), seed=7)
    mine, theirs = texts[: max(sizes)], texts[max(sizes) :]
    questions = synthetic_questions(queries, seed=11)
    rows = []
    url = f"postgresql://postgres@127.0.0.1:5432/{database}"
    backend = await PostgresBackend.open(url)
    try:
        # One record per tenant through the backend, so the tenant and user rows exist.
        await backend.commit([Put(record("seed", "seed", s)) for s in (MINE, THEIRS)], [])
        held = 0
        for size in sorted(sizes):
            await fill(url, MINE, mine[held:size], held, console)
            await fill(url, THEIRS, theirs[held:size], held, console)
            held = size
            rows.append(await size_row(backend, size, questions, limit, console))
    finally:
        await backend.close()
    return {"sizes": rows, "queries": queries, "limit": limit, "machine": machine()}


def table(results: dict[str, Any]) -> Table:
    out = Table(title="full-text query, one partition (ms)")
    for column in ("records", "p50", "p95", "p99", "mean"):
        out.add_column(column, justify="right")
    for row in results["sizes"]:
        out.add_row(str(row["records"]), *(f"{row[c]:.1f}" for c in ("p50", "p95", "p99", "mean")))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2000,10000,30000,100000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--limit", type=int, default=50, help="hits asked per query")
    parser.add_argument("--out", type=Path, help="write the JSON results here")
    parser.add_argument("--database", default=DATABASE, help="created here, dropped after")
    args = parser.parse_args(argv)
    console = Console()
    name = sql.Identifier(args.database)
    with psycopg.connect(SERVER, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))
    try:
        sizes = [int(s) for s in args.sizes.split(",")]
        results = asyncio.run(run(args.database, sizes, args.queries, args.limit, console))
    finally:
        with psycopg.connect(SERVER, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
    console.print(table(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
