"""From text to graph: ``RuleExtractor`` (deterministic, always available) and
``LLMExtractor`` (a chat model asked for JSON, falling back to the rules when it fails).

Both return an ``Extraction``: entities by name and type, and relations between them. "I",
"me" and "my" are the speaker. The rules know a few plain patterns, one clause at a time:

* ``Alice works for Acme`` / ``I work at Acme`` → ``works_for`` (person → organization)
* ``I live in Lisbon`` / ``Bob moved to Porto`` → ``lives_in`` (person → location)
* ``Bob is Alice's brother`` / ``Bob is my sister`` / ``My sister Ana …`` → a family or work
  relation (``sibling_of``, ``parent_of``, ``married_to``, ``friend_of``, ``reports_to`` …)
* ``Alice is married to Bob``, ``Alice knows Bob``, ``Alice was born in Porto``,
  ``Alice founded Acme``
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from engramdb.core.errors import LLMError
from engramdb.llm.client import ChatModel
from engramdb.llm.structured import read_json_value
from engramdb.providers.graph.types import type_name


@dataclass(frozen=True)
class Mention:
    """An entity named in text."""

    name: str
    entity_type: str


@dataclass(frozen=True)
class Fact:
    """A relation stated in text."""

    source: Mention
    relation_type: str
    target: Mention
    properties: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Extraction:
    """The entities and relations found in one text."""

    entities: list[Mention]
    relations: list[Fact]

    @classmethod
    def of(cls, facts: list[Fact]) -> Extraction:
        """The extraction of ``facts`` (their ends are its entities, each once)."""
        mentions = [m for f in facts for m in (f.source, f.target)]
        return cls(list(dict.fromkeys(mentions)), facts)


class Extractor(Protocol):
    """Finds entities and relations in text."""

    async def extract(self, text: str, *, speaker: str) -> Extraction:
        """What ``text`` (said by ``speaker``) states."""
        ...


_NAME = r"(?:[A-Z][\w'&.-]*(?:\s+(?:of\s+|de\s+|da\s+)?[A-Z][\w'&.-]*)*)"
_WHO = rf"(?P<who>{_NAME}|I|[Ww]e)"
_ROLE_RELATIONS: dict[str, tuple[str, bool]] = {
    # role word -> (relation, whether the relation points from the role-holder to the other)
    "brother": ("sibling_of", True),
    "sister": ("sibling_of", True),
    "sibling": ("sibling_of", True),
    "mother": ("parent_of", True),
    "father": ("parent_of", True),
    "mom": ("parent_of", True),
    "dad": ("parent_of", True),
    "parent": ("parent_of", True),
    "son": ("parent_of", False),
    "daughter": ("parent_of", False),
    "child": ("parent_of", False),
    "wife": ("married_to", True),
    "husband": ("married_to", True),
    "spouse": ("married_to", True),
    "partner": ("married_to", True),
    "friend": ("friend_of", True),
    "boss": ("reports_to", False),
    "manager": ("reports_to", False),
    "colleague": ("works_with", True),
    "coworker": ("works_with", True),
}
_ROLES = "|".join(_ROLE_RELATIONS)
_VERB_PATTERNS: list[tuple[re.Pattern[str], str, str, str]] = [
    (
        re.compile(
            rf"\b{_WHO}\s+(?:now\s+)?(?:works?|worked|am working|is working)"
            rf"\s+(?:for|at)\s+(?P<what>{_NAME})"
        ),
        "works_for",
        "person",
        "organization",
    ),
    (
        re.compile(
            rf"\b{_WHO}\s+(?:now\s+)?(?:lives?|lived|am living|is living|moved|ha(?:ve|s) moved)"
            rf"\s+(?:in|to)\s+(?P<what>{_NAME})"
        ),
        "lives_in",
        "person",
        "location",
    ),
    (
        re.compile(rf"\b{_WHO}\s+(?:is|am|was|got)\s+married\s+to\s+(?P<what>{_NAME})"),
        "married_to",
        "person",
        "person",
    ),
    (re.compile(rf"\b{_WHO}\s+knows?\s+(?P<what>{_NAME})"), "knows", "person", "person"),
    (
        re.compile(rf"\b{_WHO}\s+(?:was|were)\s+born\s+in\s+(?P<what>{_NAME})"),
        "born_in",
        "person",
        "location",
    ),
    (
        re.compile(rf"\b{_WHO}\s+(?:founded|started|created)\s+(?P<what>{_NAME})"),
        "founded",
        "person",
        "organization",
    ),
]
_IS_ROLE = re.compile(
    rf"\b(?P<who>{_NAME})\s+is\s+(?P<owner>{_NAME}'s|my|our)\s+(?P<role>{_ROLES})\b"
)
_MY_ROLE = re.compile(rf"\b[Mm]y\s+(?P<role>{_ROLES})\s*,?\s+(?:is\s+)?(?P<who>{_NAME})")
_CLAUSES = re.compile(r"[.!?;\n]+|,\s+(?:and|but)\s+|\s+but\s+")


class RuleExtractor:
    """Pattern rules over each clause; deterministic, no model needed."""

    async def extract(self, text: str, *, speaker: str) -> Extraction:
        """The facts the rules recognise in ``text``."""
        return Extraction.of(self.facts(text, speaker))

    def facts(self, text: str, speaker: str) -> list[Fact]:
        """Every recognised fact, in order of appearance, each once."""
        found: list[Fact] = []
        for clause in _CLAUSES.split(text):
            found += self._clause(clause.strip(), speaker)
        return list(dict.fromkeys(found))

    def _clause(self, clause: str, speaker: str) -> list[Fact]:
        facts: list[Fact] = []
        me = Mention(speaker, "person")
        subject: Mention | None = None
        for match in _MY_ROLE.finditer(clause):
            person = Mention(_clean(match["who"]), "person")
            facts.append(_role_fact(person, match["role"].lower(), me))
            subject = person
        for match in _IS_ROLE.finditer(clause):
            owner = match["owner"]
            other = me if owner.lower() in ("my", "our") else Mention(owner[:-2], "person")
            facts.append(_role_fact(Mention(_clean(match["who"]), "person"), match["role"], other))
        for pattern, relation, who_type, what_type in _VERB_PATTERNS:
            for match in pattern.finditer(clause):
                who = match["who"]
                if who in ("I", "we", "We"):
                    source = me
                elif subject is not None and clause.lower().startswith("my "):
                    source = subject  # "My sister Ana lives in Lisbon": Ana lives there
                else:
                    source = Mention(_clean(who), who_type)
                facts.append(Fact(source, relation, Mention(_clean(match["what"]), what_type)))
        return facts


def _clean(name: str) -> str:
    return name.strip().rstrip("'.").removesuffix("'s")


def _role_fact(holder: Mention, role: str, other: Mention) -> Fact:
    relation, forward = _ROLE_RELATIONS[role]
    source, target = (holder, other) if forward else (other, holder)
    return Fact(source, relation, target, {"role": role})


SYSTEM_PROMPT = """You extract a knowledge graph from one message.
Answer with JSON only, no prose:
{"entities": [{"name": "...", "type": "person|organization|location|project|concept|..."}],
 "relations": [{"source": "<name>", "type": "<snake_case relation>", "target": "<name>"}]}
