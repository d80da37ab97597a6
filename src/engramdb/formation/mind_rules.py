"""Rules for what the user says they want and prefer: the part of theory of mind a pattern
can read without a model. Inferred goals, beliefs and intentions need a chat model
(``EngineConfig(llm=...)``); these are stated, so they are kept as stated (``inferred`` false).

| rule | examples | key |
|---|---|---|
| ``goal`` | my goal is to run a marathon · I want to learn Portuguese · | |
| | I'd like to write a book · I'm hoping to get promoted · | |
| | I dream of sailing | ``mind.goal.<what>`` |
| ``prefers`` | I prefer tea over coffee · I'd rather work from home | ``mind.preference.<what>`` |

A goal with a date ("I want to fly to Paris next Friday") is a plan, an event, and not read
here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from engramdb.formation.event_rules import _words as stated_words
from engramdb.formation.profile_rules import slug

_GOAL = re.compile(
    r"(?i:\bmy\s+(?:main\s+|big\s+|long-term\s+)?(?:goal|dream|aim|plan)\s+is\s+(?:to\s+)?"
    r"|\bi\s+(?:really\s+)?(?:want|hope|aim|wish)\s+to\s+|\bi(?:'d|\s+would)\s+(?:really\s+)?"
    r"(?:like|love)\s+to\s+|\bi(?:'m|\s+am)\s+(?:hoping|aiming|trying)\s+to\s+"
    r"|\bi\s+dream\s+of\s+)(?P<v>[^,.;!?]{3,120})"
)
_PREFERS = re.compile(
    r"(?i:\bi\s+(?:really\s+|usually\s+|generally\s+)?prefer\s+|\bi(?:'d|\s+would)\s+rather\s+)"
    r"(?P<v>[^,.;!?]{2,120})"
)
# Wants about the conversation itself ("I want to ask you", "I'd like to know").
_ABOUT_THE_TALK = re.compile(
    r"(?i)^(?:ask|know|say|tell|check|confirm|clarify|thank|understand|see|make\s+sure|"
    r"talk|discuss|share|mention|add|follow\s+up)\b|\b(?:you|your)\b"
)


# Wants that lean on the conversation to be understood ("try making it", "find more like
# that", "organize what's left"): no use out of it.
_CONTEXTUAL = re.compile(
    r"(?i)\b(?:it|that|this|these|those|them|here|there|similar|what|what's|such)\b"
)


@dataclass(frozen=True)
class MindFact:
    """What a mind rule read."""

    pattern: str
    key: str
    value: str
    text: str


def mind_of(clause: str) -> MindFact | None:
    """The goal or preference ``clause`` states, if any (see the module docstring)."""
    for pattern, rule, kind, lead in (
        (_PREFERS, "prefers", "preference", "The user prefers "),
        (_GOAL, "goal", "goal", "The user wants to "),
    ):
        match = pattern.search(clause)
        if match is None:
            continue
        what = stated_words(match["v"], 12)
        if len(what) < 3 or _ABOUT_THE_TALK.search(what) or _CONTEXTUAL.search(what):
            continue
        if "rather" in match[0][: match.start("v") - match.start()].lower():
            lead = "The user would rather "
        return MindFact(rule, f"mind.{kind}.{slug(what)}", what, f"{lead}{what}.")
    return None
