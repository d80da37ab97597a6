"""Crash testing: a writer process killed with SIGKILL at random moments, and the checks that
nothing it was told had been written is lost.

The writer (``python -m tests.helpers.crash TARGET JOURNAL RUN SEED``) opens the store and
writes through the public API until it is killed: it stores new keys, overwrites and deletes
them, memorizes episodes (with vectors) and deletes those. Before each write it appends the
*intent* to the journal; once the write returned it appends the *acknowledgement* and fsyncs.
So after a kill every acknowledged write must be in the store, and at most the one write in
flight (an intent without its acknowledgement) may or may not have happened.

``CrashCheck`` keeps the state the store must hold and, after each kill, checks that the store
holds it exactly: every acknowledged write present, the write in flight all there or not at
all, every live record backed by its event and every memory event reflected in the state, and
every live episode with its vector. ``reads`` and ``rebuild_keeps_reads`` check that replaying
the log (``Engine.rebuild``) gives back the same reads, searches included.

Vectors come from ``HashEmbedder`` (a deterministic stand-in for a model: what is under test
is that a vector is written in the same transaction as its record, not what it means), so a
writer starts in about a second and a run of hundreds of kills stays short.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import engramdb
from engramdb.core.types import MemoryTier
from engramdb.engine import Engine, EngineConfig
from engramdb.index.embedder import FloatArray, l2_normalize
from engramdb.providers.deferred_parts import PARTS_PENDING_SPEC
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import RecordQuery

TENANT, USER = "acme", "alice"
KEYS = "event_sourced"  # the namespace of manager.store
EPISODES = "episodic"
NAMESPACES = (KEYS, EPISODES)
MEMORY_EVENTS = ("memory.written", "memory.deleted", "memory.expired")
QUERIES = ("kayak trip to Lisbon", "who adopted a cat", "pasta dinner", "note 7")
WORDS = (
    "Lisbon kayak Zanzibar sister pasta cat Miso garden train museum coffee river violin "
    "mountain letter bakery harbour lantern"
).split()
#: Printed by the writer once its engine is open (the kill may land before or after).
READY = "ready"

#: A stored value, as a comparable string: keys hold JSON values, episodes compare by text.
Slot = tuple[str, str]


class HashEmbedder:
    """A deterministic 16-dimensional embedder: each text's vector comes from its sha256."""

    model_id = "crash-hash-16"
    dimensions = 16

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        rows = [
            np.frombuffer(hashlib.sha256(text.encode()).digest()[:16], dtype=np.uint8)
            for text in texts
        ]
        matrix = np.array(rows, dtype=np.float32).reshape(len(texts), 16) - 127.5
        return l2_normalize(matrix)

    async def embed_one(self, text: str) -> FloatArray:
        row: FloatArray = (await self.embed([text]))[0]
        return row


def engine_config() -> EngineConfig:
    """The writer's and the checker's engine settings: vectors on, from ``HashEmbedder``."""
    return EngineConfig(embedder=HashEmbedder())


def canonical(namespace: str, value: Any) -> str:
    """What is compared of a stored value: an episode's text, a key's whole JSON value."""
    if namespace == EPISODES:
        return str(value["text"])
    return json.dumps(value, sort_keys=True)


# -- the writer ------------------------------------------------------------------------------


class Journal:
    """The writer's journal: JSON lines, each acknowledgement fsynced before the next write."""

    def __init__(self, path: Path) -> None:
        self._file = path.open("a", encoding="utf-8")

    def append(self, entry: dict[str, Any], *, durable: bool) -> None:
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()  # in the OS's hands: a killed process loses nothing written
        if durable:
            os.fsync(self._file.fileno())


def _sentence(rng: random.Random, n: int) -> str:
    words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 8)))
    second = f" Then note {n} about the {rng.choice(WORDS)}." if rng.random() < 0.5 else ""
    return f"We talked about {words} ({n}).{second}"


async def _live(engine: Engine, namespace: str) -> list[str]:
    records = await engine.backend.scan(RecordQuery(namespace, _partition(namespace)))
    return [record.key for record in records]


def _partition(namespace: str) -> engramdb.Scope:
    del namespace  # both namespaces partition by tenant, user and agent
    return engramdb.Scope(tenant=TENANT, user=USER)


