"""One ``episodic.memorize`` per LongMemEval turn, then ``remember``: what a caller waits for.

The first ``--turns`` turns of ``longmemeval_s_cleaned.json.xz`` (its haystacks' sessions in
file order, each turn with its role and session date) are memorized one at a time into one
user of a fresh store, with the default MiniLM model; then the first ``--questions``
questions of the file are asked of that user with ``episodic.remember`` (``limit=10``). The
first remember is reported on its own: it is the one that waits for the part (sentence)
vectors still owed by the writes before it (``providers.deferred_parts``).

To compare two source trees, run it with each on ``PYTHONPATH``, alternating::

    for round in 1 2; do for src in /work/main/src src; do
      PYTHONPATH=$src python bench/bench_memorize_turns.py --backend sqlite --turns 300
    done; done

``--backend postgresql`` uses a scratch database on ``--postgres`` (dropped after);
``--backend langgraph-inmemory`` times LangGraph's ``InMemoryStore`` (``aput`` / ``asearch``)
on the same turns, embedding with the same model, as the peer to compare with;
``--backend langgraph-sqlite`` its ``AsyncSqliteStore`` on a file, durable as Engram is (it needs
``pip install langgraph-checkpoint-sqlite``, and ``pysqlite3-binary`` where Python's own
``sqlite3`` cannot load ``sqlite-vec``); ``--backend langgraph-postgres`` its
``AsyncPostgresStore`` in a scratch database on ``--postgres`` (``pip install
langgraph-checkpoint-postgres``). The peer embeds
each turn's bare text; with ``--peer-speaker`` it embeds what Engram embeds, the text after its
speaker (``user: …``), so the two do the same model work.

Separate runs of a few minutes each drift by more than the difference being measured on a
shared machine (the peer's p50 moved 32–40 ms between runs of one hour here).
``--interleave N`` runs Engram (``--backend sqlite`` or ``postgresql``) and the peer in one
process, taking turns by blocks of N turns (``--peer`` names the peer's store), and reports
the median over block pairs of Engram's block p50 minus the peer's, and over turns of Engram's
time minus the peer's for the same turn: see ``interleaved_run`` for what is settled between
blocks. ``--think-ms T`` waits T ms after each call on both sides, as an agent waits for its
model between turns. Where the background waits for a pause in the writes before it computes
(up to 10 s, on PostgreSQL), keep a block well over that long, or the blocks show little of it
at work.
Results are printed and written as JSON to ``bench/results/`` (git-ignored).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import lzma
import statistics
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import psycopg
from bench_common import percentiles, save_result
from rich.console import Console
from rich.table import Table

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.evaluation.datasets import parse_longmemeval_date
from engramdb.index.contextual import episode_key

DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")


def load(path: Path, turns: int, questions: int) -> tuple[list[MemoryItem], list[str]]:
    """The first ``turns`` turns and the first ``questions`` questions of the file."""
    with lzma.open(path) as compressed:
        records: list[dict[str, Any]] = json.loads(compressed.read())
    items: list[MemoryItem] = []
    for record in records:
        for date, session in zip(
            record["haystack_dates"], record["haystack_sessions"], strict=True
        ):
            when: datetime = parse_longmemeval_date(date)
            items += [
                MemoryItem(text=t["content"], role=t["role"], occurred_at=when) for t in session
            ]
        if len(items) >= turns:
            break
    return items[:turns], [record["question"] for record in records[:questions]]


async def timed_run(target: str, items: list[MemoryItem], prompts: list[str]) -> dict[str, Any]:
    async with engramdb.open(target) as engine:
        memory = engine.scope(tenant="bench", user="u")
        await memory.episodic.memorize(MemoryItem(text="Warm up. The model loads now."))
        await memory.episodic.remember("warm up")
        writes = []
        for item in items:
            began = time.perf_counter()
            await memory.episodic.memorize(item)
            writes.append(time.perf_counter() - began)
        reads = []
        for prompt in prompts:
            began = time.perf_counter()
            await memory.episodic.remember(prompt, limit=10)
            reads.append(time.perf_counter() - began)
        began = time.perf_counter()
    closed = time.perf_counter() - began
    return {
        "memorize_ms": percentiles(writes),
        "first_remember_ms": reads[0] * 1e3,
        "remember_ms": percentiles(reads[1:]),
        "close_ms": closed * 1e3,
    }


#: The peers' stores: LangGraph's ``InMemoryStore`` (a dict); its ``AsyncSqliteStore`` on a file
#: (``langgraph-checkpoint-sqlite``, vectors in ``sqlite-vec``) and ``AsyncPostgresStore`` in a
#: scratch database (``langgraph-checkpoint-postgres``, vectors in pgvector), durable as Engram is.
PEERS = ("inmemory", "sqlite", "postgres")
PeerPut = Callable[[MemoryItem], Awaitable[None]]
PeerSearch = Callable[[str], Awaitable[Any]]


def _sqlite_peer_class() -> Any:
    """LangGraph's ``AsyncSqliteStore``. Where this Python's ``sqlite3`` was built without
    loadable extensions (``sqlite-vec`` is one), the store's modules are imported over
    ``pysqlite3``'s, which has them; every later import, Engram's too, gets Python's own."""
    import sqlite3
    import sys

    if not hasattr(sqlite3.connect(":memory:"), "enable_load_extension"):
        try:
            import pysqlite3
        except ImportError:
            raise SystemExit(
                "this Python's sqlite3 cannot load extensions: pip install pysqlite3-binary"
            ) from None
        if "aiosqlite" in sys.modules:
            raise SystemExit("aiosqlite was imported before the peer's sqlite3 could be chosen")
        sys.modules["sqlite3"] = pysqlite3
    try:
        from langgraph.store.sqlite.aio import AsyncSqliteStore
    finally:
        sys.modules["sqlite3"] = sqlite3
    return AsyncSqliteStore


