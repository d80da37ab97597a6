"""Graph memory at scale: 100,000 entities and 500,000 relations in one scope on the embedded
default (one SQLite file).

Phases: bulk load through ``add_entities``/``add_relations`` (many entities or relations per
transaction, each with its event); load of the working graph by a fresh engine (what a
restart costs); then neighbours, 2-hop BFS and shortest path (at most 6 hops, along the
arrows and either way) between random entities, each timed around
``GraphMemoryProvider.traverse``. Relations are uniform random
pairs of six non-exclusive types, so an entity has about five relations out and five in.
Run by hand (not in CI)::

    python bench/bench_graph.py --entities 100000 --relations 500000 --queries 500
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import resource
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_common import percentiles
from bench_recall import machine, make_progress
from rich.console import Console
from rich.table import Table

import engramdb
from engramdb import EngineConfig, GraphEntity, GraphRelation, GraphTraversal
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.storage.records import RecordQuery

RESULTS = Path(__file__).resolve().parent / "results"
SCOPE = {"tenant": "bench", "user": "u", "agent": "a"}
TYPES = ["person", "organization", "project", "location", "concept"]
RELATIONS = ["knows", "works_with", "part_of", "depends_on", "related_to", "follows"]


def config(embedder: str) -> EngineConfig:
    """The engine settings: the default MiniLM embedder (one thread), or none."""
    return EngineConfig(embedder=MiniLMEmbedder(threads=1) if embedder == "minilm" else None)


async def bulk_load(path: Path, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Write the entities, then the relations, ``args.batch`` per transaction."""
    rng = random.Random(7)
    ids = [f"e{i:06d}" for i in range(args.entities)]
    timings: dict[str, Any] = {}
    async with engramdb.open(path, config=config(args.embedder), synchronous="normal") as engine:
        graph = engine.scope(**SCOPE).graph
        with make_progress(console) as bar:
            task = bar.add_task("entities", total=len(ids))
            started = time.perf_counter()
            for first in range(0, len(ids), args.batch):
                batch = [
                    GraphEntity(
                        entity_id=i,
                        name=f"Entity {i[1:]}",
                        entity_type=TYPES[n % len(TYPES)],
                        properties={"rank": n % 100},
                    )
                    for n, i in enumerate(ids[first : first + args.batch], first)
                ]
                await graph.add_entities(batch, resolve=False)
                bar.advance(task, len(batch))
            timings["entities_s"] = time.perf_counter() - started
            task = bar.add_task("relations", total=args.relations)
            started = time.perf_counter()
            for first in range(0, args.relations, args.batch):
                size = min(args.batch, args.relations - first)
                batch_relations = [
                    GraphRelation(
                        source_id=rng.choice(ids),
                        target_id=rng.choice(ids),
                        relation_type=rng.choice(RELATIONS),
                    )
                    for _ in range(size)
                ]
                await graph.add_relations(batch_relations)
                bar.advance(task, size)
            timings["relations_s"] = time.perf_counter() - started
        stats = await engine.stats()
        timings["records"] = stats.records_by_namespace
        timings["events"] = stats.events
        timings["size_mb"] = round((stats.size_bytes or 0) / 1e6, 1)
    return timings


def current_rss_mb() -> float:
    """The process's resident memory now (Linux), in MB."""
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * resource.getpagesize() / 2**20


