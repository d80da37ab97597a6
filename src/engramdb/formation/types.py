"""The data of formation: ``Turn`` (what is read), ``ExtractedItem`` with its graph parts
``EntityRef`` / ``RelationRef`` (what is found), ``Extraction`` and the ``Extractor`` protocol
every extraction path implements (the rules today; a chat model can answer the same way).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from engramdb.providers.graph.extract import Mention

#: The categories of formed memories (rfc-2001's MemU categories); ``mind`` holds the user's
#: goals, beliefs, preferences and intentions (theory of mind), stated or inferred.
Category = Literal["profile", "event", "activity", "mind"]
CATEGORIES: tuple[Category, ...] = ("profile", "event", "activity", "mind")
#: ``set``: the fact holds from the turn on; ``end``: the stored fact stops holding then.
Operation = Literal["set", "end"]


@dataclass(frozen=True)
class Turn:
    """One message to form memories from.

    Attributes:
        turn_id: the id it is stored under as an episode; provenance names it.
        role: ``user``, ``assistant``, … (only the user's first person is about the user).
        text: what was said.
        occurred_at: when it was said (timezone-aware): relative times resolve against it.
        session_id: the conversation it belongs to, if known.
    """

    turn_id: str
    role: str
    text: str
    occurred_at: datetime
    session_id: str | None = None


#: An entity an item names, for graph memory (the graph extractor's own form).
EntityRef = Mention


@dataclass(frozen=True)
class RelationRef:
    """A relation an item states; an end that is ``None`` is the user."""

    relation_type: str
    target: EntityRef | None
    source: EntityRef | None = None


@dataclass(frozen=True)
class ExtractedItem:
    """One thing a turn states.

    Attributes:
        category: ``profile``, ``event``, ``activity`` or ``mind``.
        key: the semantic key (``user.city``, ``user.pet.rex``, ``event.<slug>``…): a later
            item with the same key is the same fact, changed.
        value: the fact's value (``"Lisbon"``), compared to decide add / update / no-op.
        text: the fact in a sentence, as it is recalled.
        sources: the ids of the turns it came from.
        stated_at: when it was stated (its validity starts then).
        operation: ``set``, or ``end`` ("I no longer work at Acme").
        pattern: the rule (or extractor) that found it.
        starts / ends: for a dated event, the resolved range (``ends`` exclusive).
        entities / relations: its graph form.
        inferred: the user did not say it; a model inferred it (theory of mind). An inferred
            item never replaces a stated one.
        confidence: how sure the extractor is, 0 to 1 (stated items: 1).
    """

    category: Category
    key: str
    value: str
    text: str
    sources: tuple[str, ...]
    stated_at: datetime
    operation: Operation = "set"
    pattern: str = ""
    starts: datetime | None = None
    ends: datetime | None = None
    entities: tuple[EntityRef, ...] = ()
    relations: tuple[RelationRef, ...] = ()
    inferred: bool = False
    confidence: float = 1.0


@dataclass(frozen=True)
class Extraction:
    """What an extractor found in a batch of turns, and, when nothing, why; ``extractor``
    names the one that ran (a fallback names itself), ``mind`` says what theory of mind it
    gives."""

    items: list[ExtractedItem]
    turns_read: int
    notes: list[str] = field(default_factory=list)
    extractor: str = ""
    mind: str = ""


@runtime_checkable
class Extractor(Protocol):
    """Reads turns and states what they say about the user.

    An implementation names itself (``name``, reported with every ingest) and returns every
    item with ``sources`` set to the ids of the turns it came from. ``subject`` is the name
    the user goes by in the graph.
    """

    name: str

    async def extract(self, turns: Sequence[Turn], *, subject: str) -> Extraction:
        """The items ``turns`` state."""
        ...
