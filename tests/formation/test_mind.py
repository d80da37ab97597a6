"""Theory of mind without a model: the goals and preferences the user states, kept as stated,
and a report that says inferences need a chat model."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from engramdb.engine import Engine
from engramdb.formation.mind_rules import mind_of
from engramdb.formation.rules import RuleExtractor
from engramdb.formation.types import Turn

NOW = datetime(2024, 6, 3, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("clause", "key", "text"),
    [
        ("My goal is to run a marathon", "goal.run_a_marathon", "wants to run a marathon"),
        ("I want to learn Portuguese", "goal.learn_portuguese", "wants to learn Portuguese"),
        (
            "I'd like to write a book about my grandmother",
            "goal.write_a_book_about_their_grandmother",
            "wants to write a book about their grandmother",
        ),
        ("I'm hoping to get promoted", "goal.get_promoted", "wants to get promoted"),
        ("I prefer tea over coffee", "preference.tea_over_coffee", "prefers tea over coffee"),
        ("I'd rather work from home", "preference.work_from_home", "would rather work from home"),
    ],
)
def test_stated_goals_and_preferences(clause: str, key: str, text: str) -> None:
    found = mind_of(clause)
    assert found is not None
    assert (found.key, found.text) == (f"mind.{key}", f"The user {text}.")


@pytest.mark.parametrize(
    "clause",
    [
        "I want to ask you something",
        "I'd like to know more",
        "I want to thank you",
        "I like it",
        "I'd like to try making it at home",  # "it": only the conversation says what
        "I want to find more like that",
    ],
)
def test_wants_about_the_conversation_are_not_goals(clause: str) -> None:
    assert mind_of(clause) is None


def test_a_dated_want_is_a_plan_not_a_goal() -> None:
    turn = Turn("t", "user", "I want to fly to Paris next Friday.", NOW)
    (item,) = RuleExtractor().extract_now([turn]).items
    assert (item.category, item.key) == ("event", "event.20240607.fly_to_paris")


async def test_rules_keep_stated_goals_and_say_inferences_need_a_model(
    any_engine: Engine,
) -> None:
    mem = any_engine.scope(user="ana")
    report = await mem.ingest(
        [{"role": "user", "content": "My goal is to run a marathon.", "timestamp": NOW}]
    )
    assert report.extractor == "rules"
    assert report.categories["mind"].added == 1
    assert report.theory_of_mind.startswith("theory of mind without a model")
    assert "EngineConfig(llm=...)" in report.to_dict()["theory_of_mind"]
    (goal,) = await mem.semantic.history("mind.goal.run_a_marathon")
    assert goal.kind == "mind"
    assert goal.metadata["standing"] == "stated"
    assert "inferred" not in goal.metadata
    # Stated, so remember gives it like any fact the user said.
    found = await mem.semantic.remember("what is the user's goal?")
    assert found[0].text == "The user wants to run a marathon."
