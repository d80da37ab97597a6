"""Formation with a chat model, through the local OpenAI-protocol server: the three-session
conversation of ``test_scenario`` answered well, in broken JSON, after thinking, slowly, rate
limited and empty. Each ends in stored memories (the model's, or the rules' with a note saying
why) or, when asked to be strict, in a typed error; never in silence."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.client import MemoryClient
from engramdb.core.errors import (
    LLMEmptyAnswerError,
    LLMError,
    LLMOutputError,
    LLMUnavailableError,
)
from engramdb.core.retry import RetryPolicy
from engramdb.engine import Engine, EngineConfig, ScopedMemory
from engramdb.formation.model_extraction import FallbackExtractor, ModelExtractor
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.llm.client import LLMConfig
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.formation.test_scenario import CONVERSATION, S1, S3
from tests.helpers.openai_server import FakeChatServer, Reply, fake, server

__all__ = ["fake", "server"]

ANSWERS: dict[str, str] = json.loads(
    (Path(__file__).parent / "data" / "scenario_answers.json").read_text()
)
QUICK = RetryPolicy(attempts=2, base_delay_s=0.05, max_delay_s=2.0, max_elapsed_s=5.0)


def llm_config(fake: FakeChatServer, **settings: object) -> LLMConfig:
    options: dict[str, object] = {"retry": QUICK, "timeout_s": 2.0, **settings}
    return LLMConfig(base_url=fake.base_url, model="extractor", **options)  # type: ignore[arg-type]


async def open_engine(
    target: str, fake: FakeChatServer, embedder: MiniLMEmbedder, **settings: object
) -> Engine:
    config = EngineConfig(embedder=embedder, llm=llm_config(fake, **settings))
    return await engramdb.open(target, config=config)


@pytest.fixture(params=["sqlite", "postgresql"])
async def llm_engine(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    embedder: MiniLMEmbedder,
    fake: FakeChatServer,
) -> AsyncIterator[Engine]:
    """An engine on each backend whose chat model is the fake server."""
    from tests.postgres.database import empty_database

    target = str(tmp_path / "engram.db") if request.param == "sqlite" else empty_database()
    opened = await open_engine(target, fake, embedder)
    try:
        yield opened
    finally:
        await opened.close()


@pytest.fixture
async def sqlite_llm_engine(
    tmp_path: Path, embedder: MiniLMEmbedder, fake: FakeChatServer
) -> AsyncIterator[Engine]:
    opened = await open_engine(str(tmp_path / "engram.db"), fake, embedder)
    try:
        yield opened
    finally:
        await opened.close()


async def assert_formed_by_model(mem: ScopedMemory) -> None:
    """What the model's answer forms, whatever state it came in."""
    city = await mem.semantic.history("user.city")
    assert [(v.text, v.valid_from, v.valid_to) for v in city] == [
        ("The user lives in Berlin.", S3, None),
        ("The user lives in Lisbon.", S1, S3),
    ]
    employer = await mem.semantic.history("user.employer")
    assert (employer[0].text, employer[0].valid_to) == ("The user works at Globex.", None)
    assert (employer[1].text, employer[1].valid_to) == ("The user works at Acme.", S3)
    found = await mem.semantic.remember("where does the user live?")
    assert found[0].text == "The user lives in Berlin."


