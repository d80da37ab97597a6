"""Extraction by a chat model, in formation's terms: ``ModelExtractor`` asks ``LLMExtractor``
and turns its answer into ``ExtractedItem``s; ``FallbackExtractor`` falls back to the rules
when the model fails, saying so.

A model names attributes freely; the ones the rules also read get the rules' keys, so
consolidation matches what either path stored:

| the model's attribute | key | graph |
|---|---|---|
| city, lives_in, location, home, residence | ``user.city`` | ``lives_in`` a location |
| employer, company, works_at, works_for, workplace | ``user.employer`` | ``works_for`` |
| name / age / occupation | ``user.name`` / ``user.age`` / ``user.occupation`` | |
| pet (or dog, cat, …) | ``user.pet.<name>`` | ``has_pet`` an animal |
| sister, husband, … | ``user.family.<role>.<name>`` | the family relation |
| likes, dislikes (and loves, hates) | ``user.preference.<thing>`` | |
| anything else about the user | ``user.<attribute>`` | |
| anything about someone else | ``about.<subject>.<attribute>`` | |

Activities are ``activity.<what>``, events ``event.<yyyymmdd>.<what>`` (``event.<what>`` when
undated), stated preferences (category ``preference``) ``mind.preference.<what>``, and
inferences (theory of mind) ``mind.<kind>.<what>``, marked ``inferred`` with the model's
confidence. Every item keeps the turns the model cited; an item is stated at the latest of them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime, time, timedelta

from engramdb.core.errors import LLMError
from engramdb.formation.profile_rules import FAMILY, slug
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import (
    Category,
    EntityRef,
    ExtractedItem,
    Extraction,
    Extractor,
    Operation,
    RelationRef,
    Turn,
)
from engramdb.llm import extraction_schema as schema
from engramdb.llm.client import ChatClient
from engramdb.llm.extraction import LLMExtractor

#: What theory of mind a model gives, for the report.
MODEL_MIND = (
    "theory of mind by the chat model: goals, beliefs, preferences and intentions it inferred "
    "are kept apart as inferred (category mind, metadata inferred: true, with its confidence) "
    "and never replace what the user stated"
)
#: Turns per request: long conversations go to the model in pieces of this many.
BATCH_TURNS = 40

_CITY = frozenset({"city", "lives_in", "location", "home", "residence", "lives", "home_city"})
_EMPLOYER = frozenset(
    {"employer", "company", "works_at", "works_for", "workplace", "work", "job", "organization"}
)
_PETS = frozenset({"pet", "dog", "cat", "puppy", "kitten", "parrot", "rabbit", "hamster", "bird"})
_LIKES = {"likes": "likes", "loves": "likes", "like": "likes", "love": "likes", "enjoys": "likes"}
_LIKES |= {"dislikes": "dislikes", "hates": "dislikes", "dislike": "dislikes", "hate": "dislikes"}
_SELF = frozenset({"user", "i", "me", "myself", "the user"})
#: The model's entity and relation types in graph memory's words.
_ENTITY_TYPES = {
    "place": "location", "city": "location", "country": "location", "org": "organization",
    "organisation": "organization", "company": "organization", "pet": "animal",
}  # fmt: skip
_RELATION_TYPES = {"works_at": "works_for", "employed_by": "works_for", "lives_at": "lives_in"}
_ABOUT_USER = re.compile(r"(?i)^\s*(?:the\s+)?user(?:'s)?\s+")
_CAPITALISED = re.compile(r"\b[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")


class ModelExtractor:
    """Extraction by a chat model (see the module docstring).

    Raises (from ``extract``) the model's typed ``LLMError``s; ``FallbackExtractor`` turns
    them into the rules' answer and a note.
    """

    name = "llm"

    def __init__(self, client: ChatClient, *, batch_turns: int = BATCH_TURNS) -> None:
        self.model = LLMExtractor(client)
        self.batch_turns = batch_turns

    async def extract(self, turns: Sequence[Turn], *, subject: str) -> Extraction:
        """What the model extracts from ``turns``, a batch of ``batch_turns`` at a time."""
        items: list[ExtractedItem] = []
        for start in range(0, len(turns), self.batch_turns):
            items += await self.extract_batch(turns[start : start + self.batch_turns], subject)
        notes = (
            [] if items or not turns else [f"the chat model found nothing in {len(turns)} turns"]
        )
        if not turns:
            notes.append("no turns were given")
        return Extraction(items, len(turns), notes, self.name, MODEL_MIND)

    async def extract_batch(self, turns: Sequence[Turn], subject: str) -> list[ExtractedItem]:
        """The items of one request's worth of turns."""
        shown = [
            schema.Turn(id=t.turn_id, role=t.role, content=t.text, timestamp=t.occurred_at)
            for t in turns
        ]
        answer = await self.model.extract(shown)
        times = {t.turn_id: t.occurred_at for t in turns}

        def when(cited: Sequence[str]) -> datetime:
            return max(times[c] for c in cited)

        made: list[ExtractedItem] = []
        for fact in answer.facts:
            made.append(fact_item(fact, when(fact.turn_ids), subject))
        for event in answer.events:
            made.append(event_item(event, when(event.turn_ids)))
        for inference in answer.inferences:
            made.append(inference_item(inference, when(inference.turn_ids)))
        selves = _SELF | {subject.casefold()}
        selves |= {f.value.casefold() for f in answer.facts if slug(f.attribute) == "name"}
        types = {
            e.name.casefold(): _ENTITY_TYPES.get(e.entity_type, e.entity_type)
            for e in answer.entities
        }
        for relation in answer.relations:
            # The user's own relations come with the facts that state them.
            if not {relation.source.casefold(), relation.target.casefold()} & selves:
                made.append(relation_item(relation, types, when(relation.turn_ids)))
        return made


