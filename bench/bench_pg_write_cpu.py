"""The PostgreSQL server's CPU time per write as one partition grows: each LongMemEval turn
committed alone (``PostgresBackend.commit``: the record with its whole-text vector), then its
sentence vectors stored (``search.put_vectors``, the update ``providers.deferred_parts``
makes after a write), the database's server processes' CPU read from ``/proc``.

Wall time on a shared machine follows the share of the cores a run gets; the CPU the server
spends per write much less so, which makes this the figure to compare two source trees by,
alternating::

    for round in 1 2; do for src in /work/main/src src; do
      PYTHONPATH=$src python bench/bench_pg_write_cpu.py --steps 3 --writes 500
    done; done

The script creates its own database on ``--postgres`` and drops it afterwards; it must run on
the database's machine. Run by hand (not in CI).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import psycopg
from bench_memorize_turns import DATA, load

import engramdb
from engramdb.core.scope import Scope
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.records import Put, Record

MODEL = "bench-model"
VECTOR = struct.pack("384f", *(n % 7 / 7 for n in range(384)))
PARTS = VECTOR * 3


def server_cpu_s(admin: psycopg.Connection[tuple[object, ...]], database: str) -> float:
    """User and system CPU seconds of the server processes connected to ``database``."""
    pids = admin.execute(
        "SELECT pid FROM pg_stat_activity WHERE datname = %s", (database,)
    ).fetchall()
    ticks = 0
    for (pid,) in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


async def step(backend: PostgresBackend, texts: list[str], first: int) -> None:
    scope = Scope(tenant="bench", user="u")
    for n, text in enumerate(texts, first):
        record = Record(
            "episodic", scope, f"turn-{n}", {"text": text}, "text", {},
            datetime.now(UTC), text=text,
        )  # fmt: skip
        result = await backend.commit([Put(record, VECTOR, MODEL)], [])
        stored = result.stored[0].id
        assert stored is not None
        await backend.search.put_vectors(MODEL, [(stored, VECTOR)], [], parts=[PARTS])


async def run(server: str, prefix: str, steps: int, writes: int) -> None:
    items, _ = load(DATA, writes, 1)
    texts = [item.text for item in items]
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
        try:
            backend = await PostgresBackend.open(f"{server}/{name}", min_size=1, max_size=1)
            print(f"{Path(engramdb.__file__).parents[1]}")
            for n in range(steps):
                cpu, began = server_cpu_s(admin, name), time.perf_counter()
                await step(backend, texts, n * writes)
                spent = server_cpu_s(admin, name) - cpu
                wall = time.perf_counter() - began
                print(
                    f"records {n * writes:>6,}-{(n + 1) * writes:<6,} server CPU "
                    f"{spent * 1e3 / writes:5.2f} ms/write, "
                    f"wall {wall * 1e3 / writes:5.2f} ms/write"
                )
            await backend.close()
        finally:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--writes", type=int, default=500, help="writes per step")
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument("--prefix", default="pgwrite_cpu_", help="the scratch database's name")
    options = parser.parse_args()
    asyncio.run(run(options.postgres, options.prefix, options.steps, options.writes))


if __name__ == "__main__":
    main()