async def test_well_behaved_model_forms_the_scenario(
    llm_engine: Engine, fake: FakeChatServer
) -> None:
    fake.queue("chat", Reply.ok(ANSWERS["well_behaved"]))
    mem = llm_engine.scope(tenant="acme", user="ana")
    report = await mem.ingest(CONVERSATION)

    assert report.extractor == "llm"
    assert report.notes == []
    profile = report.categories["profile"]
    assert (profile.added, profile.updated, profile.ended, profile.superseded) == (5, 2, 1, 3)
    await assert_formed_by_model(mem)

    # The model saw every turn under its id, and was asked for the schema.
    (asked,) = fake.asked("chat")
    shown = asked.body["messages"][1]["content"]
    assert "[s1:0] (2024-03-04T10:00:00+00:00) user: Hi! My name is Ana." in shown
    assert asked.body["response_format"]["type"] == "json_schema"

    # Keys are the rules' keys, so the same facts told to the rules later change nothing.
    again = await mem.ingest(CONVERSATION[:1], extractor=engramdb.RuleExtractor())
    assert again.extractor == "rules"
    assert {o.key: (o.decision, o.note) for o in again.outcomes} == {
        "user.name": ("unchanged", "already formed from these turns"),
        "user.city": ("unchanged", "already known as history"),
        "user.employer": ("unchanged", "already known as history"),
    }

    # The dated event has its date, in assemble too; every item names its turns.
    plan = await mem.semantic.history("event.20240517.flies_to_paris_for_a_design")
    assert plan[0].metadata["starts"] == "2024-05-17T00:00:00+00:00"
    assert plan[0].metadata["sources"] == ["s2:0"]
    context = await mem.assemble("when is the user's trip to Paris?", token_limit=800)
    assert "2024-05-17" in context.text
    assert all(o.item.sources for o in report.outcomes)

    # The graph: the pet by name, the current employer and city.
    hits = await mem.graph.search("Rex")
    assert hits[0].entry.value["name"] == "Rex"
    assert hits[0].entry.value["sources"] == ["episodic:s1:2"]


async def test_inferences_are_kept_apart(llm_engine: Engine, fake: FakeChatServer) -> None:
    fake.queue("chat", Reply.ok(ANSWERS["well_behaved"]))
    mem = llm_engine.scope(tenant="acme", user="ana")
    report = await mem.ingest(CONVERSATION)
    assert report.categories["mind"].added == 3
    assert "inferred" in report.theory_of_mind

    (goal,) = await mem.semantic.history("mind.goal.wants_to_grow_their_career_in")
    assert goal.kind == "mind"
    assert goal.metadata["inferred"] is True
    assert goal.metadata["standing"] == "inferred"
    assert goal.metadata["confidence"] == 0.6
    assert goal.metadata["sources"] == ["s1:2", "s2:0"]
    stated = await mem.semantic.history("user.city")
    assert "inferred" not in stated[0].metadata

    # remember gives what the user said; inferences only when asked for.
    question = "what does the user want for their career?"
    assert all(not i.metadata.get("inferred") for i in await mem.semantic.remember(question))
    with_inferred = await mem.semantic.remember(question, inferred=True)
    assert goal.text in [i.text for i in with_inferred]


async def test_an_inference_never_replaces_a_stated_fact(
    sqlite_llm_engine: Engine, fake: FakeChatServer
) -> None:
    fake.queue("chat", Reply.ok(ANSWERS["inference_against_stated"]))
    mem = sqlite_llm_engine.scope(user="ana")
    said = datetime(2024, 1, 1, tzinfo=UTC)
    report = await mem.ingest(
        [
            {
                "id": "m:0",
                "role": "user",
                "content": "I prefer tea over coffee.",
                "timestamp": said,
            },
            {"id": "m:1", "role": "user", "content": "Working from home suits me."},
        ]
    )
    decisions = {(o.item.inferred, o.key): o.decision for o in report.outcomes}
    assert decisions[(False, "mind.preference.tea_over_coffee")] == "added"
    assert decisions[(True, "mind.preference.tea_over_coffee")] == "unchanged"
    (kept,) = await mem.semantic.history("mind.preference.tea_over_coffee")
    assert kept.metadata["standing"] == "stated"
    assert "inferred" not in kept.metadata
    belief = [o for o in report.outcomes if o.item.pattern == "inferred_belief"]
    assert belief[0].decision == "added"


