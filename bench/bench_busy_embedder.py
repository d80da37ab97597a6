"""Writes while the embeddings server is rate-limiting: how long each ``memorize`` takes, how
many are stored without a vector, and how soon after the server recovers every memory has one.

The engine embeds through ``OpenAIEmbedder`` against the local OpenAI-protocol test server
(``tests/helpers/openai_server.py``), which answers every embeddings request with 429 and
``Retry-After`` for ``--outage-s`` seconds, then recovers. ``--writes`` episodic memorize calls
run one after another from the start of the outage on. Run from the repository root::

    PYTHONPATH=src:. python bench/bench_busy_embedder.py --outage-s 5 --budget-s 30
    PYTHONPATH=src:. python bench/bench_busy_embedder.py --outage-s 10 --budget-s 1
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_common import percentiles

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.retry import RetryPolicy
from engramdb.engine import EngineConfig
from engramdb.index.openai_embedder import OpenAIEmbedder
from tests.helpers.openai_server import FakeChatServer, make_handler, serving


async def run(args: argparse.Namespace, base_url: str, fake: FakeChatServer) -> dict[str, Any]:
    policy = RetryPolicy(attempts=6, base_delay_s=0.5, max_delay_s=8.0, max_elapsed_s=args.budget_s)
    embedder = OpenAIEmbedder(
        "fake-embed", dimensions=fake.dimensions, base_url=base_url, retry=policy
    )
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "busy.db"
        async with engramdb.open(path, config=EngineConfig(embedder=embedder)) as engine:
            engine.indexer.pending.retry_interval_s = args.catch_up_s
            memory = engine.scope(tenant="bench", user="alice").episodic
            fake.outage("embeddings", args.outage_s, retry_after=args.retry_after)
            recovered_at = time.monotonic() + args.outage_s
            latencies = []
            for n in range(args.writes):
                started = time.perf_counter()
                await memory.memorize(MemoryItem(text=f"note {n}: the user said thing {n}"))
                latencies.append(time.perf_counter() - started)
            writes_done_at = time.monotonic()
            stored = len(await memory.records())
            deferred = await engine.reindex_total(stale_only=True)
            give_up = time.monotonic() + args.outage_s + 600
            while await engine.reindex_total(stale_only=True):
                if time.monotonic() > give_up:
                    raise SystemExit("the deferred memories were never embedded")
                await asyncio.sleep(0.01)
            # From the later of the server's recovery and the last write: the catch-up's lag.
            embedded_after_s = max(0.0, time.monotonic() - max(recovered_at, writes_done_at))
            vectors = sum((await engine.vector_counts()).values())
    return {
        "writes": args.writes,
        "outage_s": args.outage_s,
        "retry_after": args.retry_after,
        "budget_s": args.budget_s,
        "acknowledged": len(latencies),
        "stored": stored,
        "stored_without_vector": deferred,
        "vectors_at_end": vectors,
        "writes_took_s": round(writes_done_at - recovered_at + args.outage_s, 3),
        "all_embedded_after_recovery_s": round(embedded_after_s, 3),
        "write_latency_ms": {k: round(v, 1) for k, v in percentiles(latencies).items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--outage-s", type=float, default=5.0)
    parser.add_argument("--retry-after", default="1")
    parser.add_argument("--budget-s", type=float, default=30.0, help="RetryPolicy.max_elapsed_s")
    parser.add_argument("--catch-up-s", type=float, default=5.0, help="first catch-up pause")
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # one warning per deferred write would drown the result
    fake = FakeChatServer("", dimensions=64)
    with serving(make_handler(fake)) as base_url:
        fake.base_url = base_url
        print(json.dumps(asyncio.run(run(args, base_url, fake)), indent=2))


if __name__ == "__main__":
    main()
