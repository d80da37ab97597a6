"""Racing writers lose nothing, on every backend: updates of different fields of one plan from
tasks, from separate processes and over HTTP all survive, each with exactly one event, and a
deleted plan stays deleted whatever update races it (``tests/helpers/races.py`` counts;
``bench/bench_races.py`` runs many more trials)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from engramdb.engine import Engine
from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.helpers.races import (
    FIELDS,
    Tally,
    open_engine,
    race_fields_in_processes,
    race_fields_in_tasks,
    race_fields_over_http,
    race_update_and_delete,
)

NO_FAULTS = {"lost": 0, "duplicate_events": 0, "missing_events": 0, "resurrected": 0}


@pytest.fixture
async def engine(target: str) -> AsyncIterator[Engine]:
    async with open_engine(target) as opened:
        yield opened


def assert_sound(tally: Tally, trials: int, updates: int) -> None:
    assert tally.faults() == NO_FAULTS, tally
    assert (tally.trials, tally.updates) == (trials, updates), tally


async def test_tasks_updating_different_fields_of_a_plan_lose_none(engine: Engine) -> None:
    tally = await race_fields_in_tasks(engine, 20)
    assert_sound(tally, 20, 20 * len(FIELDS))


async def test_processes_updating_different_fields_of_a_plan_lose_none(
    engine: Engine, target: str
) -> None:
    tally = await race_fields_in_processes(engine, target, trials=2, rounds=12)
    assert_sound(tally, 2, 2 * 12 * len(FIELDS))


@pytest.fixture
def service(target: str, tmp_path: Path) -> Iterator[str]:
    """``engram serve`` (local mode) on the database ``target``."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [
        *(sys.executable, "-m", "engramdb.cli", "--db", target, "serve"),
        *("--host", "127.0.0.1", "--port", str(port), "--auth", "local", "--no-vectors"),
    ]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    with serving(command, f"{url}/healthz", log=tmp_path / "serve.log", env=env):
        yield url


async def test_racing_puts_over_http_are_all_kept(engine: Engine, service: str) -> None:
    tally = await race_fields_over_http(engine, service, 10)
    assert_sound(tally, 10, 10 * len(FIELDS))


async def test_an_update_racing_deletes_never_brings_the_plan_back(engine: Engine) -> None:
    tally = await race_update_and_delete(engine, 40)
    assert tally.faults() == NO_FAULTS, tally
    # Every trial's plan was deleted exactly once, whoever came first.
    assert (tally.trials, tally.deletes) == (40, 40), tally