@asynccontextmanager
async def peer_store(
    speaker: bool = False,
    kind: str = "inmemory",
    server: str = "postgresql://postgres@127.0.0.1:5432",
) -> AsyncIterator[tuple[PeerPut, PeerSearch]]:
    """A LangGraph store of ``kind`` (``PEERS``; ``postgres`` on ``server``) whose index embeds
    each turn's text with the same MiniLM model (one vector per turn): its ``put`` and
    ``search`` of one turn. ``speaker``: it embeds the text after its speaker, as Engram
    embeds a turn."""
    from langgraph.store.memory import InMemoryStore

    from engramdb.index import MiniLMEmbedder

    async with AsyncExitStack() as stack:
        model = MiniLMEmbedder()
        stack.callback(model.close)
        await model.load()

        async def embed(texts: Any) -> list[list[float]]:
            return [[float(x) for x in row] for row in await model.embed(list(texts))]

        index: Any = {"dims": model.dimensions, "embed": embed, "fields": ["text"]}
        if kind == "inmemory":
            store: Any = InMemoryStore(index=index)
        else:
            if kind == "sqlite":
                folder = stack.enter_context(tempfile.TemporaryDirectory())
                opening = _sqlite_peer_class().from_conn_string(
                    str(Path(folder) / "peer.db"), index=index
                )
            else:
                from langgraph.store.postgres.aio import AsyncPostgresStore

                url = stack.enter_context(scratch_target("postgresql", server, "writefast_peer_"))
                opening = AsyncPostgresStore.from_conn_string(url, index=index)
            store = await stack.enter_async_context(opening)
            await store.setup()
        namespace = ("bench", "u")
        await store.aput(namespace, "warm", {"text": "Warm up. The model loads now."})
        keys = itertools.count()

        async def put(item: MemoryItem) -> None:
            text = episode_key(item.text, role=item.role) if speaker else item.text
            await store.aput(namespace, str(next(keys)), {"text": text, "role": item.role})

        async def search(prompt: str) -> Any:
            return await store.asearch(namespace, query=prompt, limit=10)

        yield put, search


