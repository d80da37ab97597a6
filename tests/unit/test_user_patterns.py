"""Users' regular expressions (procedural ``regex:`` triggers) run in linear time: a pattern
that backtracks exponentially in Python's ``re`` answers at once, and a pattern the linear-time
engine cannot run is refused when it is written. (The time it takes: bench/bench_patterns.py.)"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import InvalidPatternError, ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.core.patterns import MAX_PATTERN_CHARS, compile_pattern, pattern_search
from engramdb.engine import Engine, EngineConfig
from engramdb.orchestrator.procedural import NAMESPACE, fires

#: ``(a+)+$`` against a run of ``a`` and a ``!``: 2**40 paths for a backtracking engine.
EVIL = "(a+)+$"
EVIL_PROMPT = "a" * 40 + "!"


@pytest.fixture
async def plain_engine(tmp_path: Path) -> AsyncIterator[Engine]:
    async with engramdb.open(tmp_path / "e.db", config=EngineConfig(embedder=None)) as engine:
        yield engine


def test_a_catastrophic_pattern_answers_and_matches_as_re_would() -> None:
    assert pattern_search(EVIL, EVIL_PROMPT) is False
    assert pattern_search(EVIL, "a" * 40) is True
    assert pattern_search("(x+x+)+y", "x" * 5000) is False


def test_patterns_match_case_insensitively_and_tolerate_odd_text() -> None:
    assert pattern_search(r"refund\s+policy", "What is the REFUND  Policy?")
    assert pattern_search("é+", "CAFÉ")
    # A lone surrogate in the text (leniently decoded input) is not an error while matching.
    assert pattern_search("x", "\ud800x")


@pytest.mark.parametrize(
    "pattern",
    [
        r"(a+)\1",  # backreference
        r"(?P<x>a)(?P=x)",  # named backreference
        "(?=a)a",  # lookahead
        "(?!a)b",  # negative lookahead
        "(?<=a)b",  # lookbehind
        "(?<!a)b",  # negative lookbehind
        "(",  # does not compile at all
        "a{1001}",  # repetition beyond the engine's bound
        "((a{100}){100}){100}",  # a program far over the memory bound
        "a" * (MAX_PATTERN_CHARS + 1),
        "a\x00b",
        "a\ud800b",
    ],
)
def test_an_unsupported_pattern_is_a_typed_error(pattern: str) -> None:
    with pytest.raises(InvalidPatternError) as raised:
        compile_pattern(pattern)
    assert isinstance(raised.value, ValidationError)
    assert raised.value.details["reason"] or raised.value.message


async def test_the_rule_of_the_freeze_answers_and_fires_only_where_it_matches(
    plain_engine: Engine,
) -> None:
    memory = plain_engine.scope(tenant="acme", user="alice").procedural
    await memory.memorize(MemoryItem(text="evil", metadata={"trigger": f"regex:{EVIL}"}))
    await memory.memorize(MemoryItem(text="calm", metadata={"trigger": "always"}))
    assert [i.text for i in await memory.remember(EVIL_PROMPT)] == ["calm"]
    assert sorted(i.text for i in await memory.remember("a" * 40)) == ["calm", "evil"]


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?<=a)b", "x" * (MAX_PATTERN_CHARS + 1)])
async def test_a_rule_the_engine_cannot_run_is_refused_and_nothing_is_written(
    plain_engine: Engine, pattern: str
) -> None:
    memory = plain_engine.scope(tenant="acme", user="alice").procedural
    before = await plain_engine.events.count()
    with pytest.raises(InvalidPatternError):
        await memory.memorize(MemoryItem(text="r", metadata={"trigger": f"regex:{pattern}"}))
    assert await plain_engine.events.count() == before


async def test_a_stored_rule_the_engine_cannot_run_never_fires(plain_engine: Engine) -> None:
    # Written straight to the store (an older database, an import): recall skips it.
    scope = plain_engine.scope(tenant="acme", user="alice")
    await scope.manager.store(
        "old-rule",
        {"text": "old", "trigger": r"regex:(a)\1"},
        content_type="reasoning",
        provider_id=NAMESPACE,
    )
    assert fires(r"regex:(a)\1", "aa") is False
    assert await scope.procedural.remember("aa") == []
