"""Load benchmark of the REST service: N concurrent SDK clients against a real ``engram serve``.

Starts ``engram serve`` (local mode, one process unless ``--workers``) on a free loopback
port with a fresh SQLite file (or, with ``--postgres SERVER_URL``, a throwaway database
created on that PostgreSQL server and dropped afterwards), then runs ``--clients`` concurrent
``MemoryClient`` loops for ``--seconds``. Each client acts as its own user and draws its next
operation at random: 40 % episodic writes (``log_interaction``), 20 % semantic writes
(``store_knowledge``), 25 % episodic searches and 15 % semantic searches. Every call's latency
is recorded, per kind.

After the run the server is stopped and the database opened directly: every write the
service acknowledged must be stored (looked up by the id it returned), so the count of lost
writes is measured, not assumed.

The CPU seconds the server process (all its threads) and, with ``--postgres``, the database's
own server processes spent during the run are read from ``/proc`` and reported per operation:
on a machine shared with other work the operation count follows the share of the cores the
run got, the CPU spent per operation much less so.

Run by hand (not in CI)::

    python bench/bench_service_load.py --clients 8 --seconds 30
    python bench/bench_service_load.py --clients 8 --seconds 30 --no-vectors
    python bench/bench_service_load.py --clients 8 --seconds 30 \
        --postgres postgresql://postgres@127.0.0.1:5432/postgres
    python bench/bench_service_load.py --clients 50 --seconds 30 --workers 2 \
        --postgres postgresql://postgres@127.0.0.1:5432/postgres

Results are printed as a table and written as JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from bench_common import percentiles, save_result
from rich.console import Console
from rich.table import Table

import engramdb
from engramdb.client import MemoryClient
from engramdb.engine import EngineConfig
from engramdb.service.settings import LOCAL_TENANT

MIX = (
    ("episodic.write", 40),
    ("semantic.write", 20),
    ("episodic.search", 25),
    ("semantic.search", 15),
)
WORDS = (
    "invoice billing refund lisbon cat miso garden coffee meeting deadline report travel "
    "flight hotel budget python database memory agent plan research summary weekend"
).split()


@dataclass
class ClientLog:
    """What one client did: latencies per kind, acknowledged write ids, failures."""

    user: str
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    episodes: list[str] = field(default_factory=list)
    facts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14)))


async def run_client(url: str, user: str, deadline: float, seed: int) -> ClientLog:
    rng = random.Random(seed)
    kinds = [kind for kind, weight in MIX for _ in range(weight)]
    log = ClientLog(user)
    async with MemoryClient(url, user_id=user, agent_id="bench", timeout=60) as client:
        while time.monotonic() < deadline:
            kind = rng.choice(kinds)
            started = time.perf_counter()
            try:
                if kind == "episodic.write":
                    log.episodes.append((await client.log_interaction("user", sentence(rng))).id)
                elif kind == "semantic.write":
                    log.facts.append((await client.store_knowledge(sentence(rng))).id)
                elif kind == "episodic.search":
                    await client.search_interactions(sentence(rng), limit=10)
                else:
                    await client.search_knowledge(sentence(rng), limit=10)
            except engramdb.EngramError as exc:
                log.errors.append(f"{kind}: {type(exc).__name__}: {exc}")
                continue
            log.latencies[kind].append(time.perf_counter() - started)
    return log


async def count_stored(db: str, logs: list[ClientLog]) -> dict[str, int]:
    """How many acknowledged writes are in the database, and how many are missing."""
    acked = stored = 0
    async with engramdb.open(db, config=EngineConfig(embedder=None)) as engine:
        for log in logs:
            memory = engine.scope(tenant=LOCAL_TENANT, user=log.user, agent="bench")
            pairs = (
                (memory.episodic.provider, log.episodes),
                (memory.semantic.provider, log.facts),
            )
            for provider, ids in pairs:
                # A fact written twice with the same text has one key: count distinct ids.
                for key in set(ids):
                    acked += 1
                    stored += await provider.read(key) is not None
    return {"acknowledged": acked, "stored": stored, "lost": acked - stored}


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, every thread) process ``pid`` has used, 0 once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def database_pids(db: str) -> list[int]:
    """The PostgreSQL server processes serving connections to ``db`` (none for SQLite)."""
    if not db.startswith("postgresql://"):
        return []
    name = urlsplit(db).path.lstrip("/")
    server = urlunsplit(urlsplit(db)._replace(path="/postgres"))
    with psycopg.connect(server, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchall()
    return [int(pid) for (pid,) in rows]


class CpuMeter:
    """CPU seconds spent between ``start`` and ``stop`` by the server and its database."""

    def __init__(self, server: int, db: str) -> None:
        self.server, self.db = server, db
        self.before: dict[int, float] = {}
        self.spent = {"server": 0.0, "database": 0.0}

    def _sample(self) -> dict[int, float]:
        return {pid: cpu_seconds(pid) for pid in [self.server, *database_pids(self.db)]}

    def start(self) -> None:
        self.before = self._sample()

    def stop(self) -> None:
        for pid, spent in self._sample().items():
            used = spent - self.before.get(pid, 0.0)
            self.spent["server" if pid == self.server else "database"] += used


@contextmanager
def database(tmp: Path, postgres: str | None) -> Iterator[str]:
    """A fresh database: a SQLite file in ``tmp``, or a throwaway database on the PostgreSQL
    server ``postgres`` (dropped afterwards)."""
    if postgres is None:
        yield str(tmp / "service.db")
        return
    name = f"engram_bench_{os.getpid()}"
    create = f'CREATE DATABASE "{name}"'
    drop = f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'
    with psycopg.connect(postgres, autocommit=True) as conn:
        conn.execute(drop)
        conn.execute(create)
    parts = urlsplit(postgres)
    try:
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        with psycopg.connect(postgres, autocommit=True) as conn:
            conn.execute(drop)


def start_server(
    db: str, logs: Path, port: int, vectors: bool, workers: int
) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "engramdb.cli", "--db", db, "serve"]
    args += ["--host", "127.0.0.1", "--port", str(port)]
    if workers > 1:  # only when asked, so the script also measures builds without the option
        args += ["--workers", str(workers)]
    if not vectors:
        args.append("--no-vectors")
    log = (logs / "serve.log").open("wb")  # a file, not a pipe nobody drains
    server = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"engram serve exited: {(logs / 'serve.log').read_text()}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError("engram serve did not start in 120 s")


async def bench(
    clients: int, seconds: float, vectors: bool, postgres: str | None, workers: int = 1
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, database(Path(tmp), postgres) as db:
        port = free_port()
        server = start_server(db, Path(tmp), port, vectors, workers)
        meter = CpuMeter(server.pid, db)
        try:
            meter.start()
            started = time.monotonic()
            logs = await asyncio.gather(
                *(
                    run_client(f"http://127.0.0.1:{port}", f"user-{n}", started + seconds, n)
                    for n in range(clients)
                )
            )
            elapsed = time.monotonic() - started
            meter.stop()
        finally:
            server.terminate()
            server.wait(timeout=60)
        durability = await count_stored(db, logs)
    merged: dict[str, list[float]] = defaultdict(list)
    for log in logs:
        for kind, samples in log.latencies.items():
            merged[kind] += samples
    everything = [s for samples in merged.values() for s in samples]
    errors = [e for log in logs for e in log.errors]
    return {
        "backend": "postgresql" if postgres else "sqlite",
        "clients": clients,
        "seconds": round(elapsed, 2),
        "vectors": vectors,
        "workers": workers,
        "operations": len(everything),
        "throughput_ops_s": round(len(everything) / elapsed, 1),
        "latency_ms": {
            "all": percentiles(everything),
            **{kind: percentiles(samples) for kind, samples in sorted(merged.items())},
        },
        "counts": {kind: len(samples) for kind, samples in sorted(merged.items())},
        "cpu_s": {kind: round(spent, 2) for kind, spent in meter.spent.items()},
        "cpu_ms_per_op": {
            kind: round(spent * 1e3 / max(1, len(everything)), 2)
            for kind, spent in meter.spent.items()
        },
        "errors": len(errors),
        "error_samples": errors[:5],
        "durability": durability,
    }


def show(result: dict[str, Any]) -> None:
    table = Table(
        title=f"{result['backend']}, {result['workers']} worker(s), {result['clients']} clients, "
        f"{result['seconds']} s, vectors "
        f"{'on' if result['vectors'] else 'off'}: {result['throughput_ops_s']} ops/s"
    )
    for column in ("operation", "count", "p50 ms", "p95 ms", "p99 ms", "max ms"):
        table.add_column(column, justify="right" if column != "operation" else "left")
    for kind, cut in result["latency_ms"].items():
        count = result["operations"] if kind == "all" else result["counts"][kind]
        table.add_row(kind, str(count), *(f"{cut[p]:.1f}" for p in ("p50", "p95", "p99", "max")))
    console = Console()
    console.print(table)
    console.print(f"errors: {result['errors']}   durability: {result['durability']}")
    console.print(f"CPU ms per operation: {result['cpu_ms_per_op']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--no-vectors", action="store_true", help="serve without the embedder")
    parser.add_argument(
        "--postgres",
        metavar="SERVER_URL",
        help="serve a throwaway database on this PostgreSQL server instead of SQLite",
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="engram serve --workers (above 1: PostgreSQL)"
    )
    options = parser.parse_args()
    result = asyncio.run(
        bench(
            options.clients,
            options.seconds,
            not options.no_vectors,
            options.postgres,
            options.workers,
        )
    )
    show(result)
    save_result("service-load", result)


if __name__ == "__main__":
    main()