@pytest.mark.parametrize("answer", ["thinking", "fenced_broken"])
async def test_thinking_and_broken_json_are_read(
    sqlite_llm_engine: Engine, fake: FakeChatServer, answer: str
) -> None:
    fake.queue("chat", Reply.ok(ANSWERS[answer]))
    mem = sqlite_llm_engine.scope(user="ana")
    report = await mem.ingest(CONVERSATION)
    assert report.extractor == "llm"
    assert report.notes == []
    assert len(fake.asked("chat")) == 1
    await assert_formed_by_model(mem)


async def test_rate_limited_then_answered(sqlite_llm_engine: Engine, fake: FakeChatServer) -> None:
    fake.queue("chat", Reply.rate_limited(retry_after="1"), Reply.ok(ANSWERS["well_behaved"]))
    mem = sqlite_llm_engine.scope(user="ana")
    started = time.monotonic()
    report = await mem.ingest(CONVERSATION)
    assert time.monotonic() - started >= 0.9  # the server's Retry-After, not 0.05 s
    assert report.extractor == "llm"
    assert len(fake.asked("chat")) == 2
    await assert_formed_by_model(mem)


FAILURES: dict[str, tuple[list[Reply], type[LLMError]]] = {
    "timeout": ([Reply.slow(3.0), Reply.slow(3.0)], LLMUnavailableError),
    "rate_limited": ([Reply.rate_limited("0"), Reply.rate_limited("0")], LLMUnavailableError),
    "not_json": ([Reply.ok(ANSWERS["prose_only"])] * 3, LLMOutputError),
    "empty": ([Reply.empty()] * 3, LLMEmptyAnswerError),
}


@pytest.fixture(params=list(FAILURES))
def failing(request: pytest.FixtureRequest, fake: FakeChatServer) -> type[LLMError]:
    """The fake model scripted to fail one way; the error that failure is."""
    replies, error = FAILURES[request.param]
    fake.queue("chat", *replies)
    return error


async def test_a_failing_model_falls_back_to_the_rules(
    sqlite_llm_engine: Engine, failing: type[LLMError]
) -> None:
    mem = sqlite_llm_engine.scope(user="ana")
    report = await mem.ingest(CONVERSATION)

    assert report.extractor == "rules"
    assert report.notes[0].startswith(f"the chat model failed ({failing.__name__}: ")
    assert report.notes[0].endswith("; the rules extracted instead")
    assert "only goals and preferences the user states" in report.theory_of_mind
    # The rules formed the scenario: the current city, and the old one as history.
    city = await mem.semantic.history("user.city")
    assert [v.text for v in city] == ["The user lives in Berlin.", "The user lives in Lisbon."]
    assert report.episodes == len(CONVERSATION)


async def test_strict_raises_the_typed_error(
    sqlite_llm_engine: Engine, failing: type[LLMError]
) -> None:
    mem = sqlite_llm_engine.scope(user="ana")
    with pytest.raises(failing):
        await mem.ingest(CONVERSATION, strict=True)
    assert await mem.semantic.history("user.city") == []  # nothing formed
    assert await mem.episodic.provider.count() == len(CONVERSATION)  # the turns are kept


async def test_a_model_that_finds_nothing_is_said(
    sqlite_llm_engine: Engine, fake: FakeChatServer
) -> None:
    fake.queue("chat", Reply.ok(ANSWERS["nothing"]))
    mem = sqlite_llm_engine.scope(user="ana")
    report = await mem.ingest(CONVERSATION)
    assert report.extractor == "rules"
    assert report.notes == [
        f"the chat model extracted nothing from {len(CONVERSATION)} turns; "
        "the rules extracted instead"
    ]
    assert report.categories["profile"].added == 4


async def test_an_explicit_extractor_overrides_the_model(
    sqlite_llm_engine: Engine, fake: FakeChatServer
) -> None:
    mem = sqlite_llm_engine.scope(user="ana")
    report = await mem.ingest(CONVERSATION, extractor=engramdb.RuleExtractor())
    assert report.extractor == "rules"
    assert fake.asked("chat") == []


