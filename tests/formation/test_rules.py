"""The rule-based extractor: each documented pattern, what it must not read, provenance."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engramdb.formation.rules import RuleExtractor, clauses
from engramdb.formation.types import Extractor, Turn

# A Monday.
NOW = datetime(2024, 6, 3, 10, tzinfo=UTC)


def items(text: str, role: str = "user") -> list[tuple[str, str, str]]:
    found = RuleExtractor().extract_now([Turn("s1:0", role, text, NOW)])
    return [(item.key, item.value, item.operation) for item in found.items]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Ana.", ("user.name", "Ana", "set")),
        ("you can call me Ana Silva", ("user.name", "Ana Silva", "set")),
        ("I'm 34 years old.", ("user.age", "34", "set")),
        ("I just turned 40!", ("user.age", "40", "set")),
        ("I live in Lisbon.", ("user.city", "Lisbon", "set")),
        ("i currently live in New York", ("user.city", "New York", "set")),
        ("I'm based in Rio de Janeiro.", ("user.city", "Rio de Janeiro", "set")),
        ("I moved to Porto.", ("user.city", "Porto", "set")),
        ("I've just relocated to Berlin.", ("user.city", "Berlin", "set")),
        ("I no longer live in Lisbon.", ("user.city", "Lisbon", "end")),
        ("I work at Acme.", ("user.employer", "Acme", "set")),
        ("I work for Acme Corp.", ("user.employer", "Acme Corp", "set")),
        ("I joined Globex last month.", ("user.employer", "Globex", "set")),
        ("I'm a software engineer at Google.", ("user.employer", "Google", "set")),
        ("before I started my current job at NovaTech", ("user.employer", "NovaTech", "set")),
        ("I've been working at NovaTech for 4 years", ("user.employer", "NovaTech", "set")),
        ("I left Acme.", ("user.employer", "Acme", "end")),
        ("I quit my job at Initech.", ("user.employer", "Initech", "end")),
        ("I no longer work at Acme.", ("user.employer", "Acme", "end")),
        ("My dog Rex loves the beach.", ("user.pet.rex", "dog Rex", "set")),
        ("My cat's name is Luna.", ("user.pet.luna", "cat Luna", "set")),
        ("I adopted a kitten named Miso.", ("user.pet.miso", "kitten Miso", "set")),
        ("My sister Maria is a nurse.", ("user.family.sister.maria", "Maria", "set")),
        ("my husband, Tom, cooks.", ("user.family.husband.tom", "Tom", "set")),
        ("I have a brother named Joe.", ("user.family.brother.joe", "Joe", "set")),
        ("I love sushi.", ("user.preference.sushi", "likes sushi", "set")),
        ("I really enjoy hiking.", ("user.preference.hiking", "likes hiking", "set")),
        (
            "I hate horror movies.",
            ("user.preference.horror_movies", "dislikes horror movies", "set"),
        ),
        ("I can't stand jazz.", ("user.preference.jazz", "dislikes jazz", "set")),
        (
            "I like listening to a lot of electronic music.",
            (
                "user.preference.listening_to_a_lot_of_electronic",
                "likes listening to a lot of electronic music",
                "set",
            ),
        ),
    ],
)
def test_profile_patterns(text: str, expected: tuple[str, str, str]) -> None:
    assert expected in items(text)


@pytest.mark.parametrize(
    ("text", "key", "starts", "sentence"),
    [
        (
            "I'm going to fly to Paris next Friday.",
            "event.20240607.fly_to_paris",
            "2024-06-07",
            "The user plans to fly to Paris on Friday 2024-06-07.",
        ),
        (
            "I'm planning a trip to Rome on May 5.",  # passed this year: next year's
            "event.20250505.planning_a_trip_to_rome",
            "2025-05-05",
            "The user is planning a trip to Rome on Monday 2025-05-05.",
        ),
        (
            "I have a dentist appointment on Thursday.",
            "event.20240606.a_dentist_appointment",
            "2024-06-06",
            "The user has a dentist appointment on Thursday 2024-06-06.",
        ),
        (
            "I'll visit my parents tomorrow.",
            "event.20240604.visit_their_parents",
            "2024-06-04",
            "The user plans to visit their parents on Tuesday 2024-06-04.",
        ),
        (
            "I got a certification in Data Science about 3 months ago.",
            "event.20240217.got_a_certification_in_data_science",
            "2024-02-17",  # three months back, widened by the resolver's half-month tolerance
            "The user got a certification in Data Science between 2024-02-17 and 2024-03-18.",
        ),
        (
            "I went to a concert last Saturday.",
            "event.20240601.went_to_a_concert",
            "2024-06-01",
            "The user went to a concert on Saturday 2024-06-01.",
        ),
    ],
)
def test_dated_events(text: str, key: str, starts: str, sentence: str) -> None:
    found = RuleExtractor().extract_now([Turn("s1:3", "user", text, NOW)])
    (event,) = [item for item in found.items if item.category == "event"]
    assert (event.key, event.text, event.sources) == (key, sentence, ("s1:3",))
    assert event.starts is not None
    assert event.starts.date().isoformat() == starts
    assert event.ends is not None
    assert event.ends > event.starts


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("I've been learning Portuguese.", "activity.learning_portuguese"),
        ("I started taking yoga classes.", "activity.taking_yoga_classes"),
        ("I'm training for a marathon.", "activity.training_for_a_marathon"),
        ("I usually run in the morning.", "activity.run_in_the_morning"),
        (
            "I'm watching YouTube videos in Spanish and I think it helps.",
            "activity.watching_youtube_videos_in_spanish",
        ),
    ],
)
def test_activities(text: str, key: str) -> None:
    found = RuleExtractor().extract_now([Turn("s1:0", "user", text, NOW)])
    assert [(i.category, i.key) for i in found.items] == [("activity", key)]


@pytest.mark.parametrize(
    "text",
    [
        "I like it.",
        "I live in a small town.",  # no name to store
        "I'd like to know more about Lisbon.",
        "What is the weather in Paris?",
        "My dog is cute.",
        "I like the example you provided.",
        "I love your idea!",
        "I'm doing a good job so far.",
        "I attended last week.",
        "I like listening to.",
    ],
)
def test_no_fact(text: str) -> None:
    assert items(text) == []


def test_assistant_first_person_is_not_the_user() -> None:
    found = RuleExtractor().extract_now([Turn("a", "assistant", "I live in Lisbon.", NOW)])
    assert found.items == []
    assert "none of the 1 turns is the user's" in found.notes[0]


def test_nothing_found_says_why() -> None:
    found = RuleExtractor().extract_now([Turn("a", "user", "What time is it?", NOW)])
    assert found.items == []
    assert found.turns_read == 1
    assert found.notes[0].startswith("no rule matched in 1 user turns")
    assert RuleExtractor().extract_now([]).notes == ["no turns were given"]


def test_one_clause_can_state_several_things() -> None:
    found = RuleExtractor().extract_now([Turn("t9", "user", "I moved to Berlin last week.", NOW)])
    assert {(i.category, i.key) for i in found.items} == {
        ("profile", "user.city"),
        ("event", "event.20240527.moved_to_berlin"),
    }
    assert all(i.sources == ("t9",) and i.stated_at == NOW for i in found.items)


def test_graph_form_of_profile_facts() -> None:
    found = RuleExtractor().extract_now(
        [Turn("t", "user", "My dog Rex and I live in Lisbon.", NOW)]
    )
    pet = next(i for i in found.items if i.key == "user.pet.rex")
    assert [(e.name, e.entity_type) for e in pet.entities] == [("Rex", "animal")]
    assert [(r.relation_type, r.target) for r in pet.relations] == [("has_pet", pet.entities[0])]


def test_clauses() -> None:
    assert clauses("I live in Lisbon. I work at Acme, but I left St. Louis!") == [
        "I live in Lisbon",
        "I work at Acme",
        "I left St. Louis",
    ]


async def test_extractor_protocol() -> None:
    extractor = RuleExtractor()
    assert isinstance(extractor, Extractor)
    found = await extractor.extract([Turn("x", "user", "I live in Lisbon.", NOW)], subject="ana")
    assert found.extractor == "rules"
    assert found.items[0].key == "user.city"
