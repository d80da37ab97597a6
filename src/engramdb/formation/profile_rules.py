"""Rules for first-person profile facts: where the user lives, works, their name, age, pets,
family and likes. Each rule is a pattern over one clause and a builder of the item it states.

| rule | examples | key |
|---|---|---|
| ``name`` | my name is Ana · call me Ana | ``user.name`` |
| ``age`` | I'm 34 years old · I just turned 34 | ``user.age`` |
| ``lives_in`` | I live in Lisbon · I moved to Porto · I'm based in Berlin | ``user.city`` |
| ``left_city`` | I no longer live in Lisbon · I moved out of Lisbon | ``user.city`` (ends) |
| ``works_for`` | I work at Acme · I've been working at Acme · I joined Globex · | |
| | I'm an engineer at Acme · | |
| | my current job at Acme | ``user.employer`` |
| ``left_job`` | I left Acme · I quit Acme · I no longer work for Acme | ``user.employer`` (ends) |
| ``pet`` | my dog Rex · my cat's name is Luna · I adopted a cat named Luna | ``user.pet.<name>`` |
| ``family`` | my sister Ana · my husband, Tom · I have a brother named Joe | |
| | | ``user.family.<role>.<name>`` |
| ``preference`` | I love sushi · I hate horror movies · I can't stand jazz | |
| | | ``user.preference.<thing>`` |

Names (places, employers, pets, people) must be capitalised, as people write them; "I live
in a small town" states no city the rules can name.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from engramdb.formation.types import EntityRef, Operation, RelationRef

#: A capitalised name of one to four words ("New York", "Rio de Janeiro", "AT&T").
NAME = r"[A-Z][\w'&.-]*(?:\s+(?:of\s+|de\s+|da\s+|do\s+|del\s+|van\s+|von\s+)?[A-Z][\w'&-]*){0,3}"
#: A given name: one or two capitalised words.
GIVEN = r"[A-Z][a-z'-]+(?:\s+[A-Z][a-z'-]+)?"
_NOT_NAMES = frozenset({"I", "I'm", "I'll", "I've", "I'd", "The", "A", "An", "And", "But", "So"})
_PETS = (
    "dog|cat|puppy|kitten|parrot|rabbit|bunny|hamster|guinea pig|bird|turtle|tortoise|horse|"
    "fish|snake|lizard|ferret|pony"
)
#: Family role -> (relation type, whether the relation points from the relative to the user).
FAMILY: dict[str, tuple[str, bool]] = {
    "sister": ("sibling_of", True),
    "brother": ("sibling_of", True),
    "mother": ("parent_of", True),
    "mom": ("parent_of", True),
    "father": ("parent_of", True),
    "dad": ("parent_of", True),
    "son": ("parent_of", False),
    "daughter": ("parent_of", False),
    "wife": ("married_to", True),
    "husband": ("married_to", True),
    "partner": ("partner_of", True),
    "girlfriend": ("partner_of", True),
    "boyfriend": ("partner_of", True),
    "grandmother": ("grandparent_of", True),
    "grandma": ("grandparent_of", True),
    "grandfather": ("grandparent_of", True),
    "grandpa": ("grandparent_of", True),
    "aunt": ("relative_of", True),
    "uncle": ("relative_of", True),
    "cousin": ("relative_of", True),
    "niece": ("relative_of", True),
    "nephew": ("relative_of", True),
}
_ROLES = "|".join(FAMILY)
_NAMED = r"(?:'s\s+name\s+is|,|\s+is\s+named|\s+is\s+called|\s+named|\s+called)?\s+"
_LIKES = {
    "love": "likes",
    "like": "likes",
    "enjoy": "likes",
    "adore": "likes",
    "hate": "dislikes",
    "dislike": "dislikes",
    "detest": "dislikes",
    "can't stand": "dislikes",
    "cannot stand": "dislikes",
    "don't like": "dislikes",
    "do not like": "dislikes",
}
# What follows "I like" that names no thing ("I like it", "I like to think …", "I like how …").
_VAGUE_THING = re.compile(
    r"(?i)^(?:it|that|this|these|those|them|you|him|her|how|what|when|where|which|about|"
    r"to\s+think|the\s+idea|the\s+way|some|any|one|more|most|a\s+lot)\b"
)
# Likes about the conversation itself ("I like the example you gave", "I love your idea").
_ABOUT_THE_TALK = re.compile(
    r"(?i)\b(?:you|your|yours)\b|^the\s+(?:example|idea|suggestion|suggestions|list|tip|tips|"
    r"sound\s+of|way|plan|recipe|options?|ideas|answer|response)\b"
)
_PREPOSITIONS = frozenset({"to", "with", "at", "in", "on", "of", "for", "about", "from", "by"})
_THING_END = re.compile(
    r"(?i)\s+(?:because|since|when|while|but|though|although|so\s+much|a\s+lot(?!\s+of)|very\s+much|"
    r"too|and\s+i|as\s+well|these\s+days|nowadays)\b.*$"
)


@dataclass(frozen=True)
class ProfileFact:
    """What a profile rule read: the key, value, sentence and graph form of one fact."""

    key: str
    value: str
    text: str
    operation: Operation = "set"
    entities: tuple[EntityRef, ...] = ()
    relations: tuple[RelationRef, ...] = ()


Builder = Callable[[re.Match[str]], ProfileFact | None]


def slug(text: str, words: int = 6) -> str:
    """A key part from free text: lowercase words joined by ``_``."""
    parts = re.findall(r"[a-z0-9]+", text.lower())[:words]
    return "_".join(parts) or "item"


def _name(match: re.Match[str], group: str = "v") -> str | None:
    name = match[group].strip().rstrip(".'")
    words = name.split()
    while words and words[-1] in _NOT_NAMES:
        words.pop()
    if not words or words[0] in _NOT_NAMES:
        return None
    return " ".join(words)


def _held(key: str, entity_type: str, relation: str, verb: str, operation: Operation) -> Builder:
    """A builder of the fact that the user holds ``relation`` with a named place or employer
    (``set``), or no longer does (``end``); ``verb`` is said of them ("live in")."""

    def build(match: re.Match[str]) -> ProfileFact | None:
        name = _name(match)
        if name is None:
            return None
        other = EntityRef(name, entity_type)
        head, _, rest = verb.partition(" ")
        said = f"{head}s {rest}" if operation == "set" else f"no longer {verb}"
        link = (RelationRef(relation, other),)
        return ProfileFact(key, name, f"The user {said} {name}.", operation, (other,), link)

    return build


_city = _held("user.city", "location", "lives_in", "live in", "set")
_city_end = _held("user.city", "location", "lives_in", "live in", "end")
_employer = _held("user.employer", "organization", "works_for", "work at", "set")
_employer_end = _held("user.employer", "organization", "works_for", "work at", "end")


def _user_name(match: re.Match[str]) -> ProfileFact | None:
    name = _name(match)
    return None if name is None else ProfileFact("user.name", name, f"The user's name is {name}.")


def _age(match: re.Match[str]) -> ProfileFact | None:
    age = int(match["v"])
    if not 1 <= age <= 120:
        return None
    return ProfileFact("user.age", str(age), f"The user is {age} years old.")


def _pet(match: re.Match[str]) -> ProfileFact | None:
    name = _name(match)
    if name is None:
        return None
    kind = match["kind"].lower()
    animal = EntityRef(name, "animal")
    return ProfileFact(
        f"user.pet.{slug(name)}", f"{kind} {name}", f"The user has a {kind} named {name}.",
        "set", (animal,), (RelationRef("has_pet", animal),),
    )  # fmt: skip


def _family(match: re.Match[str]) -> ProfileFact | None:
    name = _name(match)
    if name is None:
        return None
    role = match["role"].lower()
    relation, from_relative = FAMILY[role]
    person = EntityRef(name, "person")
    link = (
        RelationRef(relation, target=None, source=person)
        if from_relative
        else RelationRef(relation, person)
    )
    return ProfileFact(
        f"user.family.{role}.{slug(name)}", name, f"The user's {role} is {name}.", "set",
        (person,), (link,),
    )  # fmt: skip


def _preference(match: re.Match[str]) -> ProfileFact | None:
    thing = _THING_END.sub("", match["v"].strip()).strip(" \"'")
    if (
        len(thing) < 2
        or not thing[0].isalnum()
        or _VAGUE_THING.match(thing)
        or _ABOUT_THE_TALK.search(thing)
        or len(thing.split()) > 8
        or thing.split()[-1].lower() in _PREPOSITIONS
    ):
        return None
    verb = " ".join(match["verb"].lower().split())
    polarity = _LIKES[verb]
    return ProfileFact(
        f"user.preference.{slug(thing)}", f"{polarity} {thing}", f"The user {polarity} {thing}."
    )


def _rule(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


#: (rule name, pattern, builder), tried in order on every clause of a user turn.
PROFILE_RULES: list[tuple[str, re.Pattern[str], Builder]] = [
    ("name", _rule(rf"(?i:\bmy\s+name\s+is|\bcall\s+me)\s+(?P<v>{GIVEN})"), _user_name),
    (
        "age",
        _rule(r"(?i:\bi(?:'m|\s+am)\s+(?P<v>\d{1,3})\s*(?:years?|yrs?)[\s-]*old\b)"),
        _age,
    ),
    ("age", _rule(r"(?i:\bi\s+(?:just\s+)?turned\s+(?P<v>\d{1,3})\b)"), _age),
    (
        "lives_in",
        _rule(
            r"(?i:\bi\s+(?:now\s+|currently\s+|still\s+)?(?:live|am\s+living|'m\s+living|reside)"
            rf"\s+in|\bi(?:'m|\s+am)\s+(?:now\s+|currently\s+)?based\s+in)\s+(?P<v>{NAME})"
        ),
        _city,
    ),
    (
        "lives_in",
        _rule(
            r"(?i:\bi(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:moved|relocated)"
            rf"(?:\s+back|\s+over)?\s+to)\s+(?P<v>{NAME})"
        ),
        _city,
    ),
    (
        "left_city",
        _rule(
            r"(?i:\bi\s+(?:no\s+longer|don't|do\s+not)\s+live\s+in|\bi(?:'ve|\s+have)?\s+"
            rf"(?:just\s+)?moved\s+(?:out\s+of|away\s+from))\s+(?P<v>{NAME})"
        ),
        _city_end,
    ),
    (
        "works_for",
        _rule(
            r"(?i:\bi\s+(?:now\s+|currently\s+|still\s+)?(?:work|am\s+working|'m\s+working)"
            r"\s+(?:at|for)|\bi(?:'ve|\s+have)\s+been\s+working\s+(?:at|for)|\bi(?:'ve|\s+have)?\s+(?:just\s+|recently\s+)?(?:joined|started\s+"
            r"(?:a\s+new\s+job\s+|my\s+(?:new\s+|current\s+)?job\s+|working\s+)?at|"
            r"got\s+a\s+(?:new\s+)?job\s+(?:at|with))|\bmy\s+(?:current|new)\s+job\s+at|"
            r"\bi(?:'m|\s+am)\s+(?:now\s+)?an?\s+(?:[a-z-]+\s+){1,3}(?:at|for))"
            rf"\s+(?P<v>{NAME})"
        ),
        _employer,
    ),
    (
        "left_job",
        _rule(
            r"(?i:\bi(?:'ve|\s+have)?\s+(?:just\s+|recently\s+|finally\s+)?(?:left|quit)"
            rf"(?:\s+my\s+job\s+at)?)\s+(?P<v>{NAME})"
        ),
        _employer_end,
    ),
    (
        "left_job",
        _rule(rf"(?i:\bi\s+(?:no\s+longer|don't|do\s+not)\s+work\s+(?:at|for))\s+(?P<v>{NAME})"),
        _employer_end,
    ),
    (
        "pet",
        _rule(rf"(?i:\bmy\s+(?:\w+\s+)?(?P<kind>{_PETS}))(?i:{_NAMED})(?P<v>{GIVEN})"),
        _pet,
    ),
    (
        "pet",
        _rule(
            r"(?i:\bi\s+(?:have|got|adopted|own|rescued)\s+an?\s+(?:\w+\s+)?"
            rf"(?P<kind>{_PETS})\s+(?:named|called))\s+(?P<v>{GIVEN})"
        ),
        _pet,
    ),
    (
        "family",
        _rule(
            r"(?i:\bmy\s+(?:older\s+|younger\s+|big\s+|little\s+|twin\s+)?"
            rf"(?P<role>{_ROLES}))(?i:{_NAMED})(?P<v>{GIVEN})"
        ),
        _family,
    ),
    (
        "family",
        _rule(
            r"(?i:\bi\s+have\s+an?\s+(?:older\s+|younger\s+|big\s+|little\s+|twin\s+)?"
            rf"(?P<role>{_ROLES})\s+(?:named|called))\s+(?P<v>{GIVEN})"
        ),
        _family,
    ),
    (
        "preference",
        _rule(
            r"(?i:\bi\s+(?:really\s+|absolutely\s+|totally\s+|just\s+|also\s+)?"
            rf"(?P<verb>{'|'.join(_LIKES)}))\s+(?P<v>[^,.;!?]{{2,80}})"
        ),
        _preference,
    ),
]
