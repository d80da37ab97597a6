"""Forget instructions in words — the spec's own ("memory id 5", "oldest item", "slightly
fade the memory about being on a bike at 5 years old") and their everyday variants — read as
the text of the exact grammar, which then checks every value.

=================================================================  ============================
In words (a verb — forget, delete, remove, erase, drop, clear,     Grammar
wipe, discard, purge — may lead; "please" is ignored)
=================================================================  ============================
memory id 5 · memory 5 · item #5 · the memory with id 5 · id 5     ``id:5``
key user.city · the fact with key user.city                        ``key:user.city``
oldest item · the oldest 3 items · the 3 earliest memories         ``oldest [N]``
the least important item · the 2 least important memories          ``least important [N]``
everything before 2024-01-01 · anything from before 2024 ·         ``before 2024-01-01``
before timestamp 2024-01-01T10:00:00Z · prior to 2024-05
everything before turn 12 · the turns before 12                    ``before turn 12``
anything older than 30 days · older than a week · more than 2      ``older than 30 days``
weeks old · everything before 3 days ago
what I said about X · anything about X · the memory about X ·      ``matching "X"``
everything mentioning X · matching X · "X"
fade the memory about X · fade X a little / slightly / strongly /  ``fade "X" [by …]``
completely / by half / by 30% · weaken …, dim …
all · everything · all memories · all of it                        ``all``
=================================================================  ============================

Numbers may be spelled (one to twelve, "a week"). "A little", "slightly" and the like fade by
0.25, "strongly" and the like by 0.75, "completely" by 1. Free text after a verb needs a
word that says how it selects ("about", "mentioning", "matching", …) or quotes: "forget my
job" is refused rather than guessed at. Sentences longer than ``MAX_PHRASE_CHARS`` are not read
as phrases (the grammar's quoted forms take any length).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from engramdb.orchestrator.forget_instructions import QUOTES, quote_text

__all__ = ["MAX_PHRASE_CHARS", "PhraseRejected", "phrase_to_grammar"]

MAX_PHRASE_CHARS = 500

_I = re.IGNORECASE | re.DOTALL | re.ASCII  # no "ſ" for "s": keywords are ASCII
_NUMBERS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_COUNT = r"[0-9]+|" + "|".join(_NUMBERS)
_SINGULAR = r"memory|item|entry|record|thing|one|fact|note|message|turn|episode|event"
_PLURAL = r"memories|items|entries|records|things|ones|facts|notes|messages|turns|episodes|events"
_NOUN = rf"{_PLURAL}|{_SINGULAR}"
_DEGREES = {
    "a little bit": 0.25,
    "a little": 0.25,
    "a bit": 0.25,
    "slightly": 0.25,
    "somewhat": 0.25,
    "gently": 0.25,
    "lightly": 0.25,
    "a lot": 0.75,
    "strongly": 0.75,
    "heavily": 0.75,
    "greatly": 0.75,
    "mostly": 0.75,
    "significantly": 0.75,
    "completely": 1.0,
    "entirely": 1.0,
    "fully": 1.0,
    "totally": 1.0,
    "by half": 0.5,
}
_DEGREE = "|".join(d.replace(" ", r"\s+") for d in sorted(_DEGREES, key=len, reverse=True))

_POLITE = re.compile(r"(?:please\s+|(?:can|could|would|will)\s+you\s+)+", _I)
_FORGET = re.compile(
    r"(?:forget|delete|remove|erase|drop|clear|wipe(?:\s+out)?|discard|purge|"
    r"get\s+rid\s+of|throw\s+away)(?=\s|$)\s*",
    _I,
)
_FADE = re.compile(
    rf"(?:(?P<degree>{_DEGREE})\s+)?(?:fade(?:\s+out)?|dim|weaken|soften|"
    r"(?:lower|reduce|decrease)\s+the\s+importance\s+of)(?=\s|$)\s*(?P<rest>.*)",
    _I,
)
_FADE_AMOUNT = re.compile(
    rf"(?P<object>.*?)\s(?:(?P<degree>{_DEGREE})|by\s+(?P<percent>[0-9]{{1,3}}(?:\.[0-9]+)?)\s*%"
    r"|by\s+(?P<amount>[-+]?[0-9.]\S*))",
    _I,
)
_ALL = re.compile(
    r"(?:it\s+)?all(?:\s+of\s+(?:it|them|this|that))?|everything(?:\s+you\s+(?:know|remember|"
    rf"have(?:\s+stored)?))?|all\s+(?:of\s+)?(?:the\s+|my\s+|your\s+)?(?:{_PLURAL})|"
    rf"every\s+(?:single\s+)?(?:{_SINGULAR})|(?:the\s+)?whole\s+lot",
    _I,
)
_RANKED = re.compile(
    rf"(?:the\s+)?(?:(?P<before>{_COUNT})\s+)?(?P<rank>oldest|earliest|first|least\s+important)"
    rf"(?:\s+(?P<after>{_COUNT}))?(?:\s+(?P<noun>{_NOUN}))?",
    _I,
)
_VALUE = r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s:#=\"']\S*)"
_ID = re.compile(
    rf"(?:the\s+)?(?:(?:{_SINGULAR})\s+)?(?:(?:with|of)\s+(?:the\s+)?)?"
    rf"(?:id|number|no\.|#)\s*[:#=]?\s*{_VALUE}",
    _I,
)
#: "memory 5": a bare value is an id only after a noun that ids name, and only with a digit.
_BARE_ID = re.compile(
    r"(?:the\s+)?(?:memory|item|entry|record|fact|note)\s+#?(?P<value>[^\s\"']*[0-9]\S*)", _I
)
_KEY = re.compile(
    rf"(?:the\s+)?(?:(?:{_SINGULAR})\s+)?(?:(?:with|under|at|for)\s+(?:the\s+)?)?"
    rf"key\s*[:=]?\s*{_VALUE}",
    _I,
)
#: Words that only say "the items": dropped before the words that select.
_FILLER = frozenset(
    "everything anything all any every each the my your of that which are is were was have "
    "has been created written stored saved added made from those these".split()
)
#: What a bare text to fade may start with that is not part of it.
_ARTICLES = frozenset("the a an this that these those".split())
_NOUNS = frozenset(f"{_NOUN}".split("|"))
_TURN_NOUNS = frozenset({"turn", "turns", "message", "messages"})
_BEFORE_TURN = re.compile(r"before\s+(?:the\s+)?turn\s+#?(?P<n>\S+)", _I)
_BEFORE_NUMBER = re.compile(r"before\s+#?(?P<n>[0-9]+)", _I)
_BEFORE = re.compile(
    r"(?:before|prior\s+to|earlier\s+than)\s+(?:the\s+)?(?:(?:timestamp|date|time|day)\s+)?"
    r"(?P<when>.+)",
    _I,
)
_OLDER = re.compile(r"older\s+than\s+(?P<age>.+)", _I)
_MORE_THAN = re.compile(r"more\s+than\s+(?P<n>\S+)\s+(?P<unit>\S+)\s+(?:old|ago)", _I)
_AGO = re.compile(r"(?P<n>\S+)\s+(?P<unit>\S+)\s+ago", _I)
_AGE = re.compile(r"(?P<n>\S+)\s+(?P<unit>\S+)", _I)
_YEAR_MONTH = re.compile(r"[0-9]{4}(?:-[0-9]{2})?")
_ISO_START = re.compile(r"[0-9]{4}-")
_ABOUT = re.compile(
    r"(?:(?:the|a|an|any|all|every|each|my|your|of|those|these|everything|anything|something|"
    r"stuff|what|whatever)\s+){0,4}"
    rf"(?:(?:{_NOUN})\s+)?(?:(?:that|which)\s+(?:are|is|were|was)\s+)?"
    r"(?:(?:i|we|you)\s+(?:said|told\s+you|wrote|mentioned|know|remember|discussed|"
    r"talked)\s+)?(?:about|regarding|concerning|mentioning|containing|matching|on|of|"
    r"related\s+to|to\s+do\s+with|(?:that|which)\s+(?:mentions?|contains?|match(?:es)?))\s+"
    r"(?P<text>.+)",
    _I,
)


class PhraseRejected(Exception):
    """A sentence that reads as a forget phrase but cannot be one; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _number(token: str) -> str:
    """A count as digits: spelled numbers and "a"/"an" become digits, the rest is kept for the
    grammar to judge."""
    lowered = token.lower()
    if lowered in ("a", "an"):
        return "1"
    return str(_NUMBERS[lowered]) if lowered in _NUMBERS else token


