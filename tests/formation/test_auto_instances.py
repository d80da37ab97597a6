"""Automatic formation with several engines on one store: each pending formation is claimed by
one engine (a lease in the record), a lease that ends is taken over, and every turn is formed
exactly once — with two engines in one process on both backends, and with two processes
SIGKILLed at random moments on PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import InvalidValueError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.formation.auto import FORMATION_SPEC, episode_turn
from engramdb.formation.claims import lease_of
from engramdb.formation.ingest import IngestReport, form
from engramdb.formation.rules import RuleExtractor
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import RecordQuery
from tests.formation.auto_child import SCOPE, pet_name
from tests.formation.test_auto import (
    AUTO,
    CHILD_LEASE_S,
    GatedRules,
    _target,
    all_formed,
    check_formed_once,
    facts,
    pending,
)
from tests.helpers.children import acknowledged, start_child, until_acknowledged

#: Left-over turns, each with a fact of its own.
LEFT_OVER = 8
ROUNDS = 4


def said(n: int) -> MemoryItem:
    return MemoryItem(text=f"I have a dog named {pet_name(n)}.", role="user")


def pets(numbers: range) -> dict[str, int]:
    """Each turn's fact, written once."""
    return {f"user.pet.{pet_name(n).lower()}": 1 for n in numbers}


async def leave_pending(target: str, turns: range) -> None:
    """Memorize ``turns`` with an engine whose formation never gets to read them."""
    async with engramdb.open(target, config=AUTO) as engine:
        assert engine.formation is not None
        engine.formation.extractor = lambda: GatedRules(asyncio.Event())  # never opens
        mem = engine.scope(**SCOPE)
        for n in turns:
            await mem.episodic.memorize(said(n))
        assert len(await pending(engine)) == len(turns)


async def claims(engine: Engine) -> list[str]:
    """The holders named by the claims in the log, in order."""
    logged = await engine.events.read(
        EventQuery(event_types=("memory.written",), provider_id=FORMATION_SPEC.namespace)
    )
    return [e.payload["value"]["claimed_by"] for e in logged if "claimed_by" in e.payload["value"]]


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_two_engines_resuming_one_store_form_each_turn_once(
    kind: str, tmp_path: Path
) -> None:
    target = _target(kind, tmp_path)
    await leave_pending(target, range(LEFT_OVER))
    async with (
        engramdb.open(target, config=AUTO) as one,
        engramdb.open(target, config=AUTO) as two,
    ):
        assert one.formation is not None
        assert two.formation is not None
        await asyncio.gather(one.formed(), two.formed())
        await asyncio.gather(all_formed(one), all_formed(two))
        assert await facts(one) == pets(range(LEFT_OVER))
        # Every pending formation was formed by one engine, once.
        formed = [*one.formation.reports, *two.formation.reports]
        assert len(formed) == LEFT_OVER
        holders = await claims(one)
        # The engine that left them claimed one and gave it up as it closed; the two claimed
        # each of the others once.
        taken = [h for h in holders if h in (one.formation.holder, two.formation.holder)]
        assert len(taken) == LEFT_OVER


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_an_ended_lease_is_taken_over_and_its_holder_deletes_nothing(
    kind: str, tmp_path: Path
) -> None:
    target = _target(kind, tmp_path)
    short = EngineConfig(embedder=None, formation="auto", formation_lease_s=0.5)
    gate = asyncio.Event()
    async with engramdb.open(target, config=short) as stalled:
        assert stalled.formation is not None
        stalled.formation.extractor = lambda: GatedRules(gate)
        mem = stalled.scope(**SCOPE)
        await mem.episodic.memorize(said(1))
        # Claimed by the stalled engine, which is stuck reading the turn.
        deadline = time.monotonic() + 10
        while not await claims(stalled):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        (record,) = await stalled.backend.scan(RecordQuery(FORMATION_SPEC.namespace, None))
        lease = lease_of(record)
        assert lease is not None
        assert lease.holder == stalled.formation.holder
        async with engramdb.open(target, config=AUTO) as taker:
            assert taker.formation is not None
            # Held at first; taken over once the lease ends, and formed.
            await all_formed(taker, timeout_s=20)
            assert await facts(taker) == pets(range(1, 2))
            assert len(taker.formation.reports) == 1
            # The stalled engine wakes and forms the turn again: nothing is written twice,
            # and the pending record, already gone, is not its to delete.
            gate.set()
            await stalled.formed()
            assert len(stalled.formation.reports) == 1
            assert await facts(taker) == pets(range(1, 2))
            assert await pending(taker) == []


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_two_formations_of_the_same_turns_at_once_write_each_fact_once(
    kind: str, tmp_path: Path
) -> None:
    target = _target(kind, tmp_path)
    manual = EngineConfig(embedder=None)
    async with (
        engramdb.open(target, config=manual) as one,
        engramdb.open(target, config=manual) as two,
    ):
        mem = one.scope(**SCOPE)
        lines = [f"I have a dog named {pet_name(n)}." for n in range(6)]
        lines += ["I live in Lisbon.", "I moved to Porto.", "I work at Acme."]
        start = datetime(2026, 1, 1, tzinfo=UTC)
        stored = await mem.episodic.memorize_many(
            [
                MemoryItem(text=line, role="user", occurred_at=start + timedelta(minutes=n))
                for n, line in enumerate(lines)
            ]
        )
        records = [await mem.episodic.provider.read_record(s.id) for s in stored]
        turns = [episode_turn(r) for r in records if r is not None]

        async def form_with(engine: Engine) -> IngestReport:
            scoped = engine.scope(**SCOPE)
            report = IngestReport()
            await form(
                scoped.semantic,
                scoped.graph,
                turns,
                report,
                subject="alice",
                extractor=RuleExtractor(),
            )
            return report

        first, second = await asyncio.gather(form_with(one), form_with(two))
        written = await facts(one)
        assert written == {**pets(range(6)), "user.city": 2, "user.employer": 1}
        # Each item was written by one of the two; the other found it formed.
        for a, b in zip(first.outcomes, second.outcomes, strict=True):
            assert sorted([a.decision, b.decision]).count("unchanged") >= 1, (a, b)


