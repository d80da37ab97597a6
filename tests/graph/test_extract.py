"""From text to graph: the rules, the LLM extractor against a local chat server (with its
fallback), and ``ingest`` linking facts to the memories they came from."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.llm import ChatClient, LLMConfig
from engramdb.providers.graph import LLMExtractor, RuleExtractor
from engramdb.providers.graph.extract import UnusableAnswer, parse_answer
from tests.helpers.openai_server import FakeChatServer, fake, server

__all__ = ["fake", "server"]  # fixtures used here


def triples(text: str, speaker: str = "me") -> list[tuple[str, str, str]]:
    facts = RuleExtractor().facts(text, speaker)
    return [(f.source.name, f.relation_type, f.target.name) for f in facts]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Alice works for Acme", [("Alice", "works_for", "Acme")]),
        ("I work at Globex Corporation.", [("me", "works_for", "Globex Corporation")]),
        ("I live in Lisbon", [("me", "lives_in", "Lisbon")]),
        ("Bob moved to New York last year.", [("Bob", "lives_in", "New York")]),
        ("Bob is Alice's brother", [("Bob", "sibling_of", "Alice")]),
        ("Carol is my boss", [("me", "reports_to", "Carol")]),
        ("Dan is Eve's father.", [("Dan", "parent_of", "Eve")]),
        (
            "My sister Ana lives in Porto",
            [("Ana", "sibling_of", "me"), ("Ana", "lives_in", "Porto")],
        ),
        (
            "Alice is married to Bob; Bob knows Carol",
            [
                ("Alice", "married_to", "Bob"),
                ("Bob", "knows", "Carol"),
            ],
        ),
        ("Frank was born in Rio de Janeiro", [("Frank", "born_in", "Rio de Janeiro")]),
        ("the weather is nice today", []),
    ],
)
def test_rules_read_simple_statements(text: str, expected: list[tuple[str, str, str]]) -> None:
    assert triples(text) == expected


async def test_rules_type_the_entities() -> None:
    extraction = await RuleExtractor().extract(
        "Alice works for Acme. I live in Lisbon.", speaker="me"
    )
    assert [(m.name, m.entity_type) for m in extraction.entities] == [
        ("Alice", "person"),
        ("Acme", "organization"),
        ("me", "person"),
        ("Lisbon", "location"),
    ]


async def test_ingest_links_facts_to_the_memory_they_came_from(plain_engine: Engine) -> None:
    mem = plain_engine.scope(tenant="acme", user="alice")
    said = "I moved to Lisbon. My brother Bob works for Acme."
    stored = await mem.episodic.memorize(MemoryItem(text=said, id="turn-7"))
    when = datetime(2025, 3, 1, tzinfo=UTC)
    result = await mem.graph.ingest(said, source=f"episodic:{stored.id}", occurred_at=when)
    assert sorted(e.name for e in result.entities) == ["Acme", "Bob", "Lisbon", "alice"]
    assert all(e.sources == ["episodic:turn-7"] for e in result.entities)
    assert {r.relation_type for r in result.relations} == {"lives_in", "sibling_of", "works_for"}
    assert all(r.sources == ["episodic:turn-7"] for r in result.relations)
    assert all(r.valid_at == when for r in result.relations)
    # A later move ends the earlier address; the same people are resolved, not duplicated.
    later = await mem.graph.ingest("I live in Berlin now", source="episodic:turn-9")
    alice = await mem.graph.find_entity("Alice", "person")
    assert alice is not None
    homes = await mem.graph.get_relations(alice.entity_id, relation_type="lives_in")
    (home,) = homes
    assert (await mem.graph.get_entity(home.target_id)).name == "Berlin"  # type: ignore[union-attr]
    assert later.entities[0].entity_id == alice.entity_id
    assert alice.sources == ["episodic:turn-7", "episodic:turn-9"]


ANSWER = {
    "entities": [
        {"name": "Alice", "type": "person"},
        {"name": "Wonderland Labs", "type": "Organization"},
    ],
    "relations": [{"source": "Alice", "type": "founded", "target": "Wonderland Labs"}],
}


async def test_the_llm_extractor_reads_the_models_json(fake: FakeChatServer) -> None:
    fake.answers["graph"] = "```json\n" + json.dumps(ANSWER) + "\n```"
    async with ChatClient(LLMConfig(base_url=fake.base_url, model="graph")) as chat:
        extraction = await LLMExtractor(chat).extract("Alice started Wonderland Labs", speaker="me")
    assert [(m.name, m.entity_type) for m in extraction.entities] == [
        ("Alice", "person"),
        ("Wonderland Labs", "organization"),
    ]
    ((fact),) = extraction.relations
    assert (fact.source.name, fact.relation_type, fact.target.name) == (
        "Alice",
        "founded",
        "Wonderland Labs",
    )
    (request,) = fake.requests
    system, user = (m["content"] for m in request.body["messages"])
    assert '"me"' in system
    assert user == "Alice started Wonderland Labs"


def test_a_local_models_untidy_answer_is_read() -> None:
    # Reasoning first, then JSON with a trailing comma, cut short before its last brackets.
    answer = "<think>Alice founded a company: one relation.</think>\n" + json.dumps(ANSWER)[
        :-3
    ].replace('"Organization"}', '"Organization"},')
    extraction = parse_answer(answer)
    assert [m.name for m in extraction.entities] == ["Alice", "Wonderland Labs"]
    assert [f.relation_type for f in extraction.relations] == ["founded"]


@pytest.mark.parametrize("model", ["fail-500", "bad-json", "echo"])
async def test_the_rules_answer_when_the_model_cannot(fake: FakeChatServer, model: str) -> None:
    async with ChatClient(LLMConfig(base_url=fake.base_url, model=model)) as chat:
        extraction = await LLMExtractor(chat).extract("Alice works for Acme", speaker="me")
    assert [(f.source.name, f.relation_type, f.target.name) for f in extraction.relations] == [
        ("Alice", "works_for", "Acme")
    ]


def test_unusable_answers_are_refused() -> None:
    for answer in (
        "[]",
        "not json",
        '{"entities": [{"type": "person"}]}',
        '{"relations": [{"source": "", "type": "x", "target": "y"}]}',
        '{"relations": [{"source": "a", "target": "b"}]}',
    ):
        with pytest.raises(UnusableAnswer):
            parse_answer(answer)


async def test_an_engine_with_a_model_extracts_with_it(
    fake: FakeChatServer, tmp_path: Path
) -> None:
    fake.answers["graph"] = json.dumps(ANSWER)
    config = EngineConfig(embedder=None, llm=LLMConfig(base_url=fake.base_url, model="graph"))
    async with engramdb.open(tmp_path / "llm.db", config=config) as engine:
        graph = engine.scope(tenant="acme", user="alice").graph
        result = await graph.ingest("Alice started Wonderland Labs", source="episodic:1")
        assert [r.relation_type for r in result.relations] == ["founded"]
        labs = await graph.find_entity("wonderland labs", "organization")
        assert labs is not None
        assert labs.sources == ["episodic:1"]
