"""Fact keys: the facts the rules extract from a session, stored as extra retrieval keys.

A question often names a fact in other words than the turn that stated it ("Where do I work?"
against "started my first week at NovaTech as a data analyst"); the rule extractor's sentence
("The user works at NovaTech.") is a second way in. Each extracted fact becomes one record per
source turn, its text the fact's sentence and its metadata the source turn's, so a hit on the
key scores as a hit on the turn (the harness maps hits to turns through that metadata, and a
turn found twice counts once, at its best rank).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from engramdb.core.intent import MemoryItem
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import Turn

#: Marks a key record in its metadata (the rest of the metadata is its source turn's).
FACT_KEY = "fact_key"
# Rules resolve relative dates against the turn's time; a turn without one still states facts.
_NO_TIME = datetime(1970, 1, 1, tzinfo=UTC)


def fact_key_items(turns: Sequence[MemoryItem]) -> list[MemoryItem]:
    """One key record per (fact, source turn) the rules find in ``turns``, in turn order."""
    formation_turns = [
        Turn(
            turn_id=str(position),
            role=turn.role or "user",
            text=turn.text,
            occurred_at=turn.occurred_at or _NO_TIME,
        )
        for position, turn in enumerate(turns)
    ]
    keys = []
    for fact in RuleExtractor().extract_now(formation_turns).items:
        for source in fact.sources:
            turn = turns[int(source)]
            keys.append(
                MemoryItem(
                    text=fact.text,
                    role=turn.role,
                    speaker=turn.speaker,
                    occurred_at=turn.occurred_at,
                    metadata={**turn.metadata, FACT_KEY: fact.key},
                )
            )
    return keys
