"""What hostile input costs: rule patterns that make a backtracking engine explode, and the
checks every write runs (NUL characters, lone surrogates, nesting depth).

1. ``(a+)+$`` against ``"a" * n + "!"``: Python's ``re`` (the engine rule triggers used
   before) for small ``n``, where its time doubles with each ``a``; RE2 (``core.patterns``)
   up to ``n`` = 1,000,000; and ``(x+x+)+y`` on ``"x" * n``, which RE2 must scan whole.
2. ``ProceduralMemory.remember`` on a SQLite store holding five such rules (one tenant's),
   prompt ``"a" * 40 + "!"``: the request that used to freeze the service.
3. ``normalize_value`` (the check and JSON form of every written value) on values of 1 MiB
   as text, as non-ASCII text and as 10,000 small records, against a bare ``json.dumps`` and
   UTF-8 encode of the same value (the work a write did before the checks).

Run by hand (not in CI)::

    python bench/bench_hostile_input.py
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.patterns import pattern_search
from engramdb.core.validation import normalize_value
from engramdb.engine import EngineConfig

EVIL = "(a+)+$"


def best_of(runs: int, work: Callable[[], Any]) -> float:
    """The least wall time of ``runs`` calls of ``work``, in milliseconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return min(times) * 1e3


def unchecked(value: Any) -> Any:
    """What a write did with a value before the checks: its JSON form, encoded, read back."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    len(text.encode())
    return json.loads(text)


def patterns() -> None:
    print("(a+)+$ on 'a' * n + '!'")
    compiled = re.compile(EVIL)
    for n in (16, 18, 20, 22):
        ms = best_of(1, partial(compiled.search, "a" * n + "!"))
        print(f"  re   n={n:>9,}: {ms:10.2f} ms")
    for n in (22, 40, 10_000, 1_000_000):
        text = "a" * n + "!"
        ms = best_of(5, partial(pattern_search, EVIL, text))
        print(f"  re2  n={n:>9,}: {ms:10.3f} ms")
    print("(x+x+)+y on 'x' * n (no match, so every start is tried)")
    for n in (10_000, 1_000_000):
        text = "x" * n
        ms = best_of(5, partial(pattern_search, "(x+x+)+y", text))
        print(f"  re2  n={n:>9,}: {ms:10.3f} ms")


async def remember() -> None:
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "bench.db"
        async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
            memory = engine.scope(tenant="mallory", user="m").procedural
            for i in range(5):
                rule = MemoryItem(text=f"evil {i}", metadata={"trigger": f"regex:{EVIL}"})
                await memory.memorize(rule)
            times = []
            for _ in range(50):
                started = time.perf_counter()
                await memory.remember("a" * 40 + "!")
                times.append(time.perf_counter() - started)
    cuts = statistics.quantiles(times, n=20)
    print(
        "remember('a' * 40 + '!') over 5 such rules, 50 calls: "
        f"p50 {statistics.median(times) * 1e3:.2f} ms, p95 {cuts[18] * 1e3:.2f} ms"
    )


def validation() -> None:
    print("normalize_value vs json.dumps + encode (best of 15)")
    values: dict[str, Any] = {
        "1 MiB ASCII text": "a" * (1 << 20),
        "1 MiB non-ASCII text": "é" * (1 << 19),
        "10,000 records": [
            {"id": i, "text": f"note {i} über", "tags": ["x", "y"]} for i in range(10_000)
        ],
    }
    for name, value in values.items():
        checked = best_of(15, partial(normalize_value, value, max_bytes=1 << 22))
        bare = best_of(15, partial(unchecked, value))
        print(f"  {name:<22} checked {checked:8.2f} ms   bare {bare:8.2f} ms")


def main() -> None:
    patterns()
    asyncio.run(remember())
    validation()


if __name__ == "__main__":
    main()