async def peer_run(
    items: list[MemoryItem], prompts: list[str], speaker: bool, kind: str, server: str
) -> dict[str, Any]:
    """The same turns into a LangGraph store of ``kind`` (``aput``, ``asearch``)."""
    writes, reads = [], []
    async with peer_store(speaker, kind, server) as (put, search):
        for item in items:
            writes.append(await _timed(put(item)))
        for prompt in prompts:
            reads.append(await _timed(search(prompt)))
    return {
        "memorize_ms": percentiles(writes),
        "first_remember_ms": reads[0] * 1e3,
        "remember_ms": percentiles(reads[1:]),
        "close_ms": 0.0,
    }


async def _timed(call: Awaitable[Any]) -> float:
    began = time.perf_counter()
    await call
    return time.perf_counter() - began


def _spread(values: list[float]) -> dict[str, float]:
    """The median and quartiles of ``values``."""
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return {"median": statistics.median(values), "q1": q1, "q3": q3}


async def _thinking(call: Awaitable[Any], think_s: float) -> float:
    """``call``'s time, then a wait of ``think_s`` (not timed)."""
    spent = await _timed(call)
    if think_s:
        await asyncio.sleep(think_s)
    return spent


async def interleaved_run(
    target: str,
    items: list[MemoryItem],
    block: int,
    speaker: bool,
    think_s: float = 0.0,
    kind: str = "inmemory",
    server: str = "postgresql://postgres@127.0.0.1:5432",
) -> dict[str, Any]:
    """Engram's ``memorize`` and the peer's ``put`` of the same turns in one process, taking
    turns by blocks of ``block`` turns (which of the two goes first alternates): a machine
    whose speed drifts over minutes slows both alike. Before each block of the peer's, the
    sentence vectors Engram still owes are computed (a ``remember``, not timed), so that the
    peer's puts never share the cores with Engram's work; Engram's blocks run as they would
    alone. ``think_s``: both sides wait that long after each call (not timed), as an agent
    waits for its model between turns; Engram's background works in those waits.

    Reported: both p50s; the median over block pairs of Engram's block p50 minus the peer's;
    and the median over turns of Engram's time minus the peer's for the same turn, which
    does not jump with where a block's median falls between short and long turns."""
    async with peer_store(speaker, kind, server) as (put, _), engramdb.open(target) as engine:
        memory = engine.scope(tenant="bench", user="u")
        await memory.episodic.memorize(MemoryItem(text="Warm up. The model loads now."))
        await memory.episodic.remember("warm up")
        ours: list[float] = []
        theirs: list[float] = []
        gaps: list[float] = []
        for number, start in enumerate(range(0, len(items), block)):
            chunk = items[start : start + block]
            mine: list[float] = []
            peer: list[float] = []
            for side in ("ours", "peer") if number % 2 == 0 else ("peer", "ours"):
                if side == "ours":
                    mine = [
                        await _thinking(memory.episodic.memorize(item), think_s) for item in chunk
                    ]
                    await memory.episodic.remember("what is still owed is computed now")
                else:
                    peer = [await _thinking(put(item), think_s) for item in chunk]
            ours += mine
            theirs += peer
            gaps.append((statistics.median(mine) - statistics.median(peer)) * 1e3)
    turn_gaps = [(a - b) * 1e3 for a, b in zip(ours, theirs, strict=True)]
    return {
        "memorize_ms": percentiles(ours),
        "peer_put_ms": percentiles(theirs),
        "block": block,
        "think_ms": think_s * 1e3,
        "turn_gap_ms": _spread(turn_gaps),
        "block_gap_ms": {**_spread(gaps), "blocks": len(gaps)},
    }