def _text(raw: str) -> str | None:
    """Free text as the grammar's quoted text: quoted text is passed on as written (the
    grammar checks it), anything else is quoted."""
    text = raw.strip()
    if not text:
        return None
    return text if text[0] in QUOTES else quote_text(text)


def _drop_filler(words: str, filler: frozenset[str] = _FILLER) -> tuple[str, set[str]]:
    """``words`` without its leading ``filler`` and item nouns, and the nouns it named."""
    nouns: set[str] = set()
    rest = words
    while rest:
        head, *tail = re.split(r"\s+", rest, maxsplit=1)
        lowered = head.lower()
        if lowered in _NOUNS:
            nouns.add(lowered)
        elif lowered not in filler:
            break
        rest = tail[0] if tail else ""
    return rest, nouns


def _moment(when: str) -> str:
    """The grammar text for a time something is before: an age ago, a year or month, a date."""
    when = when.strip()
    ago = _AGO.fullmatch(when)
    if ago:
        return f"older than {_number(ago['n'])} {ago['unit']}"
    if _YEAR_MONTH.fullmatch(when):
        return "before " + (when + "-01-01" if len(when) == 4 else when + "-01")
    return f"before {when}"


def _age(age: str) -> str:
    age = age.strip()
    if _ISO_START.match(age) or _YEAR_MONTH.fullmatch(age):
        return _moment(age)  # "older than 2024-01-01" names a date
    if age.lower().endswith(" ago"):
        age = age[:-4].rstrip()
    found = _AGE.fullmatch(age)
    return f"older than {_number(found['n'])} {found['unit']}" if found else f"older than {age}"


