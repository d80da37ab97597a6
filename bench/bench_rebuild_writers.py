"""How long writers wait while another process rebuilds the store.

Builds (or reuses) a store of ``--records`` episodes written through the public API, times
writes from this process for a few seconds with nothing else running, then starts
``engram --db TARGET rebuild --json`` as a second process and keeps writing (one
``manager.store`` every ``--interval`` seconds) until it exits. Reports the rebuild's time,
how many writes were made during it, how many failed, the longest and typical write waits,
and checks that every write made during the rebuild is there afterwards.

Run by hand (not in CI)::

    python bench/bench_rebuild_writers.py --target /tmp/rebuild-bench.db --records 100000

``--target`` may be a ``postgresql://`` URL. The store is kept between runs (build once).
Results are printed and written as JSON to ``bench/results/`` (git-ignored).
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench_common import percentiles

import engramdb
from engramdb.engine import EngineConfig

RESULTS_DIR = Path(__file__).resolve().parent / "results"
BATCH = 1000


async def build(engine: engramdb.Engine, records: int) -> None:
    """Write ``records`` episodes of one user (skipped when the store holds them)."""
    mem = engine.scope(tenant="acme", user="alice")
    have = (await engine.stats()).records
    for start in range(have, records, BATCH):
        await mem.episodic.memorize_many(
            [
                engramdb.MemoryItem(
                    text=f"turn {n}: we talked about the trip to Lisbon and kayak number {n % 97}",
                    role="user",
                )
                for n in range(start, min(records, start + BATCH))
            ]
        )
        print(f"\rbuilt {min(records, start + BATCH)}/{records}", end="", flush=True)
    print()


async def write_until(
    engine: engramdb.Engine, stop: Callable[[], bool], interval: float, tag: str
) -> tuple[list[float], list[str], int]:
    """Store a memory every ``interval`` s until ``stop()``; returns the waits, the keys
    acknowledged and how many writes failed."""
    manager = engine.scope(tenant="acme", user="writer").manager
    waits: list[float] = []
    keys: list[str] = []
    failed = 0
    while not stop():
        key = f"{tag}-{len(waits)}"
        sent = time.monotonic()
        try:
            await manager.store(key, "a write", tier=engramdb.MemoryTier.PERSISTENT)
            keys.append(key)
        except engramdb.EngramError as exc:
            failed += 1
            print(f"write failed after {time.monotonic() - sent:.1f} s: {exc}")
        waits.append(time.monotonic() - sent)
        await asyncio.sleep(interval)
    return waits, keys, failed


async def main(target: str, records: int, interval: float) -> dict[str, Any]:
    config = EngineConfig(embedder=None)
    async with engramdb.open(target, config=config) as engine:
        await build(engine, records)
        quiet_until = time.monotonic() + 5.0
        quiet, _, _ = await write_until(
            engine, lambda: time.monotonic() > quiet_until, interval, "quiet"
        )
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            "from engramdb.cli.app import main; main()",
            "--db",
            target,
            "rebuild",
            "--json",
            stdout=asyncio.subprocess.PIPE,
        )
        started = time.monotonic()
        output = asyncio.ensure_future(child.communicate())
        waits, keys, failed = await write_until(engine, output.done, interval, "during")
        stdout, _ = await output
        elapsed = time.monotonic() - started
        report = json.loads(stdout)
        manager = engine.scope(tenant="acme", user="writer").manager
        lost = [k for k in keys if await manager.read(k) is None]
    return {
        "target": target if target.startswith("postgresql") else "sqlite file",
        "records": records,
        "rebuild_process_s": elapsed,
        "rebuild_s": report["seconds"],
        "writes_during": len(waits),
        "writes_failed": failed,
        "writes_lost": len(lost),
        "wait_during_ms": percentiles(waits),
        "wait_quiet_ms": percentiles(quiet),
        "host": platform.node(),
        "cpus": os.cpu_count(),
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", required=True, help="SQLite path or postgresql:// URL")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--interval", type=float, default=0.05)
    args = parser.parse_args()
    result = asyncio.run(main(args.target, args.records, args.interval))
    print(json.dumps(result, indent=2))
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S")
    (RESULTS_DIR / f"rebuild_writers_{stamp}.json").write_text(json.dumps(result, indent=2))
    sys.exit(0 if not result["writes_failed"] and not result["writes_lost"] else 1)