async def write_until_killed(target: str, journal_path: Path, run: int, seed: int) -> None:
    """Write forever (until killed), journalling each write's intent and acknowledgement."""
    rng = random.Random(seed)
    journal = Journal(journal_path)
    async with engramdb.open(target, config=engine_config()) as engine:
        mem = engine.scope(TENANT, USER)
        keys, episodes = await _live(engine, KEYS), await _live(engine, EPISODES)
        print(READY, flush=True)
        for n in range(1_000_000):
            roll = rng.random()
            entry: dict[str, Any] = {"run": run, "seq": n}
            if roll < 0.25 or (roll < 0.55 and not keys):
                entry |= {"op": "put", "ns": KEYS, "key": f"k-{run}-{n}"}
            elif roll < 0.55:
                entry |= {"op": "put", "ns": KEYS, "key": rng.choice(keys)}
            elif roll < 0.85 or not (keys or episodes):
                entry |= {"op": "put", "ns": EPISODES, "key": f"e-{run}-{n}"}
            else:
                namespace = EPISODES if episodes and (not keys or rng.random() < 0.5) else KEYS
                held = episodes if namespace == EPISODES else keys
                entry |= {"op": "delete", "ns": namespace, "key": rng.choice(held)}
            if entry["op"] == "put":
                text = _sentence(rng, n)
                value: Any = {"n": n, "run": run, "text": text}
                entry["value"] = canonical(entry["ns"], value)
            journal.append({**entry, "phase": "intent"}, durable=False)
            if entry["op"] == "delete":
                if entry["ns"] == KEYS:
                    await mem.manager.delete(entry["key"], provider_id=KEYS)
                    keys.remove(entry["key"])
                else:
                    await mem.episodic.provider.delete(entry["key"])
                    episodes.remove(entry["key"])
            elif entry["ns"] == KEYS:
                await mem.manager.store(
                    entry["key"], value, tier=MemoryTier.PERSISTENT, metadata={"run": run}
                )
                if entry["key"] not in keys:
                    keys.append(entry["key"])
            else:
                item = engramdb.MemoryItem(id=entry["key"], text=text, role="user")
                await mem.episodic.memorize(item)
                episodes.append(entry["key"])
            journal.append({**entry, "phase": "ack"}, durable=True)


# -- the checks -------------------------------------------------------------------------------


async def stored_state(engine: Engine) -> dict[Slot, str]:
    """Every live record of the writer's partition: (namespace, key) → compared value."""
    state: dict[Slot, str] = {}
    for namespace in NAMESPACES:
        for record in await engine.backend.scan(RecordQuery(namespace, _partition(namespace))):
            state[(namespace, record.key)] = canonical(namespace, record.value)
    return state


async def logged(engine: Engine) -> tuple[dict[Slot, str], set[tuple[str, str, str, str]]]:
    """The state the event log describes (the last memory event of each key, folded), and
    every memory event as (operation, namespace, key, compared value)."""
    state: dict[Slot, str] = {}
    seen: set[tuple[str, str, str, str]] = set()
    for event in await engine.events.read(EventQuery(event_types=MEMORY_EVENTS)):
        slot = (str(event.payload["provider_id"]), str(event.payload["key"]))
        if event.event_type == "memory.written":
            state[slot] = canonical(slot[0], event.payload["value"])
            seen.add(("put", *slot, state[slot]))
        else:
            state.pop(slot, None)
            seen.add(("delete", *slot, ""))
    return state, seen


def _logged_as(entry: dict[str, Any]) -> tuple[str, str, str, str]:
    return (entry["op"], entry["ns"], entry["key"], entry.get("value", ""))


async def reads(engine: Engine) -> dict[str, Any]:
    """What a caller reads: every value, every key list, and the ranked hits of searches."""
    mem = engine.scope(TENANT, USER)
    found = {
        query: [
            (item.id, round(item.score or 0.0, 6))
            for item in await mem.episodic.remember(query, limit=20)
        ]
        for query in QUERIES
    }
    return {
        "state": sorted((await stored_state(engine)).items()),
        "keys": await mem.manager.list_keys(tier=MemoryTier.PERSISTENT),
        "search": found,
    }


