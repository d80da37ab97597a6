"""What a chat model is asked to extract from conversation turns, as pydantic models: the
schema ``ChatClient.complete_json`` sends and validates against.

``Extraction`` holds stated facts (profile, activity, preference), dated events, named
entities and the relations between them, and — kept apart — ``Inference`` items about the
user (goals, beliefs, preferences, intentions the user did not state), always marked
``inferred``. Every item names the turns it came from (``turn_ids``) and how sure the model is
(``confidence``); ``Extraction.citing`` drops items that name turns the model was not shown.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import date, datetime
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "ExtractedEntity",
    "ExtractedEvent",
    "ExtractedFact",
    "ExtractedRelation",
    "Extraction",
    "Grounded",
    "Inference",
    "Turn",
]


class Turn(BaseModel):
    """One conversation turn shown to the model, under the id it must cite."""

    id: str
    role: str
    content: str
    timestamp: datetime | None = None


class Grounded(BaseModel):
    """What every extracted item carries: its source turns and the model's confidence."""

    # A model adding keys of its own is not an error; the extra keys are dropped.
    model_config = ConfigDict(extra="ignore")

    turn_ids: list[str] = Field(min_length=1, description="ids of the turns it comes from")
    confidence: float = Field(default=1.0, ge=0.0, le=1.0, description="0 (a guess) to 1")


class ExtractedFact(Grounded):
    """A fact the user stated: ``subject``'s ``attribute`` is ``value`` (``ended`` when the
    turn says it is no longer true: "I no longer work at Acme")."""

    category: Literal["profile", "activity", "preference", "other"] = "profile"
    subject: str = Field(default="user", description="who the fact is about")
    attribute: str = Field(min_length=1, description="e.g. city, employer, pet, likes")
    value: str = Field(min_length=1)
    ended: bool = False


class ExtractedEvent(Grounded):
    """Something that happened or is planned, with its time as said and, when known, as a
    date."""

    description: str = Field(min_length=1)
    when: str | None = Field(default=None, description="the time as the turn says it")
    on: date | None = Field(default=None, description="the resolved date, if known")


class ExtractedEntity(Grounded):
    """A named person, pet, place, organisation or thing."""

    name: str = Field(min_length=1)
    entity_type: str = Field(default="thing", description="person, pet, place, org, …")


class ExtractedRelation(Grounded):
    """``source`` —``relation``→ ``target``, between entity names."""

    source: str = Field(min_length=1)
    relation: str = Field(min_length=1, description="e.g. works_at, lives_in, owns")
    target: str = Field(min_length=1)


class Inference(Grounded):
    """Theory of mind: what the model infers about the user without the user saying it.
    Never a stated fact: ``inferred`` is always true."""

    kind: Literal["goal", "belief", "preference", "intention"]
    statement: str = Field(min_length=1)
    inferred: Literal[True] = True
    confidence: float = Field(default=0.5, ge=0.0, le=1.0)


G = TypeVar("G", bound=Grounded)


class Extraction(BaseModel):
    """Everything extracted from a batch of turns; empty lists when there is nothing."""

    model_config = ConfigDict(extra="ignore")

    facts: list[ExtractedFact] = Field(default_factory=list)
    events: list[ExtractedEvent] = Field(default_factory=list)
    entities: list[ExtractedEntity] = Field(default_factory=list)
    relations: list[ExtractedRelation] = Field(default_factory=list)
    inferences: list[Inference] = Field(default_factory=list)

    def items(self) -> list[Grounded]:
        """Every extracted item, of every kind."""
        return [
            *self.facts,
            *self.events,
            *self.entities,
            *self.relations,
            *self.inferences,
        ]

    def is_empty(self) -> bool:
        """Whether nothing at all was extracted."""
        return not self.items()

    def citing(self, turn_ids: Collection[str]) -> tuple[Extraction, int]:
        """This extraction without the items that name a turn outside ``turn_ids`` (their
        provenance cannot be trusted), and how many were dropped."""
        known = set(turn_ids)

        def grounded(items: list[G]) -> list[G]:
            return [item for item in items if set(item.turn_ids) <= known]

        kept = Extraction(
            facts=grounded(self.facts),
            events=grounded(self.events),
            entities=grounded(self.entities),
            relations=grounded(self.relations),
            inferences=grounded(self.inferences),
        )
        return kept, len(self.items()) - len(kept.items())
