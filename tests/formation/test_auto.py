"""Automatic formation (``EngineConfig(formation="auto")``): a memorize returns before its
turn is formed, the pending work is in the store and the log, a process killed at any moment
loses none of it, and forming a turn again writes nothing — on both backends."""

from __future__ import annotations

import asyncio
import os
import random
import signal
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.formation.auto import FORMATION_SPEC, episode_turn
from engramdb.formation.consolidate import Consolidator
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import Extraction, Turn
from engramdb.orchestrator.episodic import EPISODIC_SPEC, EpisodicMemory
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import RecordQuery
from tests.formation.auto_child import SCOPE, pet_name
from tests.helpers.children import acknowledged, start_child, until_acknowledged
from tests.helpers.ports import free_port
from tests.helpers.processes import serving

ROOT = Path(__file__).resolve().parents[2]
AUTO = EngineConfig(embedder=None, formation="auto")
KILLS = 5
#: The children's leases: a formation a killed child had claimed waits this long for another.
CHILD_LEASE_S = 1.0


def _target(kind: str, tmp_path: Path) -> str:
    from tests.postgres.database import empty_database

    return str(tmp_path / "auto.db") if kind == "sqlite" else empty_database()


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    return _target(request.param, tmp_path)


@pytest.fixture
async def auto_engine(target: str) -> AsyncIterator[Engine]:
    async with engramdb.open(target, config=AUTO) as opened:
        yield opened


class GatedRules(RuleExtractor):
    """The rules, reading nothing until the gate opens."""

    def __init__(self, gate: asyncio.Event) -> None:
        self.gate = gate

    async def extract(self, turns: Sequence[Turn], *, subject: str) -> Extraction:
        await self.gate.wait()
        return await super().extract(turns, subject=subject)


async def pending(engine: Engine) -> list[str]:
    found = await engine.backend.scan(RecordQuery(FORMATION_SPEC.namespace, None))
    return [r.key for r in found]


async def all_formed(engine: Engine, timeout_s: float = 60.0) -> None:
    """Wait until nothing is pending, the formations other engines held (killed processes'
    leases) included."""
    deadline = time.monotonic() + timeout_s
    while True:
        await engine.formed()
        if not await pending(engine):
            return
        assert time.monotonic() < deadline, f"still pending: {await pending(engine)}"
        await asyncio.sleep(0.1)


async def facts(engine: Engine, prefix: str = "user.") -> dict[str, int]:
    """Each formed fact's key with its number of stored versions."""
    mem = engine.scope(**SCOPE)
    keys = await mem.semantic.provider.list_keys(prefix=prefix)
    written = await engine.events.read(
        EventQuery(event_types=("memory.written",), provider_id="semantic")
    )
    return {k: sum(1 for e in written if e.payload.get("key") == k) for k in keys}


async def test_memorize_returns_before_its_turn_is_formed(auto_engine: Engine) -> None:
    gate = asyncio.Event()
    assert auto_engine.formation is not None
    auto_engine.formation.extractor = lambda: GatedRules(gate)
    mem = auto_engine.scope(**SCOPE)
    await mem.episodic.memorize(MemoryItem(text="I live in Lisbon.", role="user"))
    # The write is acknowledged while extraction cannot have run: the turn is stored, its
    # formation pending in the store and the log, and no fact formed yet.
    assert await mem.semantic.provider.read("user.city") is None
    (marker,) = await pending(auto_engine)
    logged = await auto_engine.events.read(EventQuery(provider_id=FORMATION_SPEC.namespace))
    assert [(e.event_type, e.payload["key"]) for e in logged] == [("memory.written", marker)]
    gate.set()
    await auto_engine.formed()
    city = await mem.semantic.provider.read("user.city")
    assert city is not None
    assert city.value["text"] == "The user lives in Lisbon."
    assert await pending(auto_engine) == []
    logged = await auto_engine.events.read(EventQuery(provider_id=FORMATION_SPEC.namespace))
    # Written, claimed by this engine, then deleted once formed.
    assert [e.event_type for e in logged] == ["memory.written", "memory.written", "memory.deleted"]
    assert logged[1].payload["value"]["claimed_by"] == auto_engine.formation.holder


