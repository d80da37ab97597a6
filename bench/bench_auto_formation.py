"""Memorize latency with automatic formation off, on (in the background), and inline (what the
write would cost if it formed its turn before returning).

Each round opens a fresh store per mode, memorizes the same ``--turns`` user turns one by one
into episodic memory (a pet named, a dated plan, a question, a place lived in — a mix the rules
find something in about half the time), timing each ``memorize`` call, then times how long the
background formation takes to catch up (``Engine.formed``). Modes run interleaved, round after
round, so a machine busy with other work weighs on each alike. Run by hand (not in CI)::

    python bench/bench_auto_formation.py --turns 500 --rounds 3
    python bench/bench_auto_formation.py --backend postgresql://postgres@127.0.0.1/bench_af
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench_common import percentiles
from bench_recall import machine, make_progress
from rich.console import Console

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig, ScopedMemory
from engramdb.formation.auto import episode_turn
from engramdb.formation.ingest import IngestReport, form
from engramdb.formation.rules import RuleExtractor

RESULTS = Path(__file__).resolve().parent / "results"
MODES = ("off", "auto", "inline")
_SAID = (
    "I have a dog named {name}.",
    "Can you suggest a quick recipe for dinner tonight?",
    "I'm flying to Rome next Friday for the {name} conference.",
    "What is the difference between a latte and a flat white?",
    "I live in {city} now.",
    "Thanks, that helps a lot with the report for {name}.",
)
_CITIES = ("Lisbon", "Porto", "Madrid", "Berlin", "Vienna", "Prague")


def name(n: int) -> str:
    """A word of its own for turn ``n``."""
    consonants, vowels, letters = "bdfgklmnprstvz", "aeiou", ""
    for _ in range(3):
        letters += consonants[n % len(consonants)] + vowels[(n // len(consonants)) % len(vowels)]
        n //= len(consonants) * len(vowels)
    return letters.capitalize()


def turn(n: int) -> MemoryItem:
    text = _SAID[n % len(_SAID)].format(name=name(n), city=_CITIES[n // len(_SAID) % 6])
    return MemoryItem(text=text, role="user")


async def one_run(target: str, mode: str, turns: int, embedder: bool) -> dict[str, Any]:
    config = EngineConfig(
        embedder="default" if embedder else None, formation="auto" if mode == "auto" else "manual"
    )
    async with engramdb.open(target, config=config) as engine:
        mem = engine.scope(tenant="bench", user="alice", session="s")
        await engine.indexer.warm()
        samples = []
        for n in range(turns):
            started = time.perf_counter()
            stored = await mem.episodic.memorize(turn(n))
            if mode == "inline":
                await _form_inline(mem, stored.id)
            samples.append(time.perf_counter() - started)
        written = time.perf_counter()
        await engine.formed()
        catch_up = time.perf_counter() - written
        facts = len(await mem.semantic.provider.list_keys())
    return {"samples": samples, "catch_up_s": catch_up, "facts": facts}


async def _form_inline(mem: ScopedMemory, key: str) -> None:
    """Form the turn just stored, before the write returns."""
    record = await mem.episodic.provider.read_record(key)
    assert record is not None
    await form(
        mem.semantic,
        mem.graph,
        [episode_turn(record)],
        IngestReport(),
        subject="alice",
        extractor=RuleExtractor(),
    )


@contextmanager
def _store(backend: str, folder: Path, label: str) -> Iterator[str]:
    """A fresh store: a SQLite file in ``folder``, or a new database on a PostgreSQL server."""
    if backend == "sqlite":
        yield str(folder / f"{label}.db")
        return
    from bench_two_instances import database

    with database(backend) as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--backend", default="sqlite", help="sqlite, or a PostgreSQL URL")
    parser.add_argument("--embedder", action="store_true", help="the default model (else none)")
    parser.add_argument("--out", type=Path, default=RESULTS / "auto_formation.json")
    args = parser.parse_args()
    console = Console(stderr=True)
    runs: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp, make_progress(console) as progress:
        task = progress.add_task("memorize", total=args.rounds * len(MODES) * args.turns)
        for round_ in range(args.rounds):
            for mode in MODES:
                with _store(args.backend, Path(tmp), f"{mode}-{round_}") as target:
                    runs[mode].append(asyncio.run(one_run(target, mode, args.turns, args.embedder)))
                progress.advance(task, args.turns)
    result: dict[str, Any] = {
        "backend": args.backend.split("@")[-1],
        "turns": args.turns,
        "rounds": args.rounds,
        "embedder": "default" if args.embedder else None,
        "loadavg": os.getloadavg(),
        "modes": {
            mode: {
                "memorize_ms": {
                    k: round(v, 3)
                    for k, v in percentiles([s for r in rs for s in r["samples"]]).items()
                },
                "catch_up_s": [round(r["catch_up_s"], 3) for r in rs],
                "facts": [r["facts"] for r in rs],
            }
            for mode, rs in runs.items()
        },
        "machine": machine(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2))
    print(json.dumps({k: v for k, v in result.items() if k != "machine"}, indent=2))


if __name__ == "__main__":
    main()