Use "works_for", "lives_in", "sibling_of", "parent_of", "married_to", "friend_of", "knows"
when they fit. The speaker is called "{speaker}"; "I", "me" and "my" mean the speaker.
Only state what the message says."""


class LLMExtractor:
    """Asks a chat model for entities and relations as JSON; when the model fails or answers
    something unusable, the rules answer instead."""

    def __init__(self, model: ChatModel, fallback: RuleExtractor | None = None) -> None:
        self.model = model
        self.fallback = fallback or RuleExtractor()

    async def extract(self, text: str, *, speaker: str) -> Extraction:
        """The model's reading of ``text``, or the rules' if it has none."""
        try:
            answer = await self.model.complete(SYSTEM_PROMPT.replace("{speaker}", speaker), text)
            return parse_answer(answer)
        except (LLMError, ValueError):
            return await self.fallback.extract(text, speaker=speaker)


class UnusableAnswer(ValueError):
    """A model's answer is not the JSON extraction asked for."""


def parse_answer(answer: str) -> Extraction:
    """The extraction in a model's JSON answer (reasoning tags, code fences, prose around it
    and broken JSON are read past, as ``read_json_value`` does).

    Raises:
        UnusableAnswer: the answer is not the JSON asked for.
    """
    try:
        data = read_json_value(answer)
        types = {
            str(item["name"]).strip(): _type(item.get("type", "concept"))
            for item in data.get("entities", [])
        }
        facts = [_fact(item, types) for item in data.get("relations", [])]
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise UnusableAnswer(f"the model's answer is not a graph extraction: {exc}") from exc
    extraction = Extraction.of(facts)
    named = [Mention(n, t) for n, t in types.items() if n]
    return Extraction(list(dict.fromkeys([*named, *extraction.entities])), facts)


def _fact(item: dict[str, Any], types: dict[str, str]) -> Fact:
    source, target = str(item["source"]).strip(), str(item["target"]).strip()
    if not source or not target:
        raise ValueError("a relation without both ends")
    return Fact(
        Mention(source, types.get(source, "concept")),
        _type(item["type"]),
        Mention(target, types.get(target, "concept")),
    )


def _type(value: object) -> str:
    text = re.sub(r"[^a-z0-9_]+", "_", str(value).strip().lower()).strip("_") or "concept"
    return type_name(text if text[0].isalpha() else f"t_{text}", "type")


def extractor_for(model: ChatModel | None) -> Extractor:
    """The LLM extractor when a model is configured, else the rules."""
    return RuleExtractor() if model is None else LLMExtractor(model)
