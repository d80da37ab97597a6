"""Racing writers of one plan, and the tally of what they lost: shared by the race tests and
``bench/bench_races.py`` (which runs many more trials).

Each race updates *different fields* of one plan at once — from tasks of one process, from
separate processes, or over HTTP — or races an update against a delete. Afterwards the plan and
the event log are checked against what every writer was told:

- **lost**: an acknowledged change of a field that the stored plan, or a later
  ``memory.written`` event of it, does not hold (each writer owns one field and writes
  increasing values, so a lost update shows as a field going back);
- **duplicate** / **missing** events: ``memory.written`` and ``memory.deleted`` events of the
  plan beyond, or short of, one per acknowledged write;
- **resurrected**: a plan whose delete was acknowledged that can still be read, or whose log has
  a write after its delete.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import random
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, fields
from functools import partial
from typing import Any

import httpx

import engramdb
from engramdb.core.errors import NotFoundError
from engramdb.engine import Engine, EngineConfig
from engramdb.orchestrator.plans import Plan, Plans
from engramdb.service.settings import LOCAL_TENANT
from engramdb.storage.backend import EventQuery

TENANT = "races"
#: The fields of a plan the writers share out, one each, and the value a writer's n-th
#: change gives its field (increasing in n, so a step back is visible).
FIELDS = ("status", "state", "goal_data")


def field_value(field: str, n: int) -> Any:
    """The value of ``field`` after its writer's ``n``-th change."""
    return f"step-{n:06d}" if field == "status" else {"step": n}


def step_of(field: str, value: Any) -> int:
    """Inverse of :func:`field_value` (-1 for the value a plan is created with)."""
    if field == "status":
        return int(value[5:]) if isinstance(value, str) and value.startswith("step-") else -1
    return int(value["step"]) if isinstance(value, dict) and "step" in value else -1


@dataclass
class Tally:
    """What a number of races acknowledged and lost."""

    trials: int = 0
    updates: int = 0
    deletes: int = 0
    lost: int = 0
    duplicate_events: int = 0
    missing_events: int = 0
    resurrected: int = 0

    def add(self, other: Tally) -> None:
        """Count ``other``'s races in too."""
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def faults(self) -> dict[str, int]:
        """The counts that must be zero."""
        return {
            "lost": self.lost,
            "duplicate_events": self.duplicate_events,
            "missing_events": self.missing_events,
            "resurrected": self.resurrected,
        }


def open_engine(target: str) -> Any:
    """An engine on ``target`` without an embedder (plans are never embedded)."""
    return engramdb.open(target, config=EngineConfig(embedder=None))


def plans_of(engine: Engine) -> Plans:
    """The plans of the racing tenant."""
    return engine.scope(tenant=TENANT).plans


async def _events(engine: Engine, plan_id: str, kind: str) -> list[dict[str, Any]]:
    found = await engine.events.read(EventQuery(provider_id="plans", key=plan_id))
    return [e.payload for e in found if e.event_type == kind]


async def check_updates(
    engine: Engine, plans: Plans, plan_id: str, acknowledged: dict[str, int], updates: int
) -> Tally:
    """Check the plan ``plan_id`` of ``plans`` after ``updates`` acknowledged updates, whose
    writers' last acknowledged steps are ``acknowledged`` (field → step)."""
    tally = Tally(trials=1, updates=updates)
    plan = await plans.get(plan_id)
    for field, step in acknowledged.items():
        if step_of(field, getattr(plan, field)) != step:
            tally.lost += 1
    written = await _events(engine, plan_id, "memory.written")
    expected = 1 + updates  # the create and each acknowledged update
    tally.duplicate_events += max(0, len(written) - expected)
    tally.missing_events += max(0, expected - len(written))
    seen = dict.fromkeys(acknowledged, -1)
    for payload in written:
        value = payload.get("value") or {}
        for field in acknowledged:
            step = step_of(field, value.get(field))
            if step < seen[field]:
                tally.lost += 1  # a write built on a plan that missed an acknowledged change
            seen[field] = max(seen[field], step)
    return tally


async def race_fields_in_tasks(engine: Engine, trials: int, *, prefix: str = "tasks") -> Tally:
    """Per trial, one task per field updates its field of one new plan, all at once."""
    tally = Tally()
    plans = plans_of(engine)
    for trial in range(trials):
        plan_id = f"{prefix}-{trial}"
        await plans.create(Plan(plan_id=plan_id, goal_event="race"))
        await asyncio.gather(*(plans.update(plan_id, {f: field_value(f, 0)}) for f in FIELDS))
        acknowledged = dict.fromkeys(FIELDS, 0)
        tally.add(await check_updates(engine, plans, plan_id, acknowledged, len(FIELDS)))
    return tally


def _results(pending: list[Any]) -> list[int]:
    return [int(p.get(timeout=600)) for p in pending]