class Choking(RuleExtractor):
    """The rules, failing on any turn that mentions a parrot."""

    async def extract(self, turns: Sequence[Turn], *, subject: str) -> Extraction:
        if any("parrot" in t.text for t in turns):
            raise RuntimeError("the extractor choked")
        return await super().extract(turns, subject=subject)


async def test_a_failing_formation_stays_pending_and_the_rest_are_formed(target: str) -> None:
    async with engramdb.open(target, config=AUTO) as engine:
        assert engine.formation is not None
        engine.formation.extractor = Choking
        mem = engine.scope(**SCOPE)
        await mem.episodic.memorize(MemoryItem(text="I have a parrot named Polly.", role="user"))
        await mem.episodic.memorize(MemoryItem(text="I live in Lisbon.", role="user"))
        await engine.formed()
        assert await facts(engine) == {"user.city": 1}
        assert len(await pending(engine)) == 1
    async with engramdb.open(target, config=AUTO) as engine:
        await engine.formed()
        assert await facts(engine) == {"user.city": 1, "user.pet.polly": 1}
        assert await pending(engine) == []


async def test_a_conversation_turn_is_formed_too(auto_engine: Engine) -> None:
    mem = auto_engine.scope(**SCOPE, session="s")
    await mem.conversation.memorize(MemoryItem(text="I work at Acme.", role="user"))
    await mem.conversation.memorize(MemoryItem(text="I live in Lisbon.", role="assistant"))
    await auto_engine.formed()
    assert await facts(auto_engine) == {"user.employer": 1}
    assert await pending(auto_engine) == []


async def test_work_left_by_a_closed_engine_is_formed_on_open(target: str) -> None:
    async with engramdb.open(target, config=AUTO) as engine:
        assert engine.formation is not None
        engine.formation.extractor = lambda: GatedRules(asyncio.Event())  # never opens
        await engine.scope(**SCOPE).episodic.memorize(
            MemoryItem(text="I have a cat named Tom.", role="user")
        )
        assert len(await pending(engine)) == 1
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as manual:
        # Without automatic formation the work waits, untouched.
        assert len(await pending(manual)) == 1
    async with engramdb.open(target, config=AUTO) as engine:
        await engine.formed()
        assert await facts(engine) == {"user.pet.tom": 1}
        assert await pending(engine) == []


async def test_forming_a_turn_again_writes_nothing(auto_engine: Engine) -> None:
    mem = auto_engine.scope(**SCOPE)
    said = MemoryItem(id="t1", text="I moved to Porto.", role="user")
    await mem.episodic.memorize(said)
    await auto_engine.formed()
    before = await auto_engine.events.count()
    # The same turn pending again, as after a crash between forming it and recording that.
    assert auto_engine.formation is not None
    stored = await mem.episodic.provider.read_record("t1")
    assert stored is not None
    ops, events = auto_engine.formation.ops_for(mem.episodic.provider, [stored])
    await auto_engine.backend.commit(ops, events)
    await auto_engine.formation.resume()
    await auto_engine.formed()
    assert await facts(auto_engine) == {"user.city": 1}
    # Only the pending record's write, its claim and its deletion were logged.
    assert await auto_engine.events.count() == before + 3


async def test_a_formation_cut_between_fact_and_graph_is_completed(auto_engine: Engine) -> None:
    mem = auto_engine.scope(**SCOPE)
    plain = auto_engine.provider(EPISODIC_SPEC, mem.scope)
    plain.companion = None  # stored without automatic formation: formed by hand below
    await EpisodicMemory(plain).memorize(
        MemoryItem(id="t1", text="I have a cat named Tom.", role="user")
    )
    stored = await plain.read_record("t1")
    assert stored is not None
    # The fact consolidated, then the process died before the graph was written.
    extraction = await RuleExtractor().extract([episode_turn(stored)], subject="alice")
    for item in extraction.items:
        await Consolidator(mem.semantic).consolidate(item)
    assert await mem.graph.find_entity("Tom", "animal") is None
    assert auto_engine.formation is not None
    ops, events = auto_engine.formation.ops_for(mem.episodic.provider, [stored])
    await auto_engine.backend.commit(ops, events)
    await auto_engine.formation.resume()
    await auto_engine.formed()
    tom = await mem.graph.find_entity("Tom", "animal")
    assert tom is not None
    alice = await mem.graph.find_entity("alice", "person")
    assert alice is not None
    held = await mem.graph.get_relations(alice.entity_id, "outgoing", "has_pet")
    assert [r.target_id for r in held] == [tom.entity_id]
    assert await facts(auto_engine) == {"user.pet.tom": 1}