class FallbackExtractor:
    """``primary`` (a model), and ``fallback`` (the rules) for each batch of turns it fails on
    or finds nothing in; each fallback is a note in the report, and the extraction names
    every extractor that ran (``llm``, ``rules``, or ``llm+rules``). With ``strict`` a failure
    of the model is raised instead (its typed ``LLMError``).

    The turns go to ``primary`` in batches of its ``batch_turns`` (all at once if it has
    none), so one failing request costs the model's answer for that batch only.
    """

    def __init__(
        self, primary: Extractor, fallback: Extractor | None = None, *, strict: bool = False
    ) -> None:
        self.primary = primary
        self.fallback = fallback or RuleExtractor()
        self.strict = strict
        self.name = primary.name
        self.batch_turns: int | None = getattr(primary, "batch_turns", None)

    async def extract(self, turns: Sequence[Turn], *, subject: str) -> Extraction:
        """The primary's extraction of each batch, else the fallback's with a note saying
        why."""
        if not turns:
            return await self.primary.extract(turns, subject=subject)
        size = self.batch_turns or len(turns)
        parts = []
        for start in range(0, len(turns), size):
            batch = turns[start : start + size]
            where = f"turns {start + 1}-{start + len(batch)}: " if size < len(turns) else ""
            parts.append(await self._batch(batch, subject, where))
        return Extraction(
            [item for part in parts for item in part.items],
            sum(part.turns_read for part in parts),
            [note for part in parts for note in part.notes],
            "+".join(dict.fromkeys(part.extractor for part in parts)),
            "; ".join(dict.fromkeys(part.mind for part in parts if part.mind)),
        )

    async def _batch(self, turns: Sequence[Turn], subject: str, where: str) -> Extraction:
        try:
            found = await self.primary.extract(turns, subject=subject)
        except LLMError as exc:
            if self.strict:
                raise
            why = f"the chat model failed ({type(exc).__name__}: {exc.message})"
        else:
            if found.items:
                return found
            why = f"the chat model extracted nothing from {len(turns)} turns"
        used = await self.fallback.extract(turns, subject=subject)
        note = f"{where}{why}; the {self.fallback.name} extracted instead"
        return Extraction(
            used.items, used.turns_read, [note, *used.notes], used.extractor, used.mind
        )


