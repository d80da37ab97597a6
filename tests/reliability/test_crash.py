"""Durability under SIGKILL, on SQLite and PostgreSQL: a writer process is killed at random
moments, and after every kill each acknowledged write is there with its event, no event lacks
its state, every live episode has its vector, and at the end ``rebuild()`` gives back the same
reads. ``bench/bench_crash.py`` runs the same cycle hundreds of times per backend."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import engramdb
from tests.helpers.crash import (
    CrashCheck,
    engine_config,
    journal_of,
    rebuild_keeps_reads,
    run_and_kill,
)

#: Kills per backend in the suite; ``bench/bench_crash.py`` runs hundreds.
KILLS = 10


@pytest.mark.reliability
async def test_no_acknowledged_write_is_lost_to_sigkill(target: str, tmp_path: Path) -> None:
    journal, rng, check = tmp_path / "journal.jsonl", random.Random(20261125), CrashCheck()
    writing = 0
    for run in range(KILLS):
        kill = run_and_kill(target, journal, run, rng, max_after_ready_s=1.0)
        writing += kill.opened
        async with engramdb.open(target, config=engine_config()) as engine:
            await check.after_kill(engine, journal_of(journal, run))
    assert check.problems == []
    assert (check.lost, check.unlogged, check.orphans, check.unvectored) == (0, 0, 0, 0)
    assert writing >= KILLS // 2  # most kills land while writing, not while starting
    assert check.acknowledged > KILLS  # the writers got real work done between kills
    async with engramdb.open(target, config=engine_config()) as engine:
        assert await rebuild_keeps_reads(engine)


async def test_the_check_sees_a_lost_acknowledged_write(tmp_path: Path) -> None:
    """The check is not vacuous: an acknowledgement without its write is counted as lost."""
    check = CrashCheck()
    lost = {"run": 0, "seq": 0, "op": "put", "ns": "event_sourced", "key": "k", "value": "1"}
    async with engramdb.open(tmp_path / "empty.db", config=engine_config()) as engine:
        await check.after_kill(engine, [{**lost, "phase": "intent"}, {**lost, "phase": "ack"}])
    assert (check.lost, check.unlogged) == (1, 1)


async def test_the_check_allows_the_write_in_flight_either_way(tmp_path: Path) -> None:
    check = CrashCheck()
    pending = {"run": 0, "seq": 0, "op": "put", "ns": "event_sourced", "key": "k", "value": "1"}
    async with engramdb.open(tmp_path / "empty.db", config=engine_config()) as engine:
        await check.after_kill(engine, [{**pending, "phase": "intent"}])
    assert (check.lost, check.in_flight, check.in_flight_done) == (0, 1, 0)
