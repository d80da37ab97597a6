"""Properties of the core API over arbitrary input, on both backends.

- store / read / list / delete round-trip any key and any JSON value and metadata within the
  documented limits;
- input outside those limits raises an ``EngramError`` subclass, never another exception, and
  changes nothing (no record, no event);
- any text given to ``forget`` is an instruction carried out or a typed error that forgot
  nothing; any procedural trigger is stored and evaluated, or refused with a typed error;
- any export file given to ``restore`` is loaded whole, or refused with a typed error and
  nothing appended.

Stored strings hold any character but NUL and lone surrogates, which no backend stores: those
are among the invalid values, with nesting thousands deep.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import engramdb
from engramdb.core.errors import EngramError, ValidationError
from engramdb.core.types import MemoryTier
from engramdb.core.validation import MAX_KEY_CHARS, MAX_TTL_MS
from engramdb.engine import Engine, EngineConfig

#: Examples per property: a few dozen in CI; ENGRAM_PROPERTY_EXAMPLES raises it for a long run.
PROPERTIES = settings(
    max_examples=int(os.environ.get("ENGRAM_PROPERTY_EXAMPLES", "30")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
PERSISTENT = MemoryTier.PERSISTENT

#: Characters of stored strings: anything but NUL and lone surrogates (refused: see NOT_JSON).
CHARS = st.characters(exclude_categories=["Cs"], exclude_characters="\x00")
TEXT = st.text(CHARS, max_size=40)
JSON_SCALARS = (
    st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=20,
)
METADATA = st.dictionaries(TEXT, JSON_VALUES, max_size=4)


def is_valid_key(key: str) -> bool:
    """The documented key rule, written out apart from the implementation: 1-512 characters,
    no control characters, no whitespace at either end."""
    controls = any(ord(c) < 0x20 or ord(c) == 0x7F for c in key)
    ends = bool(key) and (key[0].isspace() or key[-1].isspace())
    return 0 < len(key) <= MAX_KEY_CHARS and not controls and not ends


KEYS = st.text(CHARS | st.sampled_from(" \t\n\x01\x7f\u2003"), min_size=0, max_size=20) | st.text(
    CHARS, min_size=MAX_KEY_CHARS - 1, max_size=MAX_KEY_CHARS + 2
)


def fresh(engine: Engine) -> engramdb.ScopedMemory:
    """A scope of its own for each example: examples share one store."""
    return engine.scope(tenant="acme", user=f"u-{uuid.uuid4().hex[:12]}")


async def snapshot(engine: Engine, mem: engramdb.ScopedMemory) -> tuple[int, list[str]]:
    return await engine.events.last_position(), await mem.manager.list_keys(tier=PERSISTENT)


# -- store / read / list / delete -------------------------------------------------------------


@PROPERTIES
@given(key=KEYS, value=JSON_VALUES, metadata=METADATA)
async def test_store_read_list_delete_round_trip(
    any_engine: Engine, key: str, value: Any, metadata: dict[str, Any]
) -> None:
    mem = fresh(any_engine)
    before = await snapshot(any_engine, mem)
    if not is_valid_key(key):
        with pytest.raises(ValidationError):
            await mem.manager.store(key, value, tier=PERSISTENT, metadata=metadata)
        assert await snapshot(any_engine, mem) == before
        return
    written = await mem.manager.store(key, value, tier=PERSISTENT, metadata=metadata)
    read = await mem.manager.read(key)
    assert read is not None
    assert read == written
    assert read.value == json.loads(json.dumps(value))  # tuples come back as lists
    assert read.metadata == metadata
    assert await mem.manager.list_keys(tier=PERSISTENT) == [key]
    assert await mem.manager.delete(key) == ["event_sourced"]
    assert await mem.manager.read(key) is None
    assert await mem.manager.list_keys(tier=PERSISTENT) == []


class Opaque:
    """An object with no JSON form."""


def _nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


NOT_JSON = (
    st.sets(st.integers(), min_size=1, max_size=3)
    | st.binary(min_size=1, max_size=8)
    | st.just(float("nan"))
    | st.just(float("inf"))
    | st.builds(Opaque)
    | st.sets(st.integers(), min_size=1, max_size=2).map(lambda s: {"nested": [1, {"s": s}]})
    | st.just(None)
    | TEXT.map(lambda text: f"{text}\x00")
    | TEXT.map(lambda text: f"{text}\ud800")
    | st.integers(min_value=2_000, max_value=12_000).map(_nested)
)
BAD_TTLS = (
    st.integers(max_value=0)
    | st.integers(min_value=MAX_TTL_MS + 1)
    | st.floats()
    | st.booleans()
    | TEXT
)


@st.composite
def invalid_writes(draw: st.DrawFn) -> dict[str, Any]:
    """A write with exactly one thing wrong: the key, the value, the metadata, the TTL or the
    content type."""
    write: dict[str, Any] = {"key": "k", "value": draw(JSON_VALUES)}
    wrong = draw(st.sampled_from(["key", "value", "metadata", "ttl_ms", "content_type", "size"]))
    if wrong == "key":
        write["key"] = draw(KEYS.filter(lambda k: not is_valid_key(k)) | st.integers())
    elif wrong == "value":
        write["value"] = draw(NOT_JSON)
    elif wrong == "metadata":
        write["metadata"] = draw(
            NOT_JSON.map(lambda v: {"m": v}).filter(lambda m: m["m"] is not None)
            | st.lists(st.integers(), max_size=2)
            | st.just({"m": "x" * 70_000})
        )
    elif wrong == "ttl_ms":
        write["ttl_ms"] = draw(BAD_TTLS)
    elif wrong == "content_type":
        write["content_type"] = draw(
            TEXT.filter(lambda t: not (t[:1].islower() and t.isascii() and t.isidentifier()))
        )
    else:
        write["value"] = "x" * 1_100_000
    return write


@PROPERTIES
@given(write=invalid_writes())
async def test_invalid_writes_raise_engram_errors_and_change_nothing(
    any_engine: Engine, write: dict[str, Any]
) -> None:
    mem = fresh(any_engine)
    await mem.manager.store("kept", "as it was", tier=PERSISTENT)
    before = await snapshot(any_engine, mem)
    options = {name: v for name, v in write.items() if name not in ("key", "value")}
    with pytest.raises(EngramError):
        await mem.manager.store(write["key"], write["value"], tier=PERSISTENT, **options)
    assert await snapshot(any_engine, mem) == before
    kept = await mem.manager.read("kept")
    assert kept is not None
    assert kept.value == "as it was"


@PROPERTIES
@given(key=KEYS.filter(lambda k: not is_valid_key(k)) | st.integers() | st.none())
async def test_reads_and_deletes_of_invalid_keys_are_typed_errors(
    any_engine: Engine, key: Any
) -> None:
    mem = fresh(any_engine)
    before = await snapshot(any_engine, mem)
    for call in (mem.manager.read, mem.manager.delete):
        with pytest.raises(EngramError):
            await call(key)
    assert await snapshot(any_engine, mem) == before


# -- the forget grammar, through a memory type ------------------------------------------------

_FORGET_WORDS = (
    "forget delete the oldest least important memory memories id: key: 2 0 -1 3.5 before "
    "2026-01-01 2026-13-40 turn older than 3 days weeks ago matching 'trip' \"x fade by 30% "
    "150% all everything everything! about the kayak"
).split()
FORGET_TEXTS = (
    st.text(CHARS, max_size=60)
    | st.lists(st.sampled_from(_FORGET_WORDS), min_size=1, max_size=8).map(" ".join)
    | st.sampled_from(["oldest:", "id:", "before:", "fade:", "matching:"]).flatmap(
        lambda head: TEXT.map(lambda rest: head + rest)
    )
)


@PROPERTIES
@given(text=FORGET_TEXTS, mode=st.sampled_from(["soft", "hard", "gentle", ""]))
async def test_forget_carries_out_an_instruction_or_refuses_with_nothing_forgotten(
    any_engine: Engine, text: str, mode: str
) -> None:
    mem = fresh(any_engine)
    for n, said in enumerate(["I went on a kayak trip", "We cooked pasta", "The cat is Miso"]):
        await mem.episodic.memorize(engramdb.MemoryItem(id=f"e{n}", text=said, role="user"))
    before = await any_engine.events.last_position()
    try:
        result = await mem.episodic.forget(text, mode=mode)
    except EngramError:
        assert await any_engine.events.last_position() == before
        assert len(await mem.episodic.records()) == 3
        return
    assert mode in ("soft", "hard")
    assert set(result.forgotten) | set(result.faded) <= {"e0", "e1", "e2"}
    left = {record.key for record in await mem.episodic.records()}
    assert left == {"e0", "e1", "e2"} - set(result.forgotten)


# -- procedural triggers ----------------------------------------------------------------------

#: Pieces of regular expressions: well-formed and broken ones, nested repeats included (rule
#: triggers run in linear time).
_REGEX_PARTS = st.sampled_from(
    [
        "a",
        "b",
        "kayak",
        "\\d",
        "\\w",
        "[a-z]",
        "[^x]",
        ".",
        "^",
        "$",
        "(",
        ")",
        "|",
        "?",
        "*",
        "+",
        "{2}",
        "{1,3}",
        "\\",
        "[",
        "]",
        "(?i)",
        "(?P<n>",
        "(?P=n)",
        "\\b",
    ]
)
REGEXES = st.lists(_REGEX_PARTS, max_size=6).map("".join)
TRIGGERS = (
    st.just("always")
    | st.lists(TEXT, max_size=3).map(lambda words: "keywords:" + ",".join(words))
    | REGEXES.map(lambda p: "regex:" + p)
    | TEXT
)


@PROPERTIES
@given(trigger=TRIGGERS, prompt=st.text(CHARS, min_size=1, max_size=40))
async def test_any_trigger_is_stored_and_evaluated_or_refused(
    any_engine: Engine, trigger: str, prompt: str
) -> None:
    mem = fresh(any_engine)
    before = await any_engine.events.last_position()
    rule = engramdb.MemoryItem(text="Answer in French.", kind="rule", metadata={"trigger": trigger})
    try:
        stored = await mem.procedural.memorize(rule)
    except EngramError:
        assert await any_engine.events.last_position() == before
        assert await mem.procedural.records() == []
        return
    assert [r.key for r in await mem.procedural.records()] == [stored.id]
    try:
        found = await mem.procedural.remember(prompt)
    except EngramError:
        assume(False)  # a blank prompt is refused: that is the prompt, not the trigger
        return
    fired = [item for item in found if item.score == 1.0 and item.id == stored.id]
    if trigger == "always":
        assert fired


async def test_a_trigger_python_warns_about_is_refused_or_stored_quietly(engine: Engine) -> None:
    """Python's ``re`` warns (FutureWarning) on a pattern like ``[[a]``; warnings are errors
    here, so this holds only while triggers run on another engine or are refused."""
    rule = engramdb.MemoryItem(text="Be brief.", kind="rule", metadata={"trigger": "regex:[[a]"})
    try:
        await engine.scope(tenant="acme").procedural.memorize(rule)
    except ValidationError:
        return


# -- import -----------------------------------------------------------------------------------

_EVENT = {
    "kind": "event",
    "event_id": "0190b1a2c3d4e5f60718293a4b5c6d7e",
    "event_type": "memory.written",
    "schema_version": 1,
    "occurred_at": "2026-01-01T00:00:00Z",
    "scope": {"tenant": "acme"},
    "payload": {"key": "k", "value": "v", "value_type": "str", "provider_id": "event_sourced"},
}
LINES = st.one_of(
    JSON_VALUES.map(json.dumps),
    st.text(CHARS, max_size=30),
    st.dictionaries(st.sampled_from(list(_EVENT)), JSON_VALUES, max_size=len(_EVENT)).map(
        lambda fields: json.dumps({**_EVENT, **fields})
    ),
    st.just(json.dumps(_EVENT)),
    st.just(json.dumps({"kind": "record", "namespace": "event_sourced", "key": "k"})),
)


@PROPERTIES
@given(lines=st.lists(LINES, min_size=1, max_size=6))
def test_restore_loads_an_export_whole_or_refuses_it_with_nothing_appended(
    tmp_path: Path, lines: list[str]
) -> None:
    import asyncio

    source = tmp_path / f"export-{uuid.uuid4().hex}.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")

    async def scenario() -> None:
        async with engramdb.open(":memory:", config=EngineConfig(embedder=None)) as engine:
            before = await engine.events.count()  # the built-in providers' registrations
            try:
                report = await engine.restore(source)
            except EngramError:
                assert await engine.events.count() == before
                return
            assert report.events == await engine.events.count() - before

    asyncio.run(scenario())


def test_is_valid_key_agrees_with_the_documented_examples() -> None:
    assert is_valid_key("user.city")
    assert is_valid_key("a b")
    assert not is_valid_key("")
    assert not is_valid_key(" a")
    assert not is_valid_key("a\u2003")
    assert not is_valid_key("a\tb")
    assert not is_valid_key("x" * (MAX_KEY_CHARS + 1))
