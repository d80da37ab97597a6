"""``RuleExtractor``: deterministic extraction from what the user says of themself.

Only the user's turns are read (an assistant's "I" is the assistant), one clause at a time
(sentences, and "…, but …" / "…, and …" halves). The rules are documented with their examples
in ``profile_rules`` (name, age, city, employer, pets, family, likes) and ``event_rules``
(dated plans and past events, activities) and ``mind_rules`` (stated goals and preferences;
inferences need a model). A clause may state several things: "I moved to
Porto last week" is a new city and a dated event.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from engramdb.formation.event_rules import EventFact, activity_of, event_of
from engramdb.formation.mind_rules import mind_of
from engramdb.formation.profile_rules import PROFILE_RULES
from engramdb.formation.types import Category, ExtractedItem, Extraction, Turn

_CLAUSES = re.compile(r"(?<!\b[A-Z][a-z])(?<!\bSt)[.!?;\n]+\s*|,\s+(?:and|but|so)\s+|\s+but\s+")
# Every rule needs the speaker in the first person: other clauses are skipped at once.
_FIRST_PERSON = re.compile(r"(?i)\b(?:i|my|we|call\s+me)\b")
#: What the rules read, for the note of an ingest that found nothing.
RULES_SUMMARY = (
    "first-person statements of the user: name, age, where they live or moved, where they "
    "work or left, pets, family, likes and dislikes, dated plans and events, activities, "
    "stated goals and preferences"
)
#: What theory of mind the rules give, for every report they write.
RULES_MIND = (
    "theory of mind without a model: only goals and preferences the user states are kept "
    "(as stated); inferred goals, beliefs, preferences and intentions need a chat model "
    "(EngineConfig(llm=...))"
)


def clauses(text: str) -> list[str]:
    """``text`` cut into clauses, blanks dropped."""
    return [c.strip() for c in _CLAUSES.split(text) if c and c.strip()]


class RuleExtractor:
    """Pattern rules over each clause of the user's turns; deterministic, no model needed."""

    name = "rules"

    async def extract(self, turns: Sequence[Turn], *, subject: str) -> Extraction:
        """Every item the rules find, in turn order (see the module docstring)."""
        return self.extract_now(turns)

    def extract_now(self, turns: Sequence[Turn]) -> Extraction:
        """``extract`` without the event loop (the rules never wait)."""
        items: list[ExtractedItem] = []
        read = 0
        for turn in turns:
            if turn.role != "user":
                continue
            read += 1
            for clause in clauses(turn.text):
                items += self.clause_items(clause, turn)
        notes = []
        if not turns:
            notes.append("no turns were given")
        elif not read:
            notes.append(
                f"none of the {len(turns)} turns is the user's (only the user's first-person "
                "statements are read for facts)"
            )
        elif not items:
            notes.append(f"no rule matched in {read} user turns; the rules read {RULES_SUMMARY}")
        return Extraction(items, read, notes, self.name, RULES_MIND)

    def clause_items(self, clause: str, turn: Turn) -> list[ExtractedItem]:
        """The items one clause of ``turn`` states."""
        found: list[ExtractedItem] = []
        if not _FIRST_PERSON.search(clause):
            return found
        keys: set[str] = set()
        for rule, pattern, build in PROFILE_RULES:
            for match in pattern.finditer(clause):
                fact = build(match)
                if fact is None or fact.key in keys:
                    continue
                keys.add(fact.key)
                found.append(
                    _said(
                        turn,
                        "profile",
                        fact.key,
                        fact.value,
                        fact.text,
                        rule,
                        operation=fact.operation,
                        entities=fact.entities,
                        relations=fact.relations,
                    )
                )
        event = event_of(clause, turn.occurred_at) or activity_of(clause)
        if event is not None:
            found.append(_event_item(event, turn))
        mind = None if event is not None and event.category == "event" else mind_of(clause)
        if mind is not None and mind.key not in keys:
            found.append(_said(turn, "mind", mind.key, mind.value, mind.text, mind.pattern))
        return found


def _said(
    turn: Turn, category: Category, key: str, value: str, text: str, pattern: str, **more: Any
) -> ExtractedItem:
    """An item ``turn`` states."""
    return ExtractedItem(
        category=category,
        key=key,
        value=value,
        text=text,
        sources=(turn.turn_id,),
        stated_at=turn.occurred_at,
        pattern=pattern,
        **more,
    )


def _event_item(event: EventFact, turn: Turn) -> ExtractedItem:
    category: Category = "event" if event.category == "event" else "activity"
    return _said(
        turn, category, event.key, event.value, event.text, event.pattern,
        starts=event.starts, ends=event.ends,
    )  # fmt: skip