@pytest.mark.reliability
async def test_two_processes_killed_at_random_form_each_turn_once(tmp_path: Path) -> None:
    target = _target("postgresql", tmp_path)
    chance = random.Random(os.environ.get("ENGRAM_TEST_SEED", str(time.time_ns())))
    # Two writers with turns of their own (far apart in number, so their pets differ).
    firsts = {"a": 0, "b": 100_000}
    acks = {name: tmp_path / f"acks-{name}" for name in firsts}
    log = tmp_path / "children.log"
    left_pending = 0
    for _ in range(ROUNDS):
        children = {}
        before = {}
        for name, first in firsts.items():
            done = acknowledged(acks[name])
            before[name] = len(done)
            start = done[-1] + 1 if done else first
            children[name] = await start_child(
                "tests.formation.auto_child",
                (target, str(acks[name]), str(start), str(CHILD_LEASE_S)),
                log,
            )
        # Both write (and, as they start, both resume what the last round left) ...
        await until_acknowledged(
            {acks[n]: before[n] + 4 for n in firsts},
            list(children.values()),
            log,
            seconds=60,
            failure="a child acknowledged nothing",
        )
        # ... until each is killed at a moment of its own.
        for child in children.values():
            await asyncio.sleep(chance.uniform(0.0, 0.8))
            child.send_signal(signal.SIGKILL)
        for child in children.values():
            await child.wait()
        async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
            left_pending += len(await pending(engine))
    acked = [n for name in firsts for n in acknowledged(acks[name])]
    assert len(acked) > 2 * ROUNDS
    await check_formed_once(target, acked)
    assert left_pending > 0


@pytest.mark.parametrize(
    "lease",
    [0.0, -1.0, float("nan"), float("inf"), "60", True, None, 86_400.5, 1e300, 10**5000],
    ids=["0", "-1", "nan", "inf", "text", "true", "none", "over a day", "1e300", "5,000 digits"],
)
def test_a_lease_that_is_not_a_positive_time_up_to_a_day_is_refused(lease: object) -> None:
    with pytest.raises(InvalidValueError, match="formation_lease_s"):
        EngineConfig(formation_lease_s=lease)  # type: ignore[arg-type]
