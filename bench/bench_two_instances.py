"""How soon a write through one ``engram serve`` is found through another on the same
PostgreSQL database.

Starts two service processes on one database, then ``--writes`` times: logs an interaction
with a unique word through instance A and polls instance B's episodic search (and, every
fifth time, its graph search for an entity written through A) until the write is found.
Prints the lag p50 / p95 / max from A's acknowledgement to B's first answer holding it.

Run by hand (not in CI)::

    python bench/bench_two_instances.py --writes 200

``--server`` is the PostgreSQL server (a new database is created on it and dropped after).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]


@contextmanager
def database(server: str) -> Iterator[str]:
    """A new, empty database on ``server``, dropped afterwards; its URL."""
    name = f"engram_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def instance(url: str, log: Path) -> Iterator[str]:
    """``engram serve`` (local auth) on ``url``; its base URL once it answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "engramdb.cli", "--db", url, "serve", "--port", str(port)]
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, env={**os.environ}, cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(log.read_text(errors="replace"))
                time.sleep(0.2)
            yield base
        finally:
            process.terminate()
            process.wait(30)


def lag_of_one(a: httpx.Client, b: httpx.Client, n: int, graph: bool) -> float:
    """Seconds from A acknowledging write ``n`` to B finding it."""
    word = f"zq{uuid.uuid4().hex[:10]}"
    if graph:
        body = {"name": f"Person{word}", "entity_type": "person"}
        a.post("/v1/memory/graph/entities", json=body).raise_for_status()
        path, params = "/v1/memory/graph/search", {"q": f"Person{word}"}
    else:
        body = {"role": "user", "content": f"note {n}: {word}"}
        a.post("/v1/memory/episodic", json=body).raise_for_status()
        path, params = "/v1/memory/episodic/search", {"q": word}
    acknowledged = time.perf_counter()
    while True:
        answer = b.get(path, params=params)
        answer.raise_for_status()
        if word in answer.text:
            return time.perf_counter() - acknowledged
        if time.perf_counter() - acknowledged > 30:
            raise RuntimeError(f"write {n} not found through the other instance after 30 s")
        time.sleep(0.005)


def measure(url: str, writes: int, logs: Path) -> dict[str, list[float]]:
    lags: dict[str, list[float]] = {"episodic": [], "graph": []}
    with ExitStack() as stack:
        base_a = stack.enter_context(instance(url, logs / "a.log"))
        base_b = stack.enter_context(instance(url, logs / "b.log"))
        a = stack.enter_context(httpx.Client(base_url=base_a, timeout=30))
        b = stack.enter_context(httpx.Client(base_url=base_b, timeout=30))
        for n in range(writes):
            graph = n % 5 == 4
            lags["graph" if graph else "episodic"].append(lag_of_one(a, b, n, graph))
    return lags


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as logs, database(args.server) as url:
        lags = measure(url, args.writes, Path(logs))
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    for kind, values in lags.items():
        ms = [v * 1000 for v in values]
        print(
            f"{kind:9} n={len(ms):4}  lag p50 {statistics.median(ms):6.1f} ms  "
            f"p95 {quantile(ms, 0.95):6.1f} ms  max {max(ms):6.1f} ms"
        )


if __name__ == "__main__":
    main()