def fact_item(fact: schema.ExtractedFact, stated_at: datetime, subject: str) -> ExtractedItem:
    """A stated fact in formation's terms (see the module docstring for the keys)."""
    attribute = slug(fact.attribute, 4)
    value = fact.value.strip()
    end: Operation = "end" if fact.ended else "set"
    sources = tuple(fact.turn_ids)

    def item(
        key: str,
        text: str,
        category: Category = "profile",
        graph: RelationRef | None = None,
        said: str | None = None,
    ) -> ExtractedItem:
        # ``said``: the value in the rules' form, so both paths compare equal.
        entities = () if graph is None or graph.target is None else (graph.target,)
        entities = entities if graph is None or graph.source is None else (graph.source,)
        return ExtractedItem(
            category=category, key=key, value=said or value, text=text, sources=sources,
            stated_at=stated_at, operation=end, pattern="llm", entities=entities,
            relations=() if graph is None else (graph,), confidence=fact.confidence,
        )  # fmt: skip

    if fact.subject.strip().casefold() not in _SELF | {subject.casefold()}:
        about = fact.subject.strip()
        return item(f"about.{slug(about)}.{attribute}", f"{about}'s {fact.attribute} is {value}.")
    if fact.category == "activity":
        return item(f"activity.{slug(value)}", f"The user is {_lower(value)}.", "activity")
    if attribute in _LIKES:
        polarity = _LIKES[attribute]
        return item(
            f"user.preference.{slug(value)}",
            f"The user {polarity} {value}.",
            said=f"{polarity} {value}",
        )
    if fact.category == "preference":
        return item(f"mind.preference.{slug(value)}", f"The user prefers {value}.", "mind")
    if attribute in _CITY:
        place = EntityRef(value, "location")
        said = "no longer lives in" if fact.ended else "lives in"
        return item("user.city", f"The user {said} {value}.", graph=RelationRef("lives_in", place))
    if attribute in _EMPLOYER:
        org = EntityRef(value, "organization")
        said = "no longer works at" if fact.ended else "works at"
        return item(
            "user.employer", f"The user {said} {value}.", graph=RelationRef("works_for", org)
        )
    if attribute in _PETS:
        name = _name(value)
        kind = "pet" if attribute == "pet" else attribute
        animal = EntityRef(name, "animal")
        return item(
            f"user.pet.{slug(name)}",
            f"The user has a {kind} named {name}.",
            graph=RelationRef("has_pet", animal),
            said=f"{kind} {name}",
        )
    if attribute in FAMILY:
        name = _name(value)
        relation, from_relative = FAMILY[attribute]
        person = EntityRef(name, "person")
        link = (
            RelationRef(relation, None, person) if from_relative else RelationRef(relation, person)
        )
        return item(
            f"user.family.{attribute}.{slug(name)}",
            f"The user's {attribute} is {name}.",
            graph=link,
            said=name,
        )
    sentences: dict[str, Callable[[str], str]] = {
        "name": lambda v: f"The user's name is {v}.",
        "age": lambda v: f"The user is {v} years old.",
        "occupation": lambda v: f"The user is {_article(v)} {v}.",
    }
    key = {"job_title": "occupation", "profession": "occupation", "role": "occupation"}.get(
        attribute, attribute
    )
    sentence = sentences.get(key)
    text = sentence(value) if sentence else f"The user's {fact.attribute} is {value}."
    return item(f"user.{key}", text)


def relation_item(
    relation: schema.ExtractedRelation, types: dict[str, str], stated_at: datetime
) -> ExtractedItem:
    """A relation between two others than the user ("Maria works at Initech"), as the fact
    ``about.<source>.<relation>`` and its graph edge."""
    source = EntityRef(relation.source.strip(), types.get(relation.source.casefold(), "thing"))
    target = EntityRef(relation.target.strip(), types.get(relation.target.casefold(), "thing"))
    kind = slug(relation.relation, 4)
    kind = _RELATION_TYPES.get(kind, kind)
    return ExtractedItem(
        category="profile", key=f"about.{slug(source.name)}.{kind}", value=target.name,
        text=f"{source.name} {kind.replace('_', ' ')} {target.name}.",
        sources=tuple(relation.turn_ids), stated_at=stated_at, pattern="llm",
        entities=(source, target), relations=(RelationRef(kind, target, source),),
        confidence=relation.confidence,
    )  # fmt: skip


def event_item(event: schema.ExtractedEvent, stated_at: datetime) -> ExtractedItem:
    """A dated (or undated) event; its day is the turn's time zone's."""
    what = event.description.strip().rstrip(".")
    starts = ends = None
    if event.on is not None:
        starts = datetime.combine(event.on, time(), tzinfo=stated_at.tzinfo)
        ends = starts + timedelta(days=1)
        key = f"event.{event.on:%Y%m%d}.{_topic(what)}"
        text = f"{what} on {event.on:%A %Y-%m-%d}."
    else:
        key = f"event.{_topic(what)}"
        text = f"{what} ({event.when})." if event.when else f"{what}."
    return ExtractedItem(
        category="event", key=key, value=what, text=text, sources=tuple(event.turn_ids),
        stated_at=stated_at, pattern="llm", starts=starts, ends=ends,
        confidence=event.confidence,
    )  # fmt: skip


def inference_item(inference: schema.Inference, stated_at: datetime) -> ExtractedItem:
    """An inference about the user: ``mind.<kind>.<what>``, marked inferred."""
    statement = inference.statement.strip()
    return ExtractedItem(
        category="mind", key=f"mind.{inference.kind}.{_topic(statement)}", value=statement,
        text=statement if statement.endswith(".") else f"{statement}.",
        sources=tuple(inference.turn_ids), stated_at=stated_at,
        pattern=f"inferred_{inference.kind}", inferred=True, confidence=inference.confidence,
    )  # fmt: skip


def _topic(sentence: str) -> str:
    """A key part from a sentence about the user, without "The user" ("flies_to_paris…")."""
    return slug(_ABOUT_USER.sub("", sentence))


def _name(value: str) -> str:
    """A pet's or relative's name in what the model said ("Rex, a dog" -> "Rex")."""
    found = _CAPITALISED.findall(value)
    return found[0] if found else value


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:] if text[1:2].islower() else text


def _article(word: str) -> str:
    return "an" if word[:1].lower() in "aeiou" else "a"
