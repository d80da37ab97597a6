"""The ``forget(instructions, mode)`` grammar, parsed the same way by every memory type.

An instruction is one line of text. Keywords are case-insensitive; whitespace around the
instruction and between words is ignored; ids, keys and quoted text keep their case.

=======================================  =========================  ===========================
Instruction                              Parsed as                  Selects
=======================================  =========================  ===========================
``id:<id>``                              ``ById(id)``               the item with this id
``key:<key>``                            ``ByKey(key)``             the item with this key
``oldest`` / ``oldest <N>``              ``Oldest(count=N)``        the N oldest items (N ≥ 1,
                                                                    default 1)
``least important [<N>]``                ``LeastImportant(count)``  the N least important items
``before <ISO date or datetime>``        ``Before(moment)``         items from before the
                                                                    moment (naive times are UTC)
``before turn <N>``                      ``BeforeTurn(turn=N)``     items from before turn N
                                                                    (N ≥ 0)
``older than <N> hours|days|weeks``      ``OlderThan(delta)``       items older than N units
                                                                    (N ≥ 1; ``1 day`` works too)
``matching "<text>"``                    ``Matching(text)``         items matching the text
``fade "<text>" [by <0..1>]``            ``Fade(text, amount)``     lower the importance of
                                                                    matching items (default 0.5)
``all``                                  ``All()``                  every item
=======================================  =========================  ===========================

Quoted text takes double or single quotes and may hold spaces; inside it ``\\"``, ``\\'`` and
``\\\\`` stand for the quote or backslash, and any other backslash is kept as written. An id
or key may also be quoted (needed only when it starts with a quote).

The same instructions may be written in words — "memory id 5", "delete the oldest 3 items",
"slightly fade the memory about …" — which ``forget_phrases`` reads as this grammar's text.

``parse_forget`` turns text into a ``ForgetInstruction``; ``render_forget`` turns one back into
its canonical text (``parse_forget(render_forget(i)) == i``). Each memory type declares which
forms it supports by keyword (``instruction_name``) and calls ``require_supported``. Bad text
raises ``ForgetInstructionError``; a form a memory type does not handle raises
``UnsupportedForgetError``; both are ``ValidationError``, so nothing is forgotten.
"""

from __future__ import annotations

import difflib
import re
from datetime import datetime, timedelta

from engramdb.orchestrator.forget_instructions import (
    DEFAULT_FADE_AMOUNT,
    FORGET_KEYWORDS,
    GRAMMAR_HELP,
    PHRASES_HELP,
    QUOTES,
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
    parse_mode,
    render_forget,
    require_supported,
)
from engramdb.orchestrator.forget_phrases import PhraseRejected, phrase_to_grammar

__all__ = [
    "FORGET_KEYWORDS",
    "GRAMMAR_HELP",
    "PHRASES_HELP",
    "All",
    "Before",
    "BeforeTurn",
    "ById",
    "ByKey",
    "Fade",
    "ForgetInstruction",
    "ForgetInstructionError",
    "LeastImportant",
    "Matching",
    "OlderThan",
    "Oldest",
    "UnsupportedForgetError",
    "instruction_name",
    "parse_forget",
    "parse_mode",
    "render_forget",
    "require_supported",
]

# ---------------------------------------------------------------------------------------------
# Parsing

