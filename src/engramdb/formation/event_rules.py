"""Rules for dated events and ongoing activities stated in the first person.

| rule | examples | key |
|---|---|---|
| ``plan`` | I'm going to fly to Paris next Friday · I'm planning a trip to Rome on June 5 · | |
| | I'll visit my parents tomorrow · I have a dentist appointment on Monday | ``event.<what>`` |
| ``past_event`` | I went to a concert last Saturday · I visited Kyoto in May | ``event.<what>`` |
| ``activity`` | I've been learning Portuguese · I started taking yoga classes · | |
| | I'm training for a marathon · I usually run in the morning | ``activity.<what>`` |

An event needs a time expression in its clause; it is resolved by the temporal resolver
against the turn's own time ("next Friday" said on 2024-06-03 is 2024-06-07). A plan is in
the future: a date named without a year that has already passed this year ("on June 5" said
in July) is next year's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from engramdb.formation.profile_rules import slug
from engramdb.index.temporal import TimeRange, find_time_ranges, strip_time_expressions

_PLAN = re.compile(
    r"(?i:\bi(?:'m|\s+am)\s+(?:going|planning|about|hoping|scheduled|supposed)\s+to"
    r"|\bi\s+(?:plan|intend|want|need|have)\s+to|\bi(?:'ll|\s+will)"
    r"|\bwe(?:'re|\s+are)\s+(?:going|planning)\s+to)\s+(?P<v>.+)"
)
_PLAN_DOING = re.compile(
    r"(?i:\bi(?:'m|\s+am)\s+)(?P<v>(?:flying|driving|heading|traveling|travelling|leaving|"
    r"moving|visiting|attending|starting|getting|going|meeting|seeing|hosting|taking|"
    r"planning)\b.+)"
)
_PLAN_HAVE = re.compile(
    r"(?i:\bi\s+have\s+)(?P<v>(?:an?|my)\s+(?:[\w-]+\s+){0,3}(?:appointment|meeting|interview|"
    r"exam|flight|trip|party|wedding|date|reservation|concert|game|class|deadline|"
    r"conference|checkup|check-up|surgery)\b.*)"
)
_PAST = re.compile(
    r"(?i:\bi(?:\s+just)?\s+)(?P<v>(?:went|visited|attended|finished|bought|got|had|met|ran|"
    r"took|saw|watched|completed|celebrated|moved|joined|flew|traveled|travelled|graduated|"
    r"adopted|started|hosted|made|tried|read|won|lost|cooked|baked|booked|ordered)\b.+)"
)
_ACTIVITY = re.compile(
    r"(?i:\bi(?:'ve|\s+have)\s+been|\bi(?:'m|\s+am)(?:\s+(?:currently|now|still))?"
    r"|\bi\s+(?:recently\s+|just\s+)?(?:started|took\s+up|began|picked\s+up))\s+"
    r"(?P<v>(?:learning|practicing|practising|training|studying|taking|playing|reading|"
    r"watching|working\s+on|building|writing|doing|volunteering|attending|going\s+to\s+the|"
    r"running|swimming|cycling|knitting|painting|cooking|baking|gardening|"
    r"yoga|guitar|piano|running)\b[^,.;!?]{0,80})"
)
_HABIT = re.compile(
    r"(?i:\bi\s+(?:usually|often|regularly|always|normally|sometimes)\s+)(?P<v>[a-z][^,.;!?]{2,80})"
)
# Words left dangling once the time expression is taken out ("… about 3 months ago").
_TRAILING = re.compile(
    r"(?i)(?:[\s,]+(?:and|but|so|because|which|with\s+my|about|around|roughly|almost|"
    r"nearly|over|just|like|since|for))+\s*$"
)
# Where the thing stated ends and the speaker goes on ("… and I think …", "… - just …").
_CUT = re.compile(
    r"(?i)\s+-\s+|\s*[,(]\s*|\s+(?:and|but|so|because|since|when|while|which|as)\s+"
    r"(?:i|i'm|i've|i'd|we|was|you|it)\b|\s+(?:to\s+help|i\s+think|was\s+wondering)\b"
)
# Activities that say how the user is doing, not what ("doing a good job", "doing fine").
_VAGUE_ACTIVITY = re.compile(
    r"(?i)^doing\s+(?:a\s+(?:good|great|bad)\s+job|well|great|good|fine|okay|ok|better|"
    r"everything|something|anything|it|that|this|my\s+best|the\s+same)\b"
)
_PRONOUNS = {"my": "their", "me": "them", "i": "they", "myself": "themself", "mine": "theirs"}
_PRONOUN = re.compile(r"\b(?:my|me|I|myself|mine)\b")
_YEAR = re.compile(r"\b(?:19|20)\d\d\b")
_WEEKDAY = re.compile(r"(?i)\b(?:mon|tue|wed|thu|fri|sat|sun)")


@dataclass(frozen=True)
class EventFact:
    """What an event or activity rule read."""

    category: str
    pattern: str
    key: str
    value: str
    text: str
    starts: datetime | None = None
    ends: datetime | None = None


def _words(text: str, limit: int = 14) -> str:
    """The first words of what was stated, cut where the speaker goes on, in the third
    person ("my sister" -> "their sister")."""
    text = _CUT.split(text.strip(" \"'"), maxsplit=1)[0]
    words = text.split()[:limit]
    said = _TRAILING.sub("", " ".join(words)).rstrip(" ,.;:!?-")
    return _PRONOUN.sub(lambda m: _PRONOUNS[m[0].lower()], said)


def _dates(found: TimeRange) -> str:
    last = found.end - timedelta(days=1)
    if last.date() <= found.start.date():
        return f"on {found.start:%A %Y-%m-%d}"
    return f"between {found.start:%Y-%m-%d} and {last:%Y-%m-%d}"


def _future(found: TimeRange, now: datetime) -> TimeRange:
    """A plan's date: a weekday named that already passed is next week's, a day without a
    year that already passed is next year's."""
    if found.end > now or _YEAR.search(found.expression):
        return found
    if _WEEKDAY.search(found.expression):
        weeks = timedelta(days=7 * (1 + (now - found.end).days // 7))
        return TimeRange(found.start + weeks, found.end + weeks, found.expression)

    def later(moment: datetime) -> datetime:
        try:
            return moment.replace(year=moment.year + 1)
        except ValueError:  # February 29th
            return moment.replace(year=moment.year + 1, day=28)

    return TimeRange(later(found.start), later(found.end), found.expression)


def event_of(clause: str, now: datetime) -> EventFact | None:
    """The dated event ``clause`` states, if it states one (see the module docstring)."""
    for pattern, name, planned in (
        (_PLAN, "plan", True),
        (_PLAN_HAVE, "plan", True),
        (_PLAN_DOING, "plan", True),
        (_PAST, "past_event", False),
    ):
        match = pattern.search(clause)
        if match is None:
            continue
        what = _words(strip_time_expressions(match["v"]))
        if len(what.split()) < 2:  # "I attended last week": attended what?
            continue
        # Resolving time is the costly part: only for a clause that states something.
        ranges = find_time_ranges(clause, now)
        if not ranges:
            return None
        found = _future(ranges[0], now) if planned else ranges[0]
        if pattern is _PLAN_HAVE:
            sentence = f"The user has {what} {_dates(found)}."
        elif planned:
            lead = "plans to " if pattern is _PLAN else "is "
            sentence = f"The user {lead}{what} {_dates(found)}."
        else:
            sentence = f"The user {what} {_dates(found)}."
        return EventFact(
            "event",
            name,
            f"event.{found.start:%Y%m%d}.{slug(what)}",
            what,
            sentence,
            found.start,
            found.end,
        )
    return None


def activity_of(clause: str) -> EventFact | None:
    """The ongoing activity or habit ``clause`` states, if any."""
    for pattern, lead in ((_ACTIVITY, "The user is "), (_HABIT, "The user says they usually ")):
        match = pattern.search(clause)
        if match is None:
            continue
        what = _words(match["v"], 12)
        if len(what.split()) < 2 or _VAGUE_ACTIVITY.match(what):
            continue
        return EventFact("activity", "activity", f"activity.{slug(what)}", what, f"{lead}{what}.")
    return None
