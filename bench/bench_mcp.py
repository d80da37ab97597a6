"""Latency of MCP tool calls through the SDK's client, per transport: in memory (the server in
the same process), over stdio (``engram mcp`` as a subprocess) and over streamable HTTP
(``/mcp`` of ``engram serve`` in local mode), each on a fresh SQLite file with the default
embedding model.

One client calls ``memorize`` (an episode) and then ``remember`` (episodic, limit 10) in turns,
one call at a time, after a few untimed calls that load the model; the figures are the
latency a model's tool call sees, the MCP framing and transport included. Run by hand (not in
CI)::

    python bench/bench_mcp.py --calls 200
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, ExitStack, asynccontextmanager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from bench_common import percentiles
from bench_recall import machine
from mcp import Client, StdioServerParameters
from rich.console import Console
from rich.table import Table

import engramdb
from engramdb.core.scope import Scope
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server

WORDS = "alice booked a trip to lisbon with her sister and paid for the hotel by card".split()
ENV = {**os.environ, "HF_HUB_OFFLINE": "1"}


def sentence(i: int) -> str:
    """A different short sentence for each call."""
    return " ".join(WORDS[(i * k) % len(WORDS)] for k in range(1, 9)) + f" (note {i})"


@asynccontextmanager
async def in_memory(folder: Path) -> AsyncIterator[Client]:
    async with engramdb.open(folder / "engram.db") as engine:
        binding = Binding(engine, Scope(tenant="bench", user="u"))
        async with Client(build_server(fixed(binding))) as client:
            yield client


@asynccontextmanager
async def over_stdio(folder: Path) -> AsyncIterator[Client]:
    args = ["-m", "engramdb.cli", "mcp", "--tenant", "bench", "--user", "u"]
    params = StdioServerParameters(
        command=sys.executable, args=[*args, "--db", str(folder / "engram.db")], env=ENV
    )
    async with Client(params, read_timeout_seconds=300) as client:
        yield client


@contextmanager
def engram_serve(folder: Path) -> Iterator[str]:
    """``engram serve`` (local mode) on a free port until the block ends: its URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    command = [sys.executable, "-m", "engramdb.cli", "--db", str(folder / "engram.db")]
    server = subprocess.Popen(
        [*command, "serve", "--port", str(port)], env=ENV, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise RuntimeError("engram serve did not start") from None
            time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        server.wait(timeout=60)


async def measure(
    connect: Callable[[], AbstractAsyncContextManager[Client]], calls: int, warm: int
) -> dict[str, Any]:
    """Time ``calls`` memorize and ``calls`` remember calls of a client ``connect`` makes."""
    async with connect() as client:
        timings: dict[str, list[float]] = {"memorize": [], "remember": []}
        for i in range(warm + calls):
            for tool, arguments in (
                ("memorize", {"type": "episodic", "text": sentence(i), "role": "user"}),
                ("remember", {"type": "episodic", "query": sentence(i + 7)}),
            ):
                started = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                spent = time.perf_counter() - started
                if result.is_error:
                    raise RuntimeError(f"{tool} failed: {result.content}")
                if i >= warm:
                    timings[tool].append(spent)
    return {tool: percentiles(samples) for tool, samples in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200, help="timed calls of each tool")
    parser.add_argument("--warm", type=int, default=5, help="untimed calls first")
    parser.add_argument("--json", type=Path, help="write the results here too")
    options = parser.parse_args()
    console = Console()
    results = {}
    for name in ("in memory", "stdio", "http"):
        with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
            where = Path(folder)
            connect: Callable[[], AbstractAsyncContextManager[Client]]
            if name == "in memory":
                connect = partial(in_memory, where)
            elif name == "stdio":
                connect = partial(over_stdio, where)
            else:
                url = stack.enter_context(engram_serve(where))
                connect = partial(Client, f"{url}/mcp", read_timeout_seconds=300)
            results[name] = asyncio.run(measure(connect, options.calls, options.warm))
    table = Table(title=f"MCP tool calls ({options.calls} of each, one at a time), ms")
    for column in ("transport", "tool", "p50", "p95", "p99", "mean"):
        table.add_column(column, justify="right" if column not in ("transport", "tool") else "left")
    for name, tools in results.items():
        for tool, cut in tools.items():
            table.add_row(name, tool, *(f"{cut[k]:.1f}" for k in ("p50", "p95", "p99", "mean")))
    console.print(table)
    report = {"machine": machine(), "calls": options.calls, "results": results}
    if options.json:
        options.json.write_text(json.dumps(report, indent=2))
    console.print_json(json.dumps(report["machine"]))


if __name__ == "__main__":
    main()