_I = re.IGNORECASE
_END = r"(?=\s|$)"
_HEADS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("id", re.compile(r"id\s*:", _I)),
    ("key", re.compile(r"key\s*:", _I)),
    ("oldest", re.compile(r"oldest" + _END, _I)),
    ("least important", re.compile(r"least\s+important" + _END, _I)),
    ("before turn", re.compile(r"before\s+turn" + _END, _I)),
    ("before", re.compile(r"before" + _END, _I)),
    ("older than", re.compile(r"older\s+than" + _END, _I)),
    ("matching", re.compile(r"matching(?=[\s\"']|$)", _I)),
    ("fade", re.compile(r"fade(?=[\s\"']|$)", _I)),
    ("all", re.compile(r"all" + _END, _I)),
)
_INTEGER = re.compile(r"[+-]?[0-9]+")
_AMOUNT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)")
_BY = re.compile(r"by(?:\s+(?P<amount>.*))?", _I | re.DOTALL)
_AGE = re.compile(r"(?P<number>\S+)\s+(?P<unit>\S+)", _I)
_UNITS = {
    "hour": timedelta(hours=1),
    "hours": timedelta(hours=1),
    "day": timedelta(days=1),
    "days": timedelta(days=1),
    "week": timedelta(weeks=1),
    "weeks": timedelta(weeks=1),
}
# The first word of each form and the form it starts, for "did you mean" hints.
_FIRST_WORDS = {
    "id": "id:<id>",
    "key": "key:<key>",
    "oldest": "oldest [N]",
    "least": "least important [N]",
    "before": "before <ISO date> or before turn <N>",
    "older": "older than <N> days",
    "matching": 'matching "<text>"',
    "fade": 'fade "<text>" [by <0..1>]',
    "all": "all",
}


