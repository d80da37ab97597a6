"""``LLMExtractor`` against the local chat server: a realistic extraction answer (reasoning
first, as local models give it) becomes validated items with provenance; inferences stay
marked inferred; items citing turns the model was not shown are dropped; failures are typed."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from engramdb.core.errors import LLMEmptyAnswerError, LLMOutputError
from engramdb.core.retry import RetryPolicy
from engramdb.llm import ChatClient, LLMConfig
from engramdb.llm.extraction import LLMExtractor
from engramdb.llm.extraction_schema import Extraction, Inference, Turn
from tests.helpers.openai_server import REPLAYED, FakeChatServer, Reply, fake, server

__all__ = ["fake", "server"]  # fixtures used here

QUICK = RetryPolicy(attempts=2, base_delay_s=0.01, max_elapsed_s=2.0)
TURNS = [
    Turn(
        id="t1",
        role="user",
        content="I moved to Lisbon last month and I work at Acme now.",
        timestamp=datetime(2026, 5, 4, 9, 30, tzinfo=UTC),
    ),
    Turn(id="t2", role="assistant", content="Congratulations! How is Lisbon?"),
    Turn(id="t3", role="user", content="Great. My dog Rex loves the beach. Dentist on May 12."),
]
ANSWER = {
    "facts": [
        {"attribute": "city", "value": "Lisbon", "turn_ids": ["t1"], "confidence": 0.95},
        {"attribute": "employer", "value": "Acme", "turn_ids": ["t1"]},
        {"attribute": "pet", "value": "Rex", "turn_ids": ["t3"], "note": "an extra key"},
        {"attribute": "employer", "value": "Globex", "turn_ids": ["t9"]},  # never shown
    ],
    "events": [
        {
            "description": "dentist appointment",
            "when": "May 12",
            "on": "2026-05-12",
            "turn_ids": ["t3"],
        }
    ],
    "entities": [{"name": "Rex", "entity_type": "pet", "turn_ids": ["t3"]}],
    "relations": [{"source": "user", "relation": "owns", "target": "Rex", "turn_ids": ["t3"]}],
    "inferences": [
        {
            "kind": "preference",
            "statement": "enjoys living near the sea",
            "turn_ids": ["t1", "t3"],
            "confidence": 0.6,
        }
    ],
}


def chat(fake: FakeChatServer) -> ChatClient:
    config = LLMConfig(base_url=fake.base_url, model="extractor", retry=QUICK, json_attempts=2)
    return ChatClient(config)


async def extract(fake: FakeChatServer, turns: list[Turn]) -> Extraction:
    async with chat(fake) as client:
        return await LLMExtractor(client).extract(turns)


async def test_turns_become_grounded_items_and_inferences_stay_inferred(
    fake: FakeChatServer,
) -> None:
    answer = "<think>The user moved; the dog is Rex.</think>\n" + json.dumps(ANSWER)
    fake.queue("chat", Reply.ok(answer))
    found = await extract(fake, TURNS)
    assert [(f.attribute, f.value, f.turn_ids) for f in found.facts] == [
        ("city", "Lisbon", ["t1"]),
        ("employer", "Acme", ["t1"]),
        ("pet", "Rex", ["t3"]),
    ]
    assert found.facts[0].confidence == 0.95
    assert found.events[0].on == date(2026, 5, 12)
    assert found.relations[0].target == "Rex"
    (inference,) = found.inferences
    assert isinstance(inference, Inference)
    assert inference.inferred is True
    assert inference.confidence == 0.6
    (request,) = fake.asked("chat")
    shown = request.body["messages"][1]["content"]
    assert "[t1] (2026-05-04T09:30:00+00:00) user: I moved to Lisbon" in shown
    assert "[t2] assistant:" in shown
    assert request.body["response_format"]["json_schema"]["name"] == "Extraction"


async def test_a_stated_item_cannot_claim_to_be_inferred_or_the_reverse(
    fake: FakeChatServer,
) -> None:
    stated = {"kind": "goal", "statement": "x", "turn_ids": ["t1"], "inferred": False}
    bad = {"inferences": [stated]}
    fake.queue("chat", Reply.ok(json.dumps(bad)), Reply.ok(json.dumps(bad)))
    with pytest.raises(LLMOutputError, match="inferred"):
        await extract(fake, TURNS)


async def test_an_item_without_provenance_is_asked_again(fake: FakeChatServer) -> None:
    unsourced = {"facts": [{"attribute": "city", "value": "Lisbon", "turn_ids": []}]}
    fake.queue("chat", Reply.ok(json.dumps(unsourced)), Reply.ok(json.dumps(ANSWER)))
    found = await extract(fake, TURNS)
    assert found.facts[0].turn_ids == ["t1"]
    assert len(fake.asked("chat")) == 2


async def test_nothing_to_extract_is_an_empty_extraction_not_an_error(
    fake: FakeChatServer,
) -> None:
    fake.queue("chat", Reply.ok('{"facts": [], "events": []}'))
    found = await extract(fake, TURNS)
    assert found == Extraction()
    assert found.is_empty()


async def test_empty_answers_are_a_typed_error(fake: FakeChatServer) -> None:
    fake.queue("chat", Reply.ok(REPLAYED["only_thinking"]), Reply.empty())
    with pytest.raises(LLMEmptyAnswerError):
        await extract(fake, TURNS)


@pytest.mark.parametrize("turns", [[], [TURNS[0], TURNS[0]]], ids=["none", "repeated-id"])
async def test_turns_are_checked_before_asking(fake: FakeChatServer, turns: list[Turn]) -> None:
    with pytest.raises(ValueError, match="turn"):
        await extract(fake, turns)
    assert fake.requests == []
