"""A chat model's answer in formation's terms: its attributes get the rules' keys and values,
so the two paths consolidate into the same facts."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from engramdb.formation.model_extraction import event_item, fact_item, inference_item
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import Turn
from engramdb.llm.extraction_schema import ExtractedEvent, ExtractedFact, Inference

NOW = datetime(2024, 5, 13, 9, 0, tzinfo=UTC)


def fact(attribute: str, value: str, **more: object) -> ExtractedFact:
    return ExtractedFact.model_validate(
        {"attribute": attribute, "value": value, "turn_ids": ["t"], **more}
    )


@pytest.mark.parametrize(
    ("said", "attribute", "value"),
    [
        ("I live in Lisbon.", "city", "Lisbon"),
        ("I work at Acme.", "works_at", "Acme"),
        ("My dog Rex is cute.", "dog", "Rex"),
        ("My sister Maria visits.", "sister", "Maria"),
        ("I love sushi.", "likes", "sushi"),
        ("My name is Ana.", "name", "Ana"),
        ("I'm 34 years old.", "age", "34"),
    ],
)
def test_the_model_and_the_rules_agree_on_keys_and_values(
    said: str, attribute: str, value: str
) -> None:
    (ruled,) = RuleExtractor().extract_now([Turn("t", "user", said, NOW)]).items
    modelled = fact_item(fact(attribute, value), NOW, "ana")
    assert (modelled.key, modelled.value, modelled.text) == (ruled.key, ruled.value, ruled.text)
    assert [r.relation_type for r in modelled.relations] == [
        r.relation_type for r in ruled.relations
    ]


def test_other_attributes_and_subjects() -> None:
    ended = fact_item(fact("employer", "Acme", ended=True), NOW, "ana")
    assert (ended.key, ended.operation, ended.text) == (
        "user.employer",
        "end",
        "The user no longer works at Acme.",
    )
    job = fact_item(fact("profession", "engineer"), NOW, "ana")
    assert (job.key, job.text) == ("user.occupation", "The user is an engineer.")
    odd = fact_item(fact("favourite colour", "green"), NOW, "ana")
    assert (odd.key, odd.text) == ("user.favourite_colour", "The user's favourite colour is green.")
    other = fact_item(fact("hometown", "Porto", subject="Maria"), NOW, "ana")
    assert (other.key, other.text) == ("about.maria.hometown", "Maria's hometown is Porto.")
    me = fact_item(fact("city", "Porto", subject="Ana"), NOW, "ana")
    assert me.key == "user.city"  # the user by their name is the user
    activity = fact_item(fact("hobby", "Learning Portuguese", category="activity"), NOW, "ana")
    assert (activity.category, activity.key) == ("activity", "activity.learning_portuguese")
    prefers = fact_item(fact("drink", "tea over coffee", category="preference"), NOW, "ana")
    assert (prefers.category, prefers.key, prefers.inferred) == (
        "mind",
        "mind.preference.tea_over_coffee",
        False,
    )


def test_events_and_inferences() -> None:
    dated = event_item(
        ExtractedEvent(
            description="The user flies to Paris.", on=date(2024, 5, 17), turn_ids=["t"]
        ),
        NOW,
    )
    assert dated.key == "event.20240517.flies_to_paris"
    assert dated.text == "The user flies to Paris on Friday 2024-05-17."
    assert (dated.starts, dated.ends) == (
        datetime(2024, 5, 17, tzinfo=UTC),
        datetime(2024, 5, 18, tzinfo=UTC),
    )
    undated = event_item(
        ExtractedEvent(description="The user moved to Berlin", when="last month", turn_ids=["t"]),
        NOW,
    )
    assert (undated.key, undated.text, undated.starts) == (
        "event.moved_to_berlin",
        "The user moved to Berlin (last month).",
        None,
    )
    guess = inference_item(
        Inference(kind="belief", statement="The user trusts small teams", turn_ids=["t"]), NOW
    )
    assert (guess.category, guess.key, guess.inferred, guess.confidence) == (
        "mind",
        "mind.belief.trusts_small_teams",
        True,
        0.5,
    )
    assert guess.text == "The user trusts small teams."