async def test_only_the_failing_batch_falls_back(
    sqlite_llm_engine: Engine, fake: FakeChatServer
) -> None:
    assert sqlite_llm_engine.llm is not None
    extractor = FallbackExtractor(ModelExtractor(sqlite_llm_engine.llm, batch_turns=4))
    shown = {"s1:0", "s1:1", "s1:2", "s2:0"}  # the turns of the first batch
    first_two_sessions = {
        kind: [item for item in items if set(item["turn_ids"]) <= shown]
        for kind, items in json.loads(ANSWERS["well_behaved"]).items()
    }
    fake.queue("chat", Reply.ok(json.dumps(first_two_sessions)), Reply.error(401, "bad key"))
    mem = sqlite_llm_engine.scope(user="ana")
    report = await mem.ingest(CONVERSATION, extractor=extractor)

    assert report.extractor == "llm+rules"
    assert report.notes == [
        "turns 5-7: the chat model failed (LLMError: chat endpoint "
        f"{fake.base_url}/chat/completions answered 401: bad key); the rules extracted instead"
    ]
    occupation = await mem.semantic.history("user.occupation")  # only the model states it
    assert occupation[0].text == "The user is a designer."
    city = await mem.semantic.history("user.city")  # the rules read the last session
    assert [(v.text, v.metadata["rule"]) for v in city] == [
        ("The user lives in Berlin.", "lives_in"),
        ("The user lives in Lisbon.", "llm"),
    ]


async def test_over_rest_the_fallback_is_noted_and_strict_is_a_503(
    sqlite_llm_engine: Engine, fake: FakeChatServer
) -> None:
    app = create_app(ServiceSettings(), engine=sqlite_llm_engine)
    transport = httpx.ASGITransport(app=app)
    body = {"messages": json.loads(json.dumps(CONVERSATION, default=str))}
    async with httpx.AsyncClient(base_url="http://service", transport=transport) as http:
        fake.queue("chat", *[Reply.empty()] * 3)
        answer = await http.post("/v1/memory/ingest", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["extractor"] == "rules"
        assert answer.json()["notes"][0].startswith("the chat model failed (LLMEmptyAnswerError")

        fake.queue("chat", *[Reply.empty()] * 3)
        refused = await http.post("/v1/memory/ingest", json={**body, "strict": True})
        assert refused.status_code == 503
        assert refused.json()["error"] == "llm_empty_answer"

    # The client raises the same typed error as the engine (after its own retries of a 503:
    # the model answers nothing every time).
    fake.answers["extractor"] = ""
    async with MemoryClient("http://service", transport=transport) as memory:
        with pytest.raises(LLMEmptyAnswerError):
            await memory.ingest(body["messages"], strict=True)


async def test_relations_between_others_reach_the_graph(
    sqlite_llm_engine: Engine, fake: FakeChatServer
) -> None:
    fake.queue("chat", Reply.ok(ANSWERS["relation_between_others"]))
    mem = sqlite_llm_engine.scope(user="ana")
    said = {"id": "m:0", "role": "user", "content": "My sister Maria works at Initech."}
    report = await mem.ingest([said])
    assert [(o.key, o.decision) for o in report.outcomes] == [
        ("user.family.sister.maria", "added"),
        ("about.maria.works_for", "added"),  # the user's own relation came with its fact
    ]
    (fact,) = await mem.semantic.history("about.maria.works_for")
    assert (fact.text, fact.metadata["sources"]) == ("Maria works for Initech.", ["m:0"])
    maria = await mem.graph.find_entity("Maria", "person")
    assert maria is not None
    (works,) = await mem.graph.get_relations(maria.entity_id, "outgoing", "works_for")
    employer = await mem.graph.get_entity(works.target_id)
    assert employer is not None
    assert (employer.name, employer.entity_type) == ("Initech", "organization")
    assert works.sources == ["episodic:m:0"]
