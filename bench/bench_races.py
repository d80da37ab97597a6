"""Racing writers, many times over: how many acknowledged updates were lost, how many events
were duplicated or missing, how many deleted plans came back.

Runs the races of ``tests/helpers/races.py`` (the ones the test suite runs a few times) on each
``--target``:

- **tasks**: per trial, three tasks of one process update three different fields of one plan;
- **processes**: per trial, three processes update their field of one plan ``--rounds`` times;
- **http**: per trial, three clients PUT their field of one plan at once to ``engram serve``
  (local mode) on the same database;
- **delete**: per trial, an update and two deletes of one plan at once, each after a random
  delay below 2 ms.

Run by hand (not in CI)::

    python bench/bench_races.py --target /tmp/races.db \
        --target postgresql://postgres@127.0.0.1:5432/engram_races

A SQLite target is created; a PostgreSQL database must exist (it is migrated). Plan ids carry
the run's start time, so a target may be reused. Results are printed and written as JSON to
``bench/results/`` (git-ignored). Exits 1 if any count that must be zero is not.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import platform
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the races are the test suite's own

from tests.helpers.ports import free_port  # noqa: E402
from tests.helpers.processes import serving  # noqa: E402
from tests.helpers.races import (  # noqa: E402
    Tally,
    open_engine,
    race_fields_in_processes,
    race_fields_in_tasks,
    race_fields_over_http,
    race_update_and_delete,
)

RESULTS_DIR = ROOT / "bench" / "results"


async def run_target(target: str, args: argparse.Namespace, run: str) -> dict[str, Tally]:
    """Every race on ``target``."""
    results: dict[str, Tally] = {}
    async with open_engine(target) as engine:
        started = time.perf_counter()
        results["tasks"] = await race_fields_in_tasks(engine, args.tasks, prefix=f"{run}-t")
        report(target, "tasks", results["tasks"], started)
        started = time.perf_counter()
        results["processes"] = await race_fields_in_processes(
            engine, target, args.processes, args.rounds, prefix=f"{run}-p"
        )
        report(target, "processes", results["processes"], started)
        started = time.perf_counter()
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        command = [
            *(sys.executable, "-m", "engramdb.cli", "--db", target, "serve"),
            *("--host", "127.0.0.1", "--port", str(port), "--auth", "local", "--no-vectors"),
        ]
        log = RESULTS_DIR / "races-serve.log"
        with serving(command, f"{url}/healthz", log=log, env={**os.environ}):
            results["http"] = await race_fields_over_http(engine, url, args.http, prefix=f"{run}-h")
        report(target, "http", results["http"], started)
        started = time.perf_counter()
        results["delete"] = await race_update_and_delete(
            engine, args.deletes, prefix=f"{run}-d", seed=args.seed
        )
        report(target, "delete", results["delete"], started)
    return results


def report(target: str, race: str, tally: Tally, started: float) -> None:
    """Print one race's counts."""
    backend = "postgresql" if target.startswith("postgresql") else "sqlite"
    print(
        f"{backend:10} {race:9} trials {tally.trials:5}  updates {tally.updates:6}  "
        f"deletes {tally.deletes:5}  lost {tally.lost}  duplicate events "
        f"{tally.duplicate_events}  missing events {tally.missing_events}  resurrected "
        f"{tally.resurrected}  ({time.perf_counter() - started:.1f} s)",
        flush=True,
    )


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", action="append", required=True, help="database path or URL")
    parser.add_argument("--tasks", type=int, default=500, help="trials of racing tasks")
    parser.add_argument("--processes", type=int, default=20, help="trials of racing processes")
    parser.add_argument("--rounds", type=int, default=25, help="updates per process and trial")
    parser.add_argument("--http", type=int, default=200, help="trials of racing PUTs")
    parser.add_argument("--deletes", type=int, default=1000, help="trials of update vs delete")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    run = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    results: dict[str, Any] = {
        "date": run,
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpus",
        "python": platform.python_version(),
        "args": vars(args),
        "targets": {},
    }
    faults = 0
    for target in args.target:
        tallies = await run_target(target, args, run)
        results["targets"][target.split("@")[-1]] = {k: asdict(v) for k, v in tallies.items()}
        faults += sum(sum(t.faults().values()) for t in tallies.values())
    out = RESULTS_DIR / f"races-{run}.json"
    out.write_text(json.dumps(results, indent=2))
    print(f"faults: {faults}; results in {out}")
    return 1 if faults else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
