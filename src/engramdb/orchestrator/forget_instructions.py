"""The forget instructions, one frozen dataclass per form of the forget grammar
(``ById``, ``ByKey``, ``Oldest``, ``LeastImportant``, ``Before``, ``BeforeTurn``,
``OlderThan``, ``Matching``, ``Fade``, ``All``), their canonical text (``render_forget``), the
errors of a bad instruction (``ForgetInstructionError``) or of one a memory type does not
handle (``UnsupportedForgetError``), and the check each memory type makes
(``require_supported``). ``forget_grammar`` reads text into these.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any, ClassVar, Literal, TypeAlias

from engramdb.core.errors import ValidationError

GRAMMAR_HELP = """\
forget instructions (keywords are case-insensitive):
  id:<id>                            the item with this id
  key:<key>                          the item with this semantic key
  oldest [N]                         the N oldest items (default 1)
  least important [N]                the N least important items (default 1)
  before <ISO date or datetime>      items from before then, e.g. before 2026-01-01 (naive = UTC)
  before turn <N>                    items from before turn N
  older than <N> hours|days|weeks    items older than that, e.g. older than 30 days
  matching "<text>"                  items matching the text (double or single quotes)
  fade "<text>" [by <0..1>]          lower the importance of matching items (default by 0.5)
  all                                every item"""

PHRASES_HELP = """\
or in words (a verb such as forget, delete or remove may lead), for example:
  memory id 5 / forget memory 5                  id:5
  oldest item / delete the oldest 3 items        oldest 3
  the 2 least important memories                least important 2
  forget everything before 2024-01-01            before 2024-01-01
  everything before turn 12                      before turn 12
  anything older than a week                     older than 1 week
  forget what I said about my old job            matching "my old job"
  slightly fade the memory about the bike        fade "the bike" by 0.25 (a little, strongly,
                                                 completely, by 30%)
  forget all / everything                        all"""

FORGET_KEYWORDS: tuple[str, ...] = (
    "id",
    "key",
    "oldest",
    "least important",
    "before",
    "before turn",
    "older than",
    "matching",
    "fade",
    "all",
)
"""Every instruction keyword, in grammar order (what ``instruction_name`` returns)."""

DEFAULT_FADE_AMOUNT = 0.5
_HOUR = timedelta(hours=1)
_DAY = timedelta(days=1)
_WEEK = timedelta(weeks=1)
QUOTES = "\"'"
"""The quote characters quoted text may use."""
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ForgetInstructionError(ValidationError):
    """A forget instruction does not follow the grammar (or an instruction object is invalid).

    ``details``: ``instruction`` (the text as given) and ``reason`` (what is wrong with it).
    The message quotes the instruction, says what is wrong, and lists the grammar and the
    phrasings it also reads.
    """

    code = "invalid_forget_instruction"

    def __init__(self, instruction: str, reason: str, **details: Any) -> None:
        message = (
            f"invalid forget instruction {instruction!r}: {reason}\n{GRAMMAR_HELP}\n{PHRASES_HELP}"
        )
        super().__init__(message, instruction=instruction, reason=reason, **details)


class UnsupportedForgetError(ValidationError):
    """A valid forget instruction that this memory type does not handle.

    ``details``: ``memory_type``, ``instruction`` (its keyword), ``supported`` (the keywords the
    memory type does handle, in grammar order).
    """

    code = "unsupported_forget_instruction"


def _invalid(instr: object, reason: str) -> ForgetInstructionError:
    return ForgetInstructionError(repr(instr), reason)


def _check_value(instr: object, what: str, value: object) -> None:
    """Ids and keys: non-empty text, no control characters, no whitespace at either end."""
    if not isinstance(value, str):
        raise _invalid(instr, f"the {what} must be a string, got {type(value).__name__}")
    if not value:
        raise _invalid(instr, f"the {what} is empty")
    if value != value.strip():
        raise _invalid(instr, f"the {what} {value!r} has whitespace at either end")
    if _CONTROL.search(value):
        raise _invalid(instr, f"the {what} {value!r} has control characters")


def _check_text(instr: object, text: object) -> None:
    if not isinstance(text, str):
        raise _invalid(instr, f"the text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise _invalid(instr, "the quoted text is blank; to forget everything, use 'all'")


def _check_int(instr: object, what: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _invalid(instr, f"{what} must be a whole number, got {value!r}")
    if value < minimum:
        raise _invalid(instr, f"{what} must be at least {minimum}, got {value}")


@dataclass(frozen=True, slots=True)
class ById:
    """``id:<id>`` — the one item with this id."""

    keyword: ClassVar[str] = "id"
    id: str

    def __post_init__(self) -> None:
        _check_value(self, "id", self.id)


@dataclass(frozen=True, slots=True)
class ByKey:
    """``key:<key>`` — the item stored under this semantic key."""

    keyword: ClassVar[str] = "key"
    key: str

    def __post_init__(self) -> None:
        _check_value(self, "key", self.key)


@dataclass(frozen=True, slots=True)
class Oldest:
    """``oldest [N]`` — the ``count`` oldest items."""

    keyword: ClassVar[str] = "oldest"
    count: int = 1

    def __post_init__(self) -> None:
        _check_int(self, "the count", self.count, 1)


@dataclass(frozen=True, slots=True)
class LeastImportant:
    """``least important [N]`` — the ``count`` least important items."""

    keyword: ClassVar[str] = "least important"
    count: int = 1

    def __post_init__(self) -> None:
        _check_int(self, "the count", self.count, 1)


@dataclass(frozen=True, slots=True)
class Before:
    """``before <ISO date or datetime>`` — items from before ``moment``.

    ``moment`` is normalised to UTC: a naive datetime is taken as UTC, an aware one converted.
    """

    keyword: ClassVar[str] = "before"
    moment: datetime

    def __post_init__(self) -> None:
        moment: object = self.moment
        if not isinstance(moment, datetime):
            raise _invalid(self, f"the moment must be a datetime, got {type(moment).__name__}")
        if moment.tzinfo is None or moment.utcoffset() is None:
            moment = moment.replace(tzinfo=UTC)
        else:
            try:
                moment = moment.astimezone(UTC)
            except OverflowError:
                raise _invalid(self, "the moment is out of range in UTC") from None
        object.__setattr__(self, "moment", moment)


@dataclass(frozen=True, slots=True)
class BeforeTurn:
    """``before turn <N>`` — items from turns numbered below ``turn``."""

    keyword: ClassVar[str] = "before turn"
    turn: int

    def __post_init__(self) -> None:
        _check_int(self, "the turn", self.turn, 0)


@dataclass(frozen=True, slots=True)
class OlderThan:
    """``older than <N> hours|days|weeks`` — items older than ``delta`` (a positive number of
    whole hours)."""

    keyword: ClassVar[str] = "older than"
    delta: timedelta

    def __post_init__(self) -> None:
        delta: object = self.delta
        if not isinstance(delta, timedelta):
            raise _invalid(self, f"the age must be a timedelta, got {type(delta).__name__}")
        if delta <= timedelta(0):
            raise _invalid(self, "the age must be positive")
        if delta % _HOUR:
            raise _invalid(self, "the age must be a whole number of hours")


@dataclass(frozen=True, slots=True)
class Matching:
    """``matching "<text>"`` — items matching ``text``."""

    keyword: ClassVar[str] = "matching"
    text: str

    def __post_init__(self) -> None:
        _check_text(self, self.text)


@dataclass(frozen=True, slots=True)
class Fade:
    """``fade "<text>" [by <0..1>]`` — lower the importance of items matching ``text`` by
    ``amount`` (0 to 1) instead of forgetting them."""

    keyword: ClassVar[str] = "fade"
    text: str
    amount: float = field(default=DEFAULT_FADE_AMOUNT)

    def __post_init__(self) -> None:
        _check_text(self, self.text)
        amount: object = self.amount
        if isinstance(amount, bool) or not isinstance(amount, int | float):
            raise _invalid(self, f"the fade amount must be a number, got {amount!r}")
        if not 0.0 <= amount <= 1.0:  # also rejects NaN
            raise _invalid(self, f"the fade amount must be between 0 and 1, got {amount!r}")
        object.__setattr__(self, "amount", float(amount))


@dataclass(frozen=True, slots=True)
class All:
    """``all`` — every item."""

    keyword: ClassVar[str] = "all"


ForgetInstruction: TypeAlias = (
    ById | ByKey | Oldest | LeastImportant | Before | BeforeTurn | OlderThan | Matching | Fade | All
)
"""One parsed forget instruction."""


def instruction_name(instr: ForgetInstruction) -> str:
    """The grammar keyword of ``instr``: one of ``FORGET_KEYWORDS``."""
    return instr.keyword


def require_supported(
    instr: ForgetInstruction, supported: frozenset[str], memory_type: str
) -> None:
    """Raise ``UnsupportedForgetError`` unless ``memory_type`` supports ``instr``'s form.

    ``supported`` holds keywords from ``FORGET_KEYWORDS``; an unknown keyword in it is a bug
    in the memory type and raises ``ValueError``.
    """
    unknown = supported - set(FORGET_KEYWORDS)
    if unknown:
        raise ValueError(f"unknown forget keywords declared by {memory_type}: {sorted(unknown)}")
    name = instruction_name(instr)
    if name in supported:
        return
    listed = [keyword for keyword in FORGET_KEYWORDS if keyword in supported]
    if listed:
        what = "it supports: " + ", ".join(repr(keyword) for keyword in listed)
    else:
        what = "it supports no forget instructions"
    raise UnsupportedForgetError(
        f"{memory_type} memory does not support the forget instruction "
        f"{render_forget(instr)!r} ({name!r}); {what}",
        memory_type=memory_type,
        instruction=name,
        supported=listed,
    )


def parse_mode(mode: str) -> Literal["soft", "hard"]:
    """The forget mode: ``"soft"`` (recoverable) or ``"hard"`` (erased); case-insensitive."""
    if isinstance(mode, str):
        normalised = mode.strip().lower()
        if normalised == "soft":
            return "soft"
        if normalised == "hard":
            return "hard"
    raise ValidationError(
        f"forget mode must be 'soft' or 'hard', got {mode!r}",
        mode=mode if isinstance(mode, str) else repr(mode),
        allowed=["soft", "hard"],
    )


# ---------------------------------------------------------------------------------------------
# Rendering


def quote_text(text: str) -> str:
    """``text`` in quotes, escaped so the grammar reads it back as it is."""
    quote = "'" if '"' in text and "'" not in text else '"'
    escaped = text.replace("\\", "\\\\").replace(quote, "\\" + quote)
    return f"{quote}{escaped}{quote}"


def _bare_or_quoted(value: str) -> str:
    return quote_text(value) if value[0] in QUOTES else value


def _render_amount(amount: float) -> str:
    # repr is the shortest text that reads back as the same float; Decimal spells it without
    # an exponent (1e-05 → 0.00001), which is what the grammar accepts.
    return format(Decimal(repr(amount)), "f")


def _render_age(delta: timedelta) -> str:
    hours = delta // _HOUR
    if delta % _WEEK == timedelta(0):
        number, unit = delta // _WEEK, "week"
    elif delta % _DAY == timedelta(0):
        number, unit = delta // _DAY, "day"
    else:
        number, unit = hours, "hour"
    return f"{number} {unit}" + ("" if number == 1 else "s")


def _render_moment(moment: datetime) -> str:
    if moment.hour == moment.minute == moment.second == moment.microsecond == 0:
        return moment.date().isoformat()
    return moment.replace(tzinfo=None).isoformat() + "Z"


def render_forget(instr: ForgetInstruction) -> str:
    """The canonical text of ``instr``; ``parse_forget`` reads it back as an equal instruction."""
    match instr:
        case ById(id=value):
            return f"id:{_bare_or_quoted(value)}"
        case ByKey(key=value):
            return f"key:{_bare_or_quoted(value)}"
        case Oldest(count=count):
            return "oldest" if count == 1 else f"oldest {count}"
        case LeastImportant(count=count):
            return "least important" if count == 1 else f"least important {count}"
        case Before(moment=moment):
            return f"before {_render_moment(moment)}"
        case BeforeTurn(turn=turn):
            return f"before turn {turn}"
        case OlderThan(delta=delta):
            return f"older than {_render_age(delta)}"
        case Matching(text=text):
            return f"matching {quote_text(text)}"
        case Fade(text=text, amount=amount):
            rendered = f"fade {quote_text(text)}"
            if amount != DEFAULT_FADE_AMOUNT:
                rendered += f" by {_render_amount(amount)}"
            return rendered
        case All():
            return "all"
    raise TypeError(f"not a forget instruction: {instr!r}")  # pragma: no cover
