"""Durability under SIGKILL: a writer process killed at random moments, hundreds of times.

Each run starts a writer (``tests/helpers/crash.py``) that stores, overwrites and deletes keys
and memorizes and deletes episodes with vectors, journalling every acknowledged write with
fsync; the run is ended with SIGKILL at a random moment. After every kill the store is
checked: every acknowledged write present, the write in flight all there or not at all, the
event log and the state in agreement, every live episode with its vector. At the end
``rebuild()`` must give back the same reads (values, key lists, ranked searches).

Run by hand (CI runs a dozen kills per backend in tests/reliability/test_crash.py)::

    python bench/bench_crash.py --kills 200 --backend sqlite
    python bench/bench_crash.py --kills 200 --backend postgresql

PostgreSQL runs on a database of its own on ``--postgres`` (created, dropped after).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' crash harness

import engramdb
from tests.helpers.crash import (
    CrashCheck,
    engine_config,
    journal_of,
    rebuild_keeps_reads,
    run_and_kill,
)


async def check_run(target: str, check: CrashCheck, journal: Path, run: int) -> None:
    async with engramdb.open(target, config=engine_config()) as engine:
        await check.after_kill(engine, journal_of(journal, run))


async def final_rebuild(target: str) -> tuple[bool, int, int]:
    async with engramdb.open(target, config=engine_config()) as engine:
        same = await rebuild_keeps_reads(engine)
        stats = await engine.stats()
        return same, stats.records, await engine.events.count()


def run(target: str, kills: int, seed: int, max_after_ready_s: float, work: Path) -> int:
    rng, check, journal = random.Random(seed), CrashCheck(), work / "journal.jsonl"
    lived, writing = [], 0
    started = time.perf_counter()
    columns = (TextColumn("kills"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns) as progress:
        task = progress.add_task("kills", total=kills)
        for n in range(kills):
            kill = run_and_kill(target, journal, n, rng, max_after_ready_s=max_after_ready_s)
            lived.append(kill.lived_s)
            writing += kill.opened
            asyncio.run(check_run(target, check, journal, n))
            progress.advance(task)
    same, records, events = asyncio.run(final_rebuild(target))
    seconds = time.perf_counter() - started
    print(f"date        {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine     {platform.node()} · {os.cpu_count()} cores · {platform.platform()}")
    print(f"command     python bench/bench_crash.py {' '.join(sys.argv[1:])}")
    print(f"kills       {kills} ({writing} while writing, {kills - writing} while starting)")
    print(f"writer life median {statistics.median(lived):.2f} s, total run {seconds:.0f} s")
    print(f"acknowledged writes       {check.acknowledged}")
    print(f"lost acknowledged writes  {check.lost}")
    print(f"writes in flight at kill  {check.in_flight} ({check.in_flight_done} had committed)")
    print(f"acknowledged, no event    {check.unlogged}")
    print(f"log/state disagreements   {check.orphans}")
    print(f"episodes without vector   {check.unvectored}")
    print(f"rebuild gives same reads  {same} ({records} records, {events} events)")
    for problem in check.problems:
        print("problem:", problem)
    return 0 if same and not check.problems else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200)
    parser.add_argument("--backend", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--max-after-ready", type=float, default=1.0, help="seconds")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="engram-crash-") as tmp:
        work = Path(tmp)
        if args.backend == "sqlite":
            return run(str(work / "crash.db"), args.kills, args.seed, args.max_after_ready, work)
        os.environ["ENGRAM_TEST_POSTGRES_URL"] = args.postgres
        from tests.postgres.database import scratch_database

        with scratch_database("crash_bench") as url:
            return run(url, args.kills, args.seed, args.max_after_ready, work)


if __name__ == "__main__":
    raise SystemExit(main())