@dataclass
class CrashCheck:
    """The state the store must hold, carried from kill to kill.

    ``lost`` counts keys whose state differs from what the acknowledged writes left (beyond
    the write in flight), ``unlogged`` acknowledged writes without their event, ``orphans``
    log/state disagreements, ``unvectored`` live episodes without a vector, ``in_flight``
    kills that caught a write in flight and ``in_flight_done`` those whose write had
    committed anyway.
    """

    expected: dict[Slot, str] = field(default_factory=dict)
    acknowledged: int = 0
    lost: int = 0
    unlogged: int = 0
    orphans: int = 0
    unvectored: int = 0
    in_flight: int = 0
    in_flight_done: int = 0
    problems: list[str] = field(default_factory=list)

    def _apply(self, state: dict[Slot, str], entry: dict[str, Any]) -> dict[Slot, str]:
        after = dict(state)
        slot = (entry["ns"], entry["key"])
        if entry["op"] == "put":
            after[slot] = entry["value"]
        else:
            after.pop(slot, None)
        return after

    async def after_kill(self, engine: Engine, entries: list[dict[str, Any]]) -> None:
        """Check the store after the kill that ended the run whose journal is ``entries``."""
        # The reopened engine computes the part vectors a killed writer still owed (queued at
        # open); once it has, every pending marker must be gone, each with its event.
        await engine.indexer.deferred.drain()
        left = await engine.backend.scan(RecordQuery(PARTS_PENDING_SPEC.namespace, None))
        if left:
            self.problems.append(f"{len(left)} part-vector markers left after the drain")
        acked = [e for e in entries if e["phase"] == "ack"]
        acked_seqs = {e["seq"] for e in acked}
        pending = [e for e in entries if e["phase"] == "intent" and e["seq"] not in acked_seqs]
        for entry in acked:
            self.expected = self._apply(self.expected, entry)
        self.acknowledged += len(acked)
        actual = await stored_state(engine)
        candidates = [self.expected]
        if pending:
            self.in_flight += 1
            candidates.append(self._apply(self.expected, pending[-1]))
        if actual not in candidates:
            wrong = {
                slot: (self.expected.get(slot), actual.get(slot))
                for slot in self.expected.keys() | actual.keys()
                if self.expected.get(slot) != actual.get(slot)
            }
            self.lost += len(wrong)
            self.problems.append(f"expected, stored: {wrong}")
        elif len(candidates) == 2 and actual == candidates[1]:
            self.in_flight_done += 1
        self.expected = actual  # what later runs start from
        folded, events = await logged(engine)
        if folded != actual:
            differ = set(folded.items()) ^ set(actual.items())
            self.orphans += len(differ)
            self.problems.append(f"log and state differ: {differ}")
        unlogged = [entry for entry in acked if _logged_as(entry) not in events]
        if unlogged:
            self.unlogged += len(unlogged)
            self.problems.append(f"acknowledged without an event: {unlogged}")
        episodes = sum(1 for namespace, _ in actual if namespace == EPISODES)
        vectored = (await engine.vector_counts()).get(HashEmbedder.model_id, 0)
        if vectored != episodes:
            self.unvectored += abs(episodes - vectored)
            self.problems.append(f"{episodes} live episodes, {vectored} vectors")


async def rebuild_keeps_reads(engine: Engine) -> bool:
    """Whether ``rebuild()`` gives back exactly the reads the store gave before it."""
    before = await reads(engine)
    await engine.rebuild()
    return await reads(engine) == before


# -- the killer -------------------------------------------------------------------------------


def read_journal(path: Path) -> list[dict[str, Any]]:
    """The journal's entries (a line cut short by the kill is not an entry)."""
    entries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            entries.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return entries


@dataclass(frozen=True)
class Kill:
    """One writer run: how long it lived and whether the engine was open when it died."""

    lived_s: float
    opened: bool


def run_and_kill(
    target: str, journal: Path, run: int, rng: random.Random, *, max_after_ready_s: float
) -> Kill:
    """Start a writer, SIGKILL it at a random moment (mostly while writing; one kill in ten
    while it is still opening the store), and wait until it is gone."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    log = journal.with_suffix(".log")
    started = time.monotonic()
    opened = early = False
    with (
        log.open("ab") as errors,
        subprocess.Popen(
            [sys.executable, "-m", "tests.helpers.crash", target, str(journal), str(run)],
            stdout=subprocess.PIPE,
            stderr=errors,
            env=env,
            cwd=Path(__file__).resolve().parents[2],
            start_new_session=True,
        ) as child,
    ):
        assert child.stdout is not None
        try:
            early = rng.random() < 0.1
            if early:
                time.sleep(rng.uniform(0.0, 1.0))  # while importing, opening or migrating
            else:
                opened = child.stdout.readline().decode().strip() == READY
                if opened:
                    time.sleep(rng.uniform(0.0, max_after_ready_s))
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait()
    if child.returncode != -signal.SIGKILL or not (opened or early):
        raise RuntimeError(f"the writer ended before the kill: {log.read_text()[-2000:]}")
    return Kill(time.monotonic() - started, opened)


def journal_of(journal: Path, run: int) -> list[dict[str, Any]]:
    """The entries of one run."""
    return [entry for entry in read_journal(journal) if entry["run"] == run]


if __name__ == "__main__":
    target_arg, journal_arg, run_arg = sys.argv[1:4]
    asyncio.run(write_until_killed(target_arg, Path(journal_arg), int(run_arg), seed=int(run_arg)))