@contextmanager
def scratch_target(backend: str, server: str, prefix: str) -> Iterator[str]:
    """A fresh store of ``backend``: a file in a temporary folder, or a scratch database on
    ``server`` (dropped after)."""
    if backend == "sqlite":
        with tempfile.TemporaryDirectory() as folder:
            yield str(Path(folder) / "bench.db")
        return
    name = f"{prefix}{uuid.uuid4().hex[:8]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{server}/{name}"
    finally:
        with psycopg.connect(f"{server}/postgres", autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


async def run(options: argparse.Namespace, items: list[MemoryItem], prompts: list[str]) -> Any:
    if options.backend.startswith("langgraph-"):
        kind = options.backend.removeprefix("langgraph-")
        return await peer_run(items, prompts, options.peer_speaker, kind, options.postgres)
    with scratch_target(options.backend, options.postgres, options.prefix) as target:
        if options.interleave:
            return await interleaved_run(
                target,
                items,
                options.interleave,
                options.peer_speaker,
                options.think_ms / 1e3,
                options.peer,
                options.postgres,
            )
        return await timed_run(target, items, prompts)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--backend",
        choices=("sqlite", "postgresql", *(f"langgraph-{peer}" for peer in PEERS)),
        default="sqlite",
    )
    parser.add_argument("--turns", type=int, default=5882)
    parser.add_argument("--questions", type=int, default=50)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument(
        "--prefix", default="writefast_bench_", help="The scratch database's name before its id."
    )
    parser.add_argument(
        "--peer-speaker",
        action="store_true",
        help="The peer embeds each turn after its speaker (user: ...), as Engram does.",
    )
    parser.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="N",
        help="Engram and the peer in one process, taking turns by blocks of N turns.",
    )
    parser.add_argument(
        "--peer",
        choices=PEERS,
        help="With --interleave: the LangGraph store to compare with (inmemory unless given).",
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=0.0,
        metavar="T",
        help="With --interleave: both sides wait T ms after each call (not timed).",
    )
    options = parser.parse_args()
    if (options.think_ms or options.peer) and not options.interleave:
        parser.error("--think-ms and --peer go with --interleave")
    options.peer = options.peer or "inmemory"
    if not 0 <= options.think_ms <= 60_000:
        parser.error("--think-ms takes 0 to 60000 ms")
    if options.interleave and options.backend.startswith("langgraph-"):
        parser.error("--interleave compares Engram on --backend sqlite or postgresql to the peer")
    if not options.interleave and (options.turns < 2 or options.questions < 3):
        parser.error("--turns takes at least 2 and --questions at least 3 (the first is apart)")
    if options.interleave < 0 or (options.interleave and options.turns < 2 * options.interleave):
        parser.error("--interleave N takes N >= 1 and at least two blocks of turns (--turns)")
    items, prompts = load(options.data, options.turns, options.questions)
    figures = asyncio.run(run(options, items, prompts))
    source = str(Path(engramdb.__file__).parents[1])
    peer = f", against langgraph-{options.peer}" if options.interleave else ""
    backend = options.backend + peer + (" (user: text)" if options.peer_speaker else "")
    table = Table(title=f"{source}, {backend}, {len(items)} turns, {len(prompts)} prompts")
    for column in ("call", "p50 ms", "p95 ms", "mean ms"):
        table.add_column(column, justify="left" if column == "call" else "right")
    calls = ("memorize_ms", "peer_put_ms") if options.interleave else ("memorize_ms", "remember_ms")
    for call in calls:
        cut = figures[call]
        table.add_row(call[:-3], *(f"{cut[p]:.1f}" for p in ("p50", "p95", "mean")))
    Console().print(table)
    if options.interleave:
        gap = figures["block_gap_ms"]
        print(
            f"memorize minus the peer's put, median over {gap['blocks']} blocks of "
            f"{options.interleave}: {gap['median']:+.2f} ms (quartiles {gap['q1']:+.2f} / "
            f"{gap['q3']:+.2f})"
        )
        turn = figures["turn_gap_ms"]
        print(
            f"memorize minus the peer's put of the same turn, median over {len(items)} turns: "
            f"{turn['median']:+.2f} ms (quartiles {turn['q1']:+.2f} / {turn['q3']:+.2f})"
        )
    else:
        print(
            f"first remember {figures['first_remember_ms']:.0f} ms, "
            f"close {figures['close_ms']:.0f} ms"
        )
    save_result(
        "memorize-turns",
        {
            "source": source,
            "backend": options.backend,
            "peer_speaker": options.peer_speaker,
            "interleave": options.interleave,
            "peer": options.peer if options.interleave else None,
            "turns": len(items),
            **figures,
        },
    )


if __name__ == "__main__":
    main()