async def test_ingest_forms_its_own_turns_and_leaves_nothing_pending(auto_engine: Engine) -> None:
    mem = auto_engine.scope(**SCOPE)
    report = await mem.ingest([{"role": "user", "content": "I live in Lisbon."}])
    assert report.categories["profile"].added == 1
    assert await pending(auto_engine) == []
    await auto_engine.formed()
    assert await facts(auto_engine) == {"user.city": 1}


async def test_rebuild_reproduces_formed_facts(auto_engine: Engine) -> None:
    mem = auto_engine.scope(**SCOPE)
    for text in ("I live in Lisbon.", "I moved to Porto.", "I have a dog named Rex."):
        await mem.episodic.memorize(MemoryItem(text=text, role="user"))
    await auto_engine.formed()
    before = await auto_engine.backend.scan(RecordQuery("semantic", None))
    await auto_engine.rebuild()
    after = await auto_engine.backend.scan(RecordQuery("semantic", None))
    assert [(r.key, r.value, r.version) for r in after] == [
        (r.key, r.value, r.version) for r in before
    ]
    assert {r.key for r in after} == {"user.city", "user.pet.rex"}
    assert await pending(auto_engine) == []


async def check_formed_once(target: str, acknowledged: list[int]) -> None:
    """Form what is left pending: every acknowledged turn's fact is there, each written once
    (an unacknowledged turn in flight at a kill may be there too), and nothing is pending."""
    async with engramdb.open(target, config=AUTO) as engine:
        await all_formed(engine)
        formed = await facts(engine, "user.pet.")
    assert len(acknowledged) == len(set(acknowledged))
    assert {f"user.pet.{pet_name(n).lower()}" for n in acknowledged} <= formed.keys()
    assert set(formed.values()) == {1}


@pytest.mark.reliability
@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
async def test_a_killed_process_loses_no_formation(kind: str, tmp_path: Path) -> None:
    target = _target(kind, tmp_path)
    acks, log = tmp_path / "acks", tmp_path / "child.log"
    chance = random.Random(os.environ.get("ENGRAM_TEST_SEED", str(time.time_ns())))
    left_pending = 0
    for _ in range(KILLS):
        done = acknowledged(acks)
        first = done[-1] + 1 if done else 0
        child = await start_child(
            "tests.formation.auto_child", (target, str(acks), str(first), str(CHILD_LEASE_S)), log
        )
        # Killed at a random moment once it writes: some turns acknowledged, some formed.
        await until_acknowledged(
            {acks: len(done) + 4},
            [child],
            log,
            seconds=60,
            failure="the child acknowledged nothing",
        )
        await asyncio.sleep(chance.uniform(0.0, 1.0))
        child.send_signal(signal.SIGKILL)
        await child.wait()
        async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
            left_pending += len(await pending(engine))
    acked = acknowledged(acks)
    assert len(acked) > KILLS
    await check_formed_once(target, acked)
    # The kills came while formation was behind the writes: resuming was exercised.
    assert left_pending > 0


def test_serve_forms_what_is_logged_with_auto_formation(tmp_path: Path) -> None:
    port = free_port()
    command = [sys.executable, "-m", "engramdb.cli", "serve", "--db", str(tmp_path / "s.db")]
    command += ["--port", str(port), "--no-vectors", "--auto-formation"]
    url = f"http://127.0.0.1:{port}"
    with serving(command, f"{url}/healthz", log=tmp_path / "serve.log"):
        headers = {"X-User-ID": "alice"}
        body = {"role": "user", "content": "I have a cat named Tom."}
        created = httpx.post(f"{url}/v1/memory/episodic", json=body, headers=headers, timeout=10)
        assert created.status_code == 201
        deadline = time.monotonic() + 30
        while True:
            found = httpx.get(
                f"{url}/v1/memory/semantic/search",
                params={"q": "cat"},
                headers=headers,
                timeout=10,
            ).json()["items"]
            if found or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    assert [item["text"] for item in found] == ["The user has a cat named Tom."]