async def measure(path: Path, args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """Load the working graph in a fresh engine, then time the traversals."""
    rng = random.Random(11)
    results: dict[str, Any] = {}
    async with engramdb.open(path, config=config(args.embedder)) as engine:
        graph = engine.scope(**SCOPE).graph
        # The load first, in a process that has read nothing yet, so its peak is the load's.
        gc.collect()
        before_mb = current_rss_mb()
        started = time.perf_counter()
        working = await graph.working_graph()
        results["load_s"] = time.perf_counter() - started
        results["loaded"] = {
            "entities": working.graph.number_of_nodes(),
            "relations": working.graph.number_of_edges(),
        }
        results["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        gc.collect()
        results["rss_before_load_mb"] = before_mb
        results["rss_after_load_mb"] = current_rss_mb()
        # Reading the records alone, with the garbage collector paused as the load pauses it.
        gc.disable()
        started = time.perf_counter()
        for namespace in ("graph", "graph.relations"):
            await engine.backend.scan(RecordQuery(namespace, graph.partition))
        results["scan_only_s"] = time.perf_counter() - started
        gc.enable()
        gc.collect()
        ids = sorted(working.graph.nodes)
        queries: dict[str, Callable[[str, str], GraphTraversal]] = {
            "neighbours": lambda s, t: GraphTraversal(start_entity_id=s, pattern="neighbors"),
            "bfs_2_hops": lambda s, t: GraphTraversal(
                start_entity_id=s, pattern="bfs", max_depth=2, limit=100_000
            ),
            "shortest_path": lambda s, t: GraphTraversal(
                start_entity_id=s, pattern="shortest_path", target_entity_id=t, max_depth=6
            ),
            "shortest_path_both": lambda s, t: GraphTraversal(
                start_entity_id=s,
                pattern="shortest_path",
                target_entity_id=t,
                max_depth=6,
                direction="both",
            ),
        }
        with make_progress(console) as bar:
            for name, make in queries.items():
                task = bar.add_task(name, total=args.queries)
                samples: list[float] = []
                sizes: list[int] = []
                for _ in range(args.queries):
                    query = make(rng.choice(ids), rng.choice(ids))
                    started = time.perf_counter()
                    found = await graph.traverse(query)
                    samples.append(time.perf_counter() - started)
                    sizes.append(len(found))
                    bar.advance(task)
                results[name] = {
                    **percentiles(samples),
                    "mean_result_size": sum(sizes) / len(sizes),
                    "empty": sum(1 for s in sizes if s == 0),
                }
    return results


def report(record: dict[str, Any], console: Console) -> None:
    """Print the figures."""
    if "load" in record:
        load = record["load"]
        console.print(
            f"bulk load: {record['entities']:,} entities in {load['entities_s']:.1f} s, "
            f"{record['relations']:,} relations in {load['relations_s']:.1f} s "
            f"({record['relations'] / load['relations_s']:,.0f}/s); file {load['size_mb']} MB"
        )
    measured = record["measured"]
    console.print(
        f"working graph load: {measured['load_s']:.1f} s "
        f"(reading the records alone: {measured['scan_only_s']:.1f} s; "
        f"{measured['loaded']['entities']:,} entities, "
        f"{measured['loaded']['relations']:,} relations; max RSS {measured['max_rss_mb']:.0f} MB; "
        f"resident {measured['rss_before_load_mb']:.0f} MB before the load, "
        f"{measured['rss_after_load_mb']:.0f} MB after it)"
    )
    table = Table("query", "p50 ms", "p95 ms", "p99 ms", "mean result", "empty")
    for name in ("neighbours", "bfs_2_hops", "shortest_path", "shortest_path_both"):
        row = measured[name]
        table.add_row(
            name,
            f"{row['p50']:.2f}",
            f"{row['p95']:.2f}",
            f"{row['p99']:.2f}",
            f"{row['mean_result_size']:.1f}",
            str(row["empty"]),
        )
    console.print(table)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--relations", type=int, default=500_000)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--batch", type=int, default=5_000, help="writes per transaction")
    parser.add_argument("--embedder", choices=["minilm", "none"], default="minilm")
    parser.add_argument("--db", type=Path, help="database file (default: a temporary one)")
    parser.add_argument(
        "--measured-only", action="store_true", help="skip the bulk load: --db is already filled"
    )
    args = parser.parse_args()
    console = Console()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.db or Path(tmp) / "graph.db"
        record: dict[str, Any] = {
            "machine": machine(),
            "entities": args.entities,
            "relations": args.relations,
            "queries": args.queries,
            "batch": args.batch,
            "embedder": args.embedder,
        }
        if not args.measured_only:
            record["load"] = await bulk_load(path, args, console)
        record["measured"] = await measure(path, args, console)
    report(record, console)
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"graph-{time.strftime('%Y%m%dT%H%M%S')}.json"
    out.write_text(json.dumps(record, indent=2))
    console.print(f"results: {out}")


if __name__ == "__main__":
    asyncio.run(main())
