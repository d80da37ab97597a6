"""The forget grammar: every form and its variants, helpful rejections, the supported-forms
check, the mode, and the round trip ``parse_forget(render_forget(i)) == i``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engramdb.core.errors import ValidationError
from engramdb.orchestrator.forget_grammar import (
    FORGET_KEYWORDS,
    GRAMMAR_HELP,
    PHRASES_HELP,
    All,
    Before,
    BeforeTurn,
    ById,
    ByKey,
    Fade,
    ForgetInstruction,
    ForgetInstructionError,
    LeastImportant,
    Matching,
    OlderThan,
    Oldest,
    UnsupportedForgetError,
    instruction_name,
    parse_forget,
    parse_mode,
    render_forget,
    require_supported,
)

HYPOTHESIS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --- every form ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id:abc123", ById("abc123")),
        ("ID:abc123", ById("abc123")),
        ("  id:  abc123  ", ById("abc123")),
        ("id : AbC", ById("AbC")),
        ("id:ünïcødé-日本語", ById("ünïcødé-日本語")),
        ("id:o'brien", ById("o'brien")),
        ('id:"quoted id"', ById("quoted id")),
        ('id:"\\"starts with a quote"', ById('"starts with a quote')),
        ("key:user.name", ByKey("user.name")),
        ("Key: favourite colour", ByKey("favourite colour")),
        ("key:'x'", ByKey("x")),
        ("key:名前", ByKey("名前")),
        ("oldest", Oldest()),
        ("OLDEST", Oldest(1)),
        ("oldest 3", Oldest(3)),
        ("oldest\t 12", Oldest(12)),
        ("least important", LeastImportant()),
        ("Least   Important", LeastImportant(1)),
        ("least important 7", LeastImportant(7)),
        ("before 2026-01-01", Before(datetime(2026, 1, 1, tzinfo=UTC))),
        ("before 2026-01-01T10:00:00Z", Before(datetime(2026, 1, 1, 10, tzinfo=UTC))),
        ("BEFORE 2026-01-01t10:00:00z", Before(datetime(2026, 1, 1, 10, tzinfo=UTC))),
        ("before 2026-01-01T10:00:00", Before(datetime(2026, 1, 1, 10, tzinfo=UTC))),
        ("before 2026-01-01 10:00", Before(datetime(2026, 1, 1, 10, tzinfo=UTC))),
        ("before 2026-01-01T10:00:00+05:30", Before(datetime(2026, 1, 1, 4, 30, tzinfo=UTC))),
        ("before 2026-01-01T10:00:00-08:00", Before(datetime(2026, 1, 1, 18, tzinfo=UTC))),
        (
            "before 2026-01-01T10:00:00.250Z",
            Before(datetime(2026, 1, 1, 10, 0, 0, 250_000, tzinfo=UTC)),
        ),
        ("before turn 12", BeforeTurn(12)),
        ("Before  Turn 0", BeforeTurn(0)),
        ("older than 30 days", OlderThan(timedelta(days=30))),
        ("older than 1 day", OlderThan(timedelta(days=1))),
        ("older than 1 days", OlderThan(timedelta(days=1))),
        ("older than 6 hours", OlderThan(timedelta(hours=6))),
        ("older than 1 hour", OlderThan(timedelta(hours=1))),
        ("older than 2 weeks", OlderThan(timedelta(weeks=2))),
        ("Older Than 1 WEEK", OlderThan(timedelta(weeks=1))),
        ('matching "coffee order"', Matching("coffee order")),
        ("matching 'coffee order'", Matching("coffee order")),
        ('MATCHING "Keep Case"', Matching("Keep Case")),
        ('matching "it\'s"', Matching("it's")),
        ("matching 'say \"hi\"'", Matching('say "hi"')),
        ('matching "a \\"b\\" c"', Matching('a "b" c')),
        ('matching "C:\\new\\path"', Matching("C:\\new\\path")),
        ('matching "back\\\\slash"', Matching("back\\slash")),
        ('matching"no space"', Matching("no space")),
        ('matching "  padded  "', Matching("  padded  ")),
        ('fade "old plans"', Fade("old plans")),
        ('fade "old plans"', Fade("old plans", 0.5)),
        ("fade 'old plans' by 0.2", Fade("old plans", 0.2)),
        ('FADE "x" BY 1', Fade("x", 1.0)),
        ('fade "x" by 0', Fade("x", 0.0)),
        ('fade "x" by .25', Fade("x", 0.25)),
        ('fade "x"   by   1.0', Fade("x", 1.0)),
        ("all", All()),
        ("  ALL \n", All()),
    ],
)
def test_every_form_parses(text: str, expected: ForgetInstruction) -> None:
    assert parse_forget(text) == expected


_2024 = Before(datetime(2024, 1, 1, tzinfo=UTC))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The example sentences of the memory-plugin interface spec, and its forms.
        ("memory id 5", ById("5")),
        ("oldest item", Oldest()),
        (
            "slightly fade the memory about being on a bike at 5 years old",
            Fade("being on a bike at 5 years old", 0.25),
        ),
        ("oldest", Oldest()),
        ("least important", LeastImportant()),
        ("before timestamp 2024-01-01T10:00:00Z", Before(datetime(2024, 1, 1, 10, tzinfo=UTC))),
        ("before 2024-01-01", _2024),
        ("key:user.city", ByKey("user.city")),
        ("before turn 12", BeforeTurn(12)),
    ],
)
def test_the_spec_sentences_parse(text: str, expected: ForgetInstruction) -> None:
    assert parse_forget(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("forget memory 5", ById("5")),
        ("Forget memory id 5.", ById("5")),
        ("please delete item #7", ById("7")),
        ("remove the memory with id abc-123", ById("abc-123")),
        ("id abc", ById("abc")),
        ('forget memory id "two words"', ById("two words")),
        ("forget item number 12", ById("12")),
        ("forget the fact with key user.city", ByKey("user.city")),
        ("key user.city", ByKey("user.city")),
        ("delete the oldest 3 items", Oldest(3)),
        ("delete the 3 oldest memories", Oldest(3)),
        ("oldest 3 items", Oldest(3)),
        ("oldest three", Oldest(3)),
        ("forget the earliest one", Oldest()),
        ("can you please drop the oldest memory?", Oldest()),
        ("remove the least important item", LeastImportant()),
        ("forget the 2 least important memories", LeastImportant(2)),
        ("forget everything before 2024-01-01", _2024),
        ("delete all memories from before 2024", _2024),
        ("forget anything prior to 2024-01", _2024),
        ("forget everything older than 2024-01-01", _2024),
        ("forget everything before turn 4", BeforeTurn(4)),
        ("forget the turns before 12", BeforeTurn(12)),
        ("forget anything older than 30 days", OlderThan(timedelta(days=30))),
        ("forget memories older than a week", OlderThan(timedelta(weeks=1))),
        ("older than 7 days ago", OlderThan(timedelta(days=7))),
        ("forget items more than two weeks old", OlderThan(timedelta(weeks=2))),
        ("forget everything before 3 days ago", OlderThan(timedelta(days=3))),
        ("forget what I said about my old job", Matching("my old job")),
        ("forget what I told you about Bob", Matching("Bob")),
        ("forget about the party", Matching("the party")),
        ("forget anything mentioning Kyoto", Matching("Kyoto")),
        ("forget all memories about Bob", Matching("Bob")),
        ("forget the memory of my trip", Matching("my trip")),
        ("forget anything that mentions 'the vault'", Matching("the vault")),
        ('forget "coffee order"', Matching("coffee order")),
        ("matching coffee order", Matching("coffee order")),
        ("fade the memory about my trip", Fade("my trip")),
        ("fade the memory about my trip a little", Fade("my trip", 0.25)),
        ("fade the memory about my trip a bit", Fade("my trip", 0.25)),
        ("fade the memory about my trip strongly", Fade("my trip", 0.75)),
        ("strongly fade what I said about my trip", Fade("my trip", 0.75)),
        ("fade the memory about my trip completely", Fade("my trip", 1.0)),
        ("fade the memory about my trip by half", Fade("my trip", 0.5)),
        ("fade the memory about my trip by 30%", Fade("my trip", 0.3)),
        ("fade my trip by 0.2", Fade("my trip", 0.2)),
        ("fade old", Fade("old")),
        ("fade the song stand by me", Fade("song stand by me")),
        ("weaken the memory about the party", Fade("the party")),
        ("lower the importance of what I said about the party", Fade("the party")),
        ("forget all", All()),
        ("forget everything", All()),
        ("Delete everything you know!", All()),
        ("all items", All()),
        ("wipe all of it", All()),
        ("forget every memory", All()),
    ],
)
def test_natural_phrasings_parse(text: str, expected: ForgetInstruction) -> None:
    assert parse_forget(text) == expected
    assert parse_forget(text.upper() if expected.keyword in ("oldest", "all") else text) == expected


def test_phrasings_can_be_turned_off() -> None:
    assert parse_forget("oldest 3") == parse_forget("oldest 3", phrases=False)
    with pytest.raises(ForgetInstructionError, match="whole number"):
        parse_forget("oldest 3 items", phrases=False)


def test_a_long_sentence_is_not_read_as_a_phrase() -> None:
    text = "forget anything about " + "very " * 200 + "long"
    with pytest.raises(ForgetInstructionError, match="unknown instruction 'forget'"):
        parse_forget(text)
    assert parse_forget(f'matching "{text}"') == Matching(text)


def test_before_moments_are_utc() -> None:
    for text in ("before 2026-01-01", "before 2026-01-01T10:00:00+05:30"):
        found = parse_forget(text)
        assert isinstance(found, Before)
        assert found.moment.tzinfo is UTC


def test_instructions_normalise_their_values() -> None:
    assert Before(datetime(2026, 1, 1)).moment == datetime(2026, 1, 1, tzinfo=UTC)
    plus_two = timezone(timedelta(hours=2))
    assert Before(datetime(2026, 1, 1, 2, tzinfo=plus_two)).moment.tzinfo is UTC
    fade = Fade("x", 1)
    assert isinstance(fade.amount, float)


def test_instructions_are_frozen_and_hashable() -> None:
    instr = Oldest(2)
    with pytest.raises(AttributeError):
        instr.count = 3  # type: ignore[misc]
    assert len({Oldest(2), Oldest(2), All(), All()}) == 2


# --- rejections ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("", "empty"),
        ("   \n\t", "empty"),
        ("olderst 3", "did you mean 'oldest [N]'"),
        ("mathcing 'x'", "did you mean 'matching \"<text>\"'"),
        ("least 3", "did you mean 'least important [N]'"),
        ("older 3 days", "did you mean 'older than <N> days'"),
        ("before:2026-01-01", "did you mean 'before <ISO date> or before turn <N>'"),
        ("newest 3", "unknown instruction 'newest'"),
        ("id", "id:abc123"),
        ("key favourite colour", "key:favourite colour"),
        ("id:", "needs a value"),
        ("key:   ", "needs a value"),
        ('id:"unterminated', "no closing"),
        ('id:"abc" extra', "unexpected 'extra'"),
        ('id:" padded "', "whitespace"),
        ("id:a\x00b", "control characters"),
        ("oldest -3", "at least 1, got -3"),
        ("oldest 0", "at least 1, got 0"),
        ("oldest 2.5", "whole number"),
        ("oldest ٣", "whole number"),
        ("oldest " + "9" * 5000, "too large"),
        ("least important -1", "at least 1"),
        ("before", "needs an ISO date"),
        ("before yesterday", "not an ISO 8601"),
        ("before 2026-13-01", "not an ISO 8601"),
        ("before 2026-02-30", "not an ISO 8601"),
        ("before 2026-01-01 and more", "not an ISO 8601"),
        ("before 0001-01-01T00:00:00+05:00", "out of range"),
        ("before turn", "missing"),
        ("before turn -1", "at least 0, got -1"),
        ("before turn x", "whole number"),
        ("before turn 1 2", "whole number"),
        ("before turns 3", "e.g. before turn 12"),
        ("older than", "needs a number and a unit"),
        ("older than 7", "needs a number and a unit"),
        ("older than 7days", "needs a number and a unit"),
        ("older than 7 months", "unknown unit 'months'"),
        ("older than -7 days", "at least 1, got -7"),
        ("older than 0 days", "at least 1, got 0"),
        ("older than 1.5 days", "whole number"),
        ("older than 99999999999 weeks", "too large"),
        ("matching", "needs quoted text"),
        ('matching "unterminated', 'no closing "'),
        ("matching 'mixed\"", "no closing '"),
        ('matching "a" "b"', "unexpected"),
        ('matching ""', "blank"),
        ("matching '   '", "blank"),
        ("fade", "needs quoted text"),
        ('fade "x" by 1.5', "between 0 and 1, got 1.5"),
        ('fade "x" by -0.1', "between 0 and 1, got -0.1"),
        ('fade "x" by', "'by' needs a number"),
        ('fade "x" by lots', "'by' needs a number"),
        ('fade "x" by nan', "'by' needs a number"),
        ('fade "x" by 1e-3', "'by' needs a number"),
        ('fade "x" 0.3', "add 'by 0.3'"),
        ('fade "x" bye 0.3', "unexpected"),
        ("allx", "unknown instruction"),
        ("banish everything", "unknown instruction 'banish'"),
        ("forget", "say what to forget"),
        ("forget my old job", "'forget anything about my old job'"),
        ("delete the oldest items", "say how many, e.g. 'the oldest 3 items'"),
        ("the 2 oldest 3 items", "give the count once"),
        ("forget the oldest 0 items", "at least 1, got 0"),
        ("forget everything before yesterday", "not an ISO 8601"),
        ("forget anything older than 3 months", "unknown unit 'months'"),
        ("fade the memory about x by 2", "between 0 and 1, got 2"),
        ("fade the memory about x by 150%", "between 0 and 1, got 1.5"),
        ("forget memory id", "cannot tell what 'memory id' selects"),
    ],
)
def test_bad_instructions_are_rejected_helpfully(text: str, hint: str) -> None:
    with pytest.raises(ForgetInstructionError) as caught:
        parse_forget(text)
    error = caught.value
    assert hint in error.message
    assert repr(text) in error.message  # the message quotes the instruction
    assert GRAMMAR_HELP in error.message  # … and lists the grammar
    assert PHRASES_HELP in error.message  # … and the phrasings
    assert error.details["instruction"] == text
    assert hint in error.details["reason"] or hint == "empty"
    assert isinstance(error, ValidationError)
    assert error.to_dict()["error"] == "invalid_forget_instruction"


def test_non_text_is_rejected() -> None:
    with pytest.raises(ForgetInstructionError, match="expected text"):
        parse_forget(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "build",
    [
        lambda: ById(""),
        lambda: ById(" x"),
        lambda: ByKey("a\nb"),
        lambda: ById(5),  # type: ignore[arg-type]
        lambda: Oldest(0),
        lambda: Oldest(True),
        lambda: LeastImportant(-2),
        lambda: BeforeTurn(-1),
        lambda: Before("2026-01-01"),  # type: ignore[arg-type]
        lambda: OlderThan(timedelta(0)),
        lambda: OlderThan(timedelta(hours=-1)),
        lambda: OlderThan(timedelta(minutes=90)),
        lambda: OlderThan(3),  # type: ignore[arg-type]
        lambda: Matching(""),
        lambda: Matching(None),  # type: ignore[arg-type]
        lambda: Fade("x", 1.01),
        lambda: Fade("x", -0.01),
        lambda: Fade("x", float("nan")),
        lambda: Fade("x", "0.3"),  # type: ignore[arg-type]
        lambda: Fade(" "),
    ],
)
def test_invalid_instruction_objects_are_refused(build: Callable[[], object]) -> None:
    with pytest.raises(ForgetInstructionError):
        build()


# --- names and supported forms ---------------------------------------------------------------

ONE_OF_EACH: list[ForgetInstruction] = [
    ById("a"),
    ByKey("k"),
    Oldest(),
    LeastImportant(),
    Before(datetime(2026, 1, 1, tzinfo=UTC)),
    BeforeTurn(3),
    OlderThan(timedelta(days=1)),
    Matching("m"),
    Fade("f"),
    All(),
]


def test_instruction_names_are_the_grammar_keywords() -> None:
    assert [instruction_name(instr) for instr in ONE_OF_EACH] == list(FORGET_KEYWORDS)
    for instr in ONE_OF_EACH:
        assert render_forget(instr).lower().startswith(instruction_name(instr))


def test_require_supported_passes_supported_forms() -> None:
    supported = frozenset({"id", "matching"})
    require_supported(ById("a"), supported, "semantic")
    require_supported(Matching("x"), supported, "semantic")
    require_supported(All(), frozenset(FORGET_KEYWORDS), "episodic")


def test_require_supported_lists_what_is_supported() -> None:
    supported = frozenset({"matching", "id", "all"})
    with pytest.raises(UnsupportedForgetError) as caught:
        require_supported(BeforeTurn(4), supported, "semantic")
    error = caught.value
    assert isinstance(error, ValidationError)
    assert error.details == {
        "memory_type": "semantic",
        "instruction": "before turn",
        "supported": ["id", "matching", "all"],  # grammar order
    }
    assert "semantic" in error.message
    assert "'before turn 4'" in error.message
    assert "'id', 'matching', 'all'" in error.message
    assert error.to_dict()["error"] == "unsupported_forget_instruction"


def test_require_supported_with_nothing_supported() -> None:
    with pytest.raises(UnsupportedForgetError, match="supports no forget instructions") as caught:
        require_supported(All(), frozenset(), "procedural")
    assert caught.value.details["supported"] == []


def test_require_supported_refuses_unknown_keywords() -> None:
    with pytest.raises(ValueError, match="newest"):
        require_supported(All(), frozenset({"all", "newest"}), "working")


# --- mode ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "expected"), [("soft", "soft"), ("hard", "hard"), (" HARD ", "hard"), ("Soft", "soft")]
)
def test_parse_mode(mode: str, expected: str) -> None:
    assert parse_mode(mode) == expected


@pytest.mark.parametrize("mode", ["", "delete", "softly", "purge"])
def test_bad_modes_are_rejected(mode: str) -> None:
    with pytest.raises(ValidationError, match="'soft' or 'hard'") as caught:
        parse_mode(mode)
    assert caught.value.details == {"mode": mode, "allowed": ["soft", "hard"]}


def test_non_text_mode_is_rejected() -> None:
    with pytest.raises(ValidationError, match="'soft' or 'hard'"):
        parse_mode(None)  # type: ignore[arg-type]


# --- canonical text and the round trip -------------------------------------------------------


@pytest.mark.parametrize(
    ("instr", "text"),
    [
        (ById("abc"), "id:abc"),
        (ById('"odd'), "id:'\"odd'"),
        (ByKey("favourite colour"), "key:favourite colour"),
        (Oldest(), "oldest"),
        (Oldest(4), "oldest 4"),
        (LeastImportant(), "least important"),
        (LeastImportant(2), "least important 2"),
        (Before(datetime(2026, 1, 1)), "before 2026-01-01"),
        (Before(datetime(2026, 1, 1, 10, 30, tzinfo=UTC)), "before 2026-01-01T10:30:00Z"),
        (BeforeTurn(0), "before turn 0"),
        (OlderThan(timedelta(hours=1)), "older than 1 hour"),
        (OlderThan(timedelta(hours=36)), "older than 36 hours"),
        (OlderThan(timedelta(days=2)), "older than 2 days"),
        (OlderThan(timedelta(days=7)), "older than 1 week"),
        (OlderThan(timedelta(days=28)), "older than 4 weeks"),
        (Matching("coffee order"), 'matching "coffee order"'),
        (Matching('say "hi"'), "matching 'say \"hi\"'"),
        (Matching('it\'s "both"'), 'matching "it\'s \\"both\\""'),
        (Matching("a\\b"), 'matching "a\\\\b"'),
        (Fade("x"), 'fade "x"'),
        (Fade("x", 0.25), 'fade "x" by 0.25'),
        (Fade("x", 1e-05), 'fade "x" by 0.00001'),
        (All(), "all"),
    ],
)
def test_canonical_text(instr: ForgetInstruction, text: str) -> None:
    assert render_forget(instr) == text
    assert parse_forget(text) == instr


_VALUES = st.text(min_size=1, max_size=40).filter(
    lambda value: value == value.strip() and not any(ord(c) < 32 or ord(c) == 127 for c in value)
)
_TEXTS = st.text(min_size=1, max_size=60).filter(lambda text: bool(text.strip()))
_ZONES = st.sampled_from(
    [UTC, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-11))]
)
_MOMENTS = st.datetimes(
    min_value=datetime(1000, 1, 1), max_value=datetime(9000, 12, 31), timezones=_ZONES
) | st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30))
_COUNTS = st.integers(min_value=1, max_value=10**12)

INSTRUCTIONS: st.SearchStrategy[ForgetInstruction] = st.one_of(
    st.builds(ById, _VALUES),
    st.builds(ByKey, _VALUES),
    st.builds(Oldest, _COUNTS),
    st.builds(LeastImportant, _COUNTS),
    st.builds(Before, _MOMENTS),
    st.builds(BeforeTurn, st.integers(min_value=0, max_value=10**12)),
    st.builds(OlderThan, st.integers(1, 10**7).map(lambda hours: timedelta(hours=hours))),
    st.builds(OlderThan, st.integers(1, 10**5).map(lambda weeks: timedelta(weeks=weeks))),
    st.builds(Matching, _TEXTS),
    st.builds(Fade, _TEXTS, st.floats(min_value=0.0, max_value=1.0)),
    st.builds(Fade, _TEXTS),
    st.just(All()),
)


@HYPOTHESIS
@given(instr=INSTRUCTIONS)
def test_render_then_parse_round_trips(instr: ForgetInstruction) -> None:
    text = render_forget(instr)
    assert parse_forget(text) == instr
    assert parse_forget(f"  \t{text}\n ") == instr
    assert render_forget(parse_forget(text)) == text


@HYPOTHESIS
@given(
    instr=st.one_of(
        st.builds(Oldest, _COUNTS),
        st.builds(LeastImportant, _COUNTS),
        st.builds(Before, _MOMENTS),
        st.builds(BeforeTurn, st.integers(min_value=0, max_value=10**6)),
        st.builds(OlderThan, st.integers(1, 10**6).map(lambda hours: timedelta(hours=hours))),
        st.just(All()),
    ),
    upper=st.booleans(),
)
def test_keywords_are_case_insensitive(instr: ForgetInstruction, upper: bool) -> None:
    text = render_forget(instr)
    assert parse_forget(text.upper() if upper else text.title()) == instr


#: Words of the grammar and its phrasings, to build sentences that get far into the parser.
_WORDS = (
    "forget delete wipe please can you the a oldest earliest least important memory memories id "
    "key # 5 3 0 -2 three items item one before turn 2024-01-01 2024-13 2024 older than week "
    "days months ago more old about what I said told mentioning that mentions of fade weaken "
    "slightly strongly a little completely by half 30% 150% 0.3 all everything it matching 'x' "
    '"y" "unclosed : . ? ! with number ſlightly K'
).split()
_SENTENCES = st.lists(st.sampled_from(_WORDS) | st.text(max_size=4), min_size=1, max_size=12).map(
    " ".join
)


@HYPOTHESIS
@given(
    text=st.text(max_size=80) | st.sampled_from(FORGET_KEYWORDS).map(lambda k: k + " ") | _SENTENCES
)
def test_any_text_parses_or_fails_cleanly(text: str) -> None:
    instr: ForgetInstruction | ForgetInstructionError
    try:
        instr = parse_forget(text)
    except ForgetInstructionError as error:
        instr = error
    if isinstance(instr, ForgetInstructionError):
        assert instr.details["instruction"] == text
    else:
        assert parse_forget(render_forget(instr)) == instr