def _ranked(found: re.Match[str]) -> str:
    if found["before"] and found["after"]:
        raise PhraseRejected("give the count once, e.g. 'the oldest 3 items'")
    count = found["before"] or found["after"]
    rank = "least important" if found["rank"].lower().startswith("least") else "oldest"
    if count is None:
        noun = (found["noun"] or "").lower()
        if noun and noun not in _SINGULAR.split("|"):
            raise PhraseRejected(f"say how many, e.g. 'the {rank} 3 {noun}'")
        return rank
    return f"{rank} {_number(count)}"


def _selection(words: str) -> str | None:
    """The grammar text for what ``words`` select, or ``None``."""
    if not words:
        return None
    if words[0] in QUOTES:
        return f"matching {words}"
    exact: list[tuple[re.Pattern[str], Callable[[re.Match[str]], str]]] = [
        (_ALL, lambda _: "all"),
        (_RANKED, _ranked),
        (_ID, lambda m: f"id:{m['value']}"),
        (_BARE_ID, lambda m: f"id:{m['value']}"),
        (_KEY, lambda m: f"key:{m['value']}"),
    ]
    for pattern, build in exact:
        found = pattern.fullmatch(words)
        if found:
            return build(found)
    if (found := _ABOUT.fullmatch(words)) and (text := _text(found["text"])):
        return f"matching {text}"
    rest, nouns = _drop_filler(words)
    if (found := _BEFORE_TURN.fullmatch(rest)) or (
        nouns & _TURN_NOUNS and (found := _BEFORE_NUMBER.fullmatch(rest))
    ):
        return f"before turn {found['n']}"
    if found := _BEFORE.fullmatch(rest):
        return _moment(found["when"])
    if found := _OLDER.fullmatch(rest):
        return _age(found["age"])
    if found := _MORE_THAN.fullmatch(rest):
        return f"older than {_number(found['n'])} {found['unit']}"
    return None


def _fade(degree: str | None, rest: str) -> str | None:
    if not rest:
        return None  # the grammar's own "needs quoted text" says it best
    amount = _DEGREES[" ".join(degree.lower().split())] if degree else None
    given: str | None = None
    if found := _FADE_AMOUNT.fullmatch(rest):
        rest = found["object"]
        if found["degree"]:
            amount = _DEGREES[" ".join(found["degree"].lower().split())]
        elif found["percent"]:
            amount = float(found["percent"]) / 100
        else:
            given = found["amount"]
    about = _ABOUT.fullmatch(rest.strip())
    text = _text(about["text"] if about else _drop_filler(rest.strip(), _ARTICLES)[0])
    if text is None:
        raise PhraseRejected("say what to fade, e.g. 'fade the memory about my old job'")
    if given is not None:
        return f"fade {text} by {given}"
    return f"fade {text}" + ("" if amount is None else f" by {amount:g}")


def _without_punctuation(text: str) -> str:
    """``text`` without the full stop, question or exclamation mark and "please" at its end."""
    text = text.rstrip(".!? \t\r\n")
    if text[-7:].lower() in (" please", ",please"):
        text = text[:-7].rstrip(", \t\r\n")
    return text


def phrase_to_grammar(sentence: str) -> str | None:
    """The grammar text ``sentence`` means (see the module docstring), or ``None`` when it is
    not a forget phrase.

    Raises:
        PhraseRejected: it starts like one but cannot be read (a plural without a count, a
            verb with nothing to forget, …).
    """
    if len(sentence) > MAX_PHRASE_CHARS:
        return None
    text = _without_punctuation(_POLITE.sub("", sentence.strip(), count=1))
    if fade := _FADE.fullmatch(text):
        return _fade(fade["degree"], fade["rest"])
    verb = _FORGET.match(text)
    words = text[verb.end() :] if verb else text
    found = _selection(words)
    if found is None and verb:
        if not words:
            raise PhraseRejected("say what to forget, e.g. 'forget the oldest item'")
        raise PhraseRejected(
            f"cannot tell what {words!r} selects; to forget what mentions it, say "
            f"'forget anything about {words}'"
        )
    return found