def _update_field_process(target: str, plan_id: str, field: str, rounds: int) -> int:
    """One racing process: ``rounds`` updates of ``field``; returns the last acknowledged step."""

    async def run() -> int:
        async with open_engine(target) as engine:
            plans = plans_of(engine)
            for n in range(rounds):
                await plans.update(plan_id, {field: field_value(field, n)})
            return rounds - 1

    return asyncio.run(run())


async def race_fields_in_processes(
    engine: Engine, target: str, trials: int, rounds: int, *, prefix: str = "procs"
) -> Tally:
    """Per trial, one process per field updates its field of one plan ``rounds`` times."""
    tally = Tally()
    plans = plans_of(engine)
    context = multiprocessing.get_context("spawn")
    with context.Pool(len(FIELDS)) as pool:
        for trial in range(trials):
            plan_id = f"{prefix}-{trial}"
            await plans.create(Plan(plan_id=plan_id, goal_event="race"))
            pending = [
                pool.apply_async(_update_field_process, (target, plan_id, field, rounds))
                for field in FIELDS
            ]
            steps = await asyncio.to_thread(_results, pending)
            acknowledged = dict(zip(FIELDS, steps, strict=True))
            updates = rounds * len(FIELDS)
            tally.add(await check_updates(engine, plans, plan_id, acknowledged, updates))
    return tally


async def race_fields_over_http(
    engine: Engine, url: str, trials: int, *, prefix: str = "http"
) -> Tally:
    """Per trial, one client per field PUTs its field of one plan, all at once, to the
    service at ``url`` (every answer must be 200), a local-mode service of ``engine``'s
    database."""
    tally = Tally()
    plans = engine.scope(tenant=LOCAL_TENANT).plans
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        for trial in range(trials):
            plan_id = f"{prefix}-{trial}"
            created = await http.post(
                "/v1/memory/plans", json={"plan_id": plan_id, "goal_event": "r"}
            )
            created.raise_for_status()
            answers = await asyncio.gather(
                *(
                    http.put(f"/v1/memory/plans/{plan_id}", json={f: field_value(f, 0)})
                    for f in FIELDS
                )
            )
            for answer in answers:
                answer.raise_for_status()
            acknowledged = dict.fromkeys(FIELDS, 0)
            tally.add(await check_updates(engine, plans, plan_id, acknowledged, len(FIELDS)))
    return tally


async def _acknowledged(call: Callable[[], Awaitable[Any]], delay: float) -> bool:
    """Whether ``call`` (started after ``delay`` s) succeeded; a not-found is a refusal."""
    await asyncio.sleep(delay)
    try:
        await call()
    except NotFoundError:
        return False
    return True


async def race_update_and_delete(
    engine: Engine, trials: int, *, seed: int = 7, prefix: str = "doomed"
) -> Tally:
    """Per trial, an update and two deletes of one plan at once, each after a small random
    delay: a deleted plan must stay deleted, and each acknowledged write has one event."""
    tally = Tally()
    plans = plans_of(engine)
    chance = random.Random(seed)
    for trial in range(trials):
        plan_id = f"{prefix}-{trial}"
        await plans.create(Plan(plan_id=plan_id, goal_event="race"))
        update, *deletes = await asyncio.gather(
            _acknowledged(partial(plans.update, plan_id, {"status": "x"}), chance.random() / 500),
            *(_acknowledged(partial(plans.delete, plan_id), chance.random() / 500) for _ in (1, 2)),
        )
        tally.add(await check_delete(engine, plans, plan_id, update, sum(deletes)))
    return tally


async def check_delete(
    engine: Engine, plans: Plans, plan_id: str, updated: bool, deleted: int
) -> Tally:
    """Check plan ``plan_id`` after a race of one update (``updated``: acknowledged) with
    deletes (``deleted`` acknowledged)."""
    tally = Tally(trials=1, updates=int(updated), deletes=deleted)
    if deleted > 1:
        tally.duplicate_events += deleted - 1  # one plan deleted twice
    try:
        await plans.get(plan_id)
        tally.resurrected += int(deleted > 0)
    except NotFoundError:
        pass
    found = await engine.events.read(EventQuery(provider_id="plans", key=plan_id))
    kinds = [e.event_type for e in found]
    written, removed = kinds.count("memory.written"), kinds.count("memory.deleted")
    tally.duplicate_events += max(0, written - 1 - int(updated)) + max(0, removed - deleted)
    tally.missing_events += max(0, 1 + int(updated) - written) + max(0, deleted - removed)
    if "memory.deleted" in kinds and "memory.written" in kinds[kinds.index("memory.deleted") :]:
        tally.resurrected += 1  # the log writes the plan again after deleting it
    return tally


def total(tallies: Sequence[Tally]) -> Tally:
    """The sum of ``tallies``."""
    summed = Tally()
    for tally in tallies:
        summed.add(tally)
    return summed