class _Reject(Exception):
    """Internal: a reason the text does not parse; ``parse_forget`` adds the text."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _integer(token: str, what: str, minimum: int, example: str) -> int:
    if not token:
        raise _Reject(f"{what} is missing, e.g. {example!r}")
    if not _INTEGER.fullmatch(token):
        raise _Reject(f"{what} must be a whole number, got {token!r} (e.g. {example!r})")
    try:
        number = int(token)
    except ValueError:  # more digits than Python converts
        raise _Reject(f"{what} {token[:20]}… is too large") from None
    if number < minimum:
        raise _Reject(f"{what} must be at least {minimum}, got {number}")
    return number


def _quoted(rest: str, keyword: str) -> tuple[str, str]:
    """Split ``rest`` into the quoted text at its start and what follows the closing quote."""
    if not rest:
        raise _Reject(f'{keyword!r} needs quoted text, e.g. {keyword} "coffee order"')
    quote = rest[0]
    if quote not in QUOTES:
        raise _Reject(
            f'{keyword!r} needs its text in double or single quotes, e.g. {keyword} "{rest}"'
        )
    chars: list[str] = []
    index = 1
    while index < len(rest):
        char = rest[index]
        if char == "\\" and index + 1 < len(rest) and rest[index + 1] in QUOTES + "\\":
            chars.append(rest[index + 1])
            index += 2
            continue
        if char == quote:
            return "".join(chars), rest[index + 1 :].strip()
        chars.append(char)
        index += 1
    raise _Reject(f"the quoted text has no closing {quote}")


def _value(rest: str, keyword: str) -> str:
    if not rest:
        raise _Reject(f"{keyword!r} needs a value after the colon, e.g. {keyword}:abc123")
    if rest[0] not in QUOTES:
        return rest
    value, after = _quoted(rest, keyword)
    if after:
        raise _Reject(f"unexpected {after!r} after the quoted {keyword}")
    return value


def _count(rest: str, keyword: str) -> int:
    if not rest:
        return 1
    return _integer(rest, f"the count after {keyword!r}", 1, f"{keyword} 5")


def _moment(rest: str) -> datetime:
    if not rest:
        raise _Reject("'before' needs an ISO date or datetime, e.g. before 2026-01-01")
    if rest.lower().startswith("turn"):
        raise _Reject("'before turn' needs a turn number, e.g. before turn 12")
    try:
        moment = datetime.fromisoformat(rest.upper())
    except (ValueError, OverflowError):
        raise _Reject(
            f"{rest!r} is not an ISO 8601 date or datetime "
            "(e.g. 2026-01-01 or 2026-01-01T10:00:00Z); for an age use 'older than 7 days'"
        ) from None
    return moment


def _age(rest: str) -> timedelta:
    example = "older than 7 days"
    match = _AGE.fullmatch(rest)
    if match is None:
        raise _Reject(
            f"'older than' needs a number and a unit (hours, days, weeks), e.g. {example!r}"
        )
    number = _integer(match["number"], "the age", 1, example)
    unit = _UNITS.get(match["unit"].lower())
    if unit is None:
        raise _Reject(f"unknown unit {match['unit']!r}; use hours, days or weeks")
    try:
        return number * unit
    except OverflowError:
        raise _Reject(f"the age {number} {match['unit']} is too large") from None


def _amount(rest: str) -> float:
    if not rest:
        return DEFAULT_FADE_AMOUNT
    match = _BY.fullmatch(rest)
    if match is None:
        raise _Reject(f"unexpected {rest!r} after the quoted text; to set how much, add 'by 0.3'")
    token = (match["amount"] or "").strip()
    if not _AMOUNT.fullmatch(token):
        raise _Reject(f"'by' needs a number between 0 and 1, e.g. by 0.3; got {token!r}")
    amount = float(token)
    if not 0.0 <= amount <= 1.0:
        raise _Reject(f"the fade amount must be between 0 and 1, got {token}")
    return amount


def _unknown(text: str) -> _Reject:
    words = text.split(maxsplit=1)
    first = words[0].lower()
    if first in ("id", "key"):
        value = words[1] if len(words) > 1 else "abc123"
        return _Reject(f"write {first} with a colon: {first}:{value}")
    guess = difflib.get_close_matches(first.split(":")[0], list(_FIRST_WORDS), n=1, cutoff=0.6)
    hint = f"; did you mean {_FIRST_WORDS[guess[0]]!r}?" if guess else ""
    return _Reject(f"unknown instruction {first!r}{hint}")


def _parse(text: str) -> ForgetInstruction:
    for keyword, head in _HEADS:
        match = head.match(text)
        if match is None:
            continue
        rest = text[match.end() :].strip()
        if keyword == "id":
            return ById(_value(rest, keyword))
        if keyword == "key":
            return ByKey(_value(rest, keyword))
        if keyword == "oldest":
            return Oldest(_count(rest, keyword))
        if keyword == "least important":
            return LeastImportant(_count(rest, keyword))
        if keyword == "before turn":
            return BeforeTurn(_integer(rest, "the turn", 0, "before turn 12"))
        if keyword == "before":
            return Before(_moment(rest))
        if keyword == "older than":
            return OlderThan(_age(rest))
        if keyword == "matching":
            quoted, after = _quoted(rest, keyword)
            if after:
                raise _Reject(f"unexpected {after!r} after the quoted text")
            return Matching(quoted)
        if keyword == "fade":
            quoted, after = _quoted(rest, keyword)
            return Fade(quoted, _amount(after))
        if rest:  # keyword == "all"
            raise _Reject(f"'all' takes nothing after it, got {rest!r}")
        return All()
    raise _unknown(text)


def _exact(text: str, given: str) -> ForgetInstruction:
    """``text`` read by the exact grammar; errors quote ``given``, what the caller wrote."""
    try:
        return _parse(text)
    except _Reject as reject:
        raise ForgetInstructionError(given, reject.reason) from None
    except ForgetInstructionError as error:  # an instruction object refused its values
        raise ForgetInstructionError(given, error.details["reason"]) from None


def parse_forget(text: str, *, phrases: bool = True) -> ForgetInstruction:
    """Parse one forget instruction: the grammar (see the module docstring), else, with
    ``phrases``, the same instructions in words (``forget_phrases``: "memory id 5", "delete
    the oldest 3 items", "slightly fade the memory about …").

    Raises:
        ForgetInstructionError: the text is neither; the message says why and lists the
            grammar and the phrasings.
    """
    if not isinstance(text, str):
        raise ForgetInstructionError(repr(text), f"expected text, got {type(text).__name__}")
    stripped = text.strip()
    if not stripped:
        raise ForgetInstructionError(text, "the instruction is empty")
    try:
        return _exact(stripped, text)
    except ForgetInstructionError:
        if not phrases:
            raise
        try:
            rewritten = phrase_to_grammar(stripped)
        except PhraseRejected as rejected:
            raise ForgetInstructionError(text, rejected.reason) from None
        if rewritten is None or rewritten == stripped:
            raise
    return _exact(rewritten, text)
