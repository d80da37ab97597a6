"""Working memory ranks by meaning, importance and recency, so the current task reaches the
assembled context though the prompt shares no word with it; each memory type's limits are
set in ``EngineConfig``.

Rankings are asserted only where the margin is real: the embedder is int8 MiniLM, whose
similarities may move by a few hundredths between CPUs (cosines here: "what should I cook
tonight?" to "current task: plan dinner" about 0.46, to the other items at most 0.26).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.core.types import utc_now
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.budget import Budget
from engramdb.orchestrator.plugin import TypeLimits
from engramdb.orchestrator.type_limits import MemoryTypeLimits
from engramdb.orchestrator.working import RANKING

DINNER = "current task: plan dinner"
UNHURRIED = Budget(token_limit=300, time_limit_ms=60_000)
OTHERS = [
    "draft an email to Bob about the invoice",
    "user prefers short answers",
    "the meeting moved to Friday",
]


async def test_assemble_brings_the_current_task_to_a_prompt_without_its_words(
    any_engine: Engine,
) -> None:
    mem = any_engine.scope(tenant="acme", user="alice", session="s-1", plan="p-1")
    for text in OTHERS:
        await mem.working.memorize(MemoryItem(text=text))
    await mem.working.memorize(MemoryItem(text=DINNER))
    for n in range(12):
        await mem.episodic.memorize(MemoryItem(text=f"note {n}: the garden needs water"))
    # A time budget no loaded machine misses: timing is the benchmarks' business.
    context = await mem.assemble("what should I cook tonight?", budget=UNHURRIED)
    assert DINNER in context.text
    (first, *_) = await mem.working.remember("what should I cook tonight?")
    assert first.text == DINNER
    assert set(first.score_breakdown) >= {"relevance", "importance", "recency", "vector"}


async def test_meaning_outranks_importance_when_it_clearly_differs(engine: Engine) -> None:
    working = engine.scope(tenant="acme", session="s-1").working
    await working.memorize(MemoryItem(text="user prefers short answers", importance=0.8))
    await working.memorize(MemoryItem(text=DINNER, importance=0.3))
    ranked = await working.remember("what should I cook tonight?")
    assert [i.text for i in ranked] == [DINNER, "user prefers short answers"]


async def test_equal_relevance_is_decided_by_importance_then_recency(engine: Engine) -> None:
    working = engine.scope(tenant="acme", session="s-1").working
    now = utc_now()
    text = "check the oven"
    await working.memorize(MemoryItem(text=text, id="minor", importance=0.2, occurred_at=now))
    await working.memorize(MemoryItem(text=text, id="major", importance=0.9, occurred_at=now))
    stale = now - timedelta(days=3)
    await working.memorize(MemoryItem(text=text, id="stale", importance=0.9, occurred_at=stale))
    ranked = await working.remember("is the oven on?")
    assert [i.id for i in ranked] == ["major", "stale", "minor"]
    major, stale_item, _ = ranked
    relevance = major.score_breakdown["relevance"]
    assert stale_item.score_breakdown["relevance"] == pytest.approx(relevance, abs=1e-6)
    assert major.score_breakdown["recency"] > 0.99
    assert stale_item.score_breakdown["recency"] == pytest.approx(0.125, abs=0.001)
    expected = RANKING.relevance * relevance + RANKING.importance * 0.9
    assert major.score == pytest.approx(expected + RANKING.recency, abs=0.002)


async def test_state_is_remembered_summarized_and_assembled(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", session="s-1")
    await mem.working.set("current_task", "plan dinner")
    await mem.working.memorize(MemoryItem(text="the meeting moved to Friday"))
    (first, *_) = await mem.working.remember("what should I cook tonight?")
    assert (first.id, first.text, first.kind) == (
        "current_task",
        "current task plan dinner",
        "state",
    )
    assert "current task plan dinner" in (await mem.working.summarize()).text
    context = await mem.assemble("what should I cook tonight?", budget=UNHURRIED)
    assert "current task plan dinner" in context.text


async def test_without_an_embedder_keywords_importance_and_recency_rank(tmp_path: Path) -> None:
    config = EngineConfig(embedder=None)
    async with engramdb.open(tmp_path / "k.db", config=config) as engine:
        working = engine.scope(tenant="acme", session="s-1").working
        await working.memorize(MemoryItem(text="dinner plan: soup", importance=0.2))
        await working.memorize(MemoryItem(text="dinner plan: pasta", importance=0.9))
        await working.memorize(MemoryItem(text="call the plumber", importance=1.0))
        ranked = await working.remember("dinner plan")
        assert [i.text for i in ranked] == ["dinner plan: pasta", "dinner plan: soup"]
        with pytest.raises(ValidationError, match="limit"):
            await working.remember("dinner", limit=0)


async def test_each_memory_type_takes_its_limits_from_the_engine_config(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    limits = MemoryTypeLimits(
        working=TypeLimits(max_items=2),
        conversation=TypeLimits(max_items=3, max_tokens=100),
        episodic=TypeLimits(default_ttl_ms=60_000),
        semantic=TypeLimits(max_tokens=1000),
    )
    config = EngineConfig(embedder=embedder, type_limits=limits)
    async with engramdb.open(tmp_path / "l.db", config=config) as engine:
        mem = engine.scope(tenant="acme", user="alice", session="s-1")
        for weight in (0.9, 0.1, 0.5):
            result = await mem.working.memorize(MemoryItem(text=f"w{weight}", importance=weight))
        assert len(result.evicted) == 1
        assert sorted(i.text for i in await mem.working.remember("w", limit=10)) == [
            "w0.5",
            "w0.9",
        ]
        working_info = await mem.working.get_capacity_info()
        assert (working_info.max_items, working_info.available_items) == (2, 0)
        for n in range(5):
            await mem.conversation.memorize(MemoryItem(text=f"turn {n}", role="user"))
        assert [i.text for i in await mem.conversation.recent(10)] == ["turn 2", "turn 3", "turn 4"]
        conversation_info = await mem.conversation.get_capacity_info()
        assert (conversation_info.max_items, conversation_info.max_tokens) == (3, 100)
        await mem.episodic.memorize(MemoryItem(text="short-lived"))
        await mem.episodic.memorize(MemoryItem(text="kept an hour", ttl_ms=3_600_000))
        assert sorted(r.ttl_ms or 0 for r in await mem.episodic.records()) == [60_000, 3_600_000]
        assert (await mem.semantic.get_capacity_info()).max_tokens == 1000
        assert (await mem.procedural.get_capacity_info()).max_items is None


def test_default_limits_are_the_documented_ones() -> None:
    limits = EngineConfig().type_limits
    assert limits.working == TypeLimits(max_items=100)
    assert limits.conversation == TypeLimits(max_items=50, max_tokens=4000)
    assert limits.episodic == limits.semantic == limits.procedural == TypeLimits()


@pytest.mark.parametrize(
    "build",
    [
        lambda: TypeLimits(max_items=0),
        lambda: TypeLimits(max_tokens=-5),
        lambda: TypeLimits(default_ttl_ms=True),
        lambda: TypeLimits(max_items=2.5),  # type: ignore[arg-type]
        lambda: MemoryTypeLimits(working=100),  # type: ignore[arg-type]
    ],
)
def test_bad_limits_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(ValidationError):
        build()
