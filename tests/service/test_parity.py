"""The engine calls the REST service and the SDK reach: every memory type's ``forget``,
``summarize`` and capacity, ``assemble``, conversation memory, one memory's delete and
restore, batches of episodes, a fact's history, the memory-service spec's body fields and
unified recall's date range — through ``MemoryClient`` against the app, on both backends."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from engramdb.client import MemoryClient
from engramdb.core.errors import (
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
)
from engramdb.engine import Engine
from engramdb.orchestrator.forget_instructions import ForgetInstructionError
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.service.conftest import JWT_SECRET

TENANT = "acme"
Connect = Callable[..., MemoryClient]
Keys = dict[str, str]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
async def keys(any_engine: Engine) -> Keys:
    """API keys of a production tenant: alice's and bob's (writers), alice's reader key,
    and a tenant-wide writer key."""
    tenancy = any_engine.tenancy
    await tenancy.create_tenant(TENANT, "Acme")
    for user in ("alice", "bob"):
        await tenancy.create_user(TENANT, user)
    return {
        "alice": (await tenancy.create_key(TENANT, user_id="alice"))[1],
        "bob": (await tenancy.create_key(TENANT, user_id="bob"))[1],
        "reader": (await tenancy.create_key(TENANT, user_id="alice", role="reader"))[1],
        "service": (await tenancy.create_key(TENANT))[1],
    }


@pytest.fixture
async def connect(any_engine: Engine) -> AsyncIterator[Connect]:
    """``connect(key, **headers)``: a client of one production app in process."""
    app = create_app(ServiceSettings(auth="production", jwt_secret=JWT_SECRET), engine=any_engine)
    made: list[MemoryClient] = []

    def factory(
        api_key: str, *, agent_id: str | None = None, session_id: str | None = None
    ) -> MemoryClient:
        client = MemoryClient(
            "http://service",
            api_key=api_key,
            agent_id=agent_id,
            session_id=session_id,
            transport=httpx.ASGITransport(app=app),
        )
        made.append(client)
        return client

    yield factory
    for client in made:
        await client.aclose()


async def test_forget_summarize_capacity_of_each_type(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"], agent_id="helper", session_id="s-1")
    await alice.log_interaction("user", "I moved to Lisbon last spring, mail me at a@b.io")
    await alice.log_interaction("user", "My cat is called Miso")
    await alice.store_knowledge("Alice likes green tea", key="alice.drink")
    await alice.add_procedure("Answer in Portuguese", trigger="keywords:lisbon")
    await alice.memorize_turn("user", "hello there")
    await alice.set_plan_state("p1", "step", {"n": 1})
    expected = {"episodic": 2, "semantic": 1, "procedural": 1, "conversation": 1}
    for name, count in expected.items():
        info = await alice.get_capacity_info(name)
        assert info.item_count == count, name
        assert info.token_usage > 0
    working = await alice.get_capacity_info("working", plan_id="p1")
    assert working.item_count == 1
    # Summaries are redacted unless a writer asks for them raw.
    summary = await alice.summarize("episodic", token_limit=200)
    assert "Lisbon" in summary.text
    assert "a@b.io" not in summary.text
    assert len(summary.source_ids) == 2
    assert "a@b.io" in (await alice.summarize("episodic", raw=True)).text
    reader = connect(keys["reader"], agent_id="helper")
    assert "a@b.io" not in (await reader.summarize("episodic")).text
    with pytest.raises(PermissionDeniedError):
        await reader.summarize("episodic", raw=True)
    assert (await alice.summarize("working", plan_id="p1")).tokens > 0
    # Forget in the grammar, soft then hard; the forgotten leave capacity and search.
    forgotten = await alice.forget("episodic", 'matching "Miso"')
    assert forgotten.mode == "soft"
    assert len(forgotten.forgotten) == 1
    assert (await alice.get_capacity_info("episodic")).item_count == 1
    erased = await alice.forget("semantic", "key:alice.drink", mode="hard")
    assert erased.forgotten == ["alice.drink"]
    assert await alice.search_knowledge("green tea") == []
    assert (await alice.forget("working", "all", plan_id="p1")).forgotten
    assert await alice.get_all_plan_state("p1") == {}
    with pytest.raises(PermissionDeniedError):
        await reader.forget("episodic", "all")


async def test_bad_intent_input_is_a_typed_error(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"])
    with pytest.raises(ForgetInstructionError):
        await alice.forget("episodic", "whenever you like")
    with pytest.raises(ValidationError, match="does not support"):  # procedural: no "before"
        await alice.forget("procedural", "before 2026-01-01")
    with pytest.raises(ValidationError):
        await alice.forget("episodic", "all", mode="gentle")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):  # working memory is a plan's
        await alice.get_capacity_info("working")
    with pytest.raises(ValidationError):
        await alice.summarize("episodic", plan_id="p1")
    with pytest.raises(ValidationError):
        await alice.summarize("episodic", token_limit=0)
    with pytest.raises(ValidationError):
        await alice.assemble("x", token_limit=0)


async def test_assemble_across_types(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"], session_id="s-1")
    await alice.store_knowledge("Alice lives in Lisbon; card 4111 1111 1111 1111")
    await alice.add_procedure("Always greet Alice by name", trigger="always")
    await alice.memorize_turn("user", "Where should we meet in Lisbon?")
    context = await alice.assemble("where does alice live?", token_limit=300)
    assert 0 < context.tokens <= 300
    assert "Lisbon" in context.text
    assert "4111 1111" not in context.text
    assert {"semantic", "procedural", "conversation"} <= {i.memory_type for i in context.items}
    assert context.incomplete == []


async def test_conversation_memory(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"], session_id="s-1")
    for n, text in enumerate(["I am planning a trip", "to Kyoto in April", "mail a@b.io"]):
        await alice.memorize_turn("user" if n % 2 == 0 else "assistant", text, metadata={"n": n})
    recent = await alice.recent_turns(2)
    assert recent[0].text == "to Kyoto in April"
    assert recent[1].text.startswith("mail")
    assert "a@b.io" not in recent[1].text
    assert (await alice.recent_turns(1, raw=True))[0].text == "mail a@b.io"
    found = await alice.remember_turns("Kyoto")
    assert found[0].text == "to Kyoto in April"
    assert found[0].metadata == {"n": 1}
    # Another session has its own buffer.
    other = connect(keys["alice"], session_id="s-2")
    assert await other.recent_turns(5) == []


async def test_delete_and_restore_one_memory(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"])
    episode = await alice.log_interaction("user", "I lost my passport in Porto")
    fact = await alice.store_knowledge("Alice's passport expires in 2030", key="alice.passport")
    rule = await alice.add_procedure("Never store passport numbers", key="rule.passport")
    for name, item_id, query in (
        ("episodic", episode.id, "passport"),
        ("semantic", fact.id, "passport"),
        ("procedural", rule.id, "passport numbers"),
    ):
        changed = await alice.delete_memory(name, item_id)  # type: ignore[arg-type]
        assert (changed.id, changed.status) == (item_id, "forgotten")
        assert (await alice.get_capacity_info(name)).item_count == 0
        with pytest.raises(NotFoundError):  # already hidden
            await alice.delete_memory(name, item_id)  # type: ignore[arg-type]
        restored = await alice.restore_memory(name, item_id)  # type: ignore[arg-type]
        assert restored.status == "restored"
        assert (await alice.get_capacity_info(name)).item_count == 1
        assert await _found(alice, name, query, item_id)
        with pytest.raises(NotFoundError):  # not forgotten
            await alice.restore_memory(name, item_id)  # type: ignore[arg-type]
        erased = await alice.delete_memory(name, item_id, mode="hard")  # type: ignore[arg-type]
        assert erased.status == "deleted"
        with pytest.raises(NotFoundError):  # a hard delete cannot be undone
            await alice.restore_memory(name, item_id)  # type: ignore[arg-type]
        assert not await _found(alice, name, query, item_id)
    with pytest.raises(NotFoundError):
        await alice.delete_memory("episodic", "no-such-id", mode="hard")
    # Bob cannot reach alice's memories, nor a reader delete.
    bob_episode = await connect(keys["bob"]).log_interaction("user", "bob's own")
    with pytest.raises(NotFoundError):
        await alice.delete_memory("episodic", bob_episode.id)
    with pytest.raises(PermissionDeniedError):
        await connect(keys["reader"]).delete_memory("episodic", bob_episode.id)


async def _found(client: MemoryClient, name: str, query: str, item_id: str) -> bool:
    if name == "episodic":
        hits = await client.search_interactions(query)
    elif name == "semantic":
        hits = await client.search_knowledge(query)
    else:
        hits = await client.get_relevant_skills(query)
    return any(h.id == item_id for h in hits)


async def test_batch_of_episodes_is_one_transaction(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"])
    start = datetime(2026, 3, 1, tzinfo=UTC)
    written = await alice.log_interactions(
        [
            {"role": "user", "content": f"turn {n}", "occurred_at": start + timedelta(hours=n)}
            for n in range(5)
        ]
    )
    assert len({w.id for w in written}) == 5
    assert [i.text for i in await alice.get_recent_history(5)] == [
        f"turn {n}" for n in range(4, -1, -1)
    ]
    with pytest.raises(ValidationError):  # one bad item: nothing stored
        await alice.log_interactions(
            [{"role": "user", "content": "fine"}, {"role": "robot", "content": "bad"}]
        )
    with pytest.raises(ValidationError):
        await alice.log_interactions([{"role": "user", "content": "x", "user_id": "alice"}])
    assert (await alice.get_capacity_info("episodic")).item_count == 5
    with pytest.raises(PermissionDeniedError):
        await alice.log_interactions([{"role": "user", "content": "x"}], user_id="bob")
    service = connect(keys["service"])
    await service.log_interactions([{"role": "user", "content": "for bob"}], user_id="bob")
    assert [i.text for i in await connect(keys["bob"]).get_recent_history(5)] == ["for bob"]


async def test_semantic_history(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"])
    await alice.store_knowledge("Alice lives in Porto, mail a@b.io", key="alice.city")
    await alice.store_knowledge("Alice lives in Lisbon", key="alice.city")
    versions = await alice.knowledge_history("alice.city")
    assert [(v.version, v.superseded) for v in versions] == [(2, False), (1, True)]
    assert "a@b.io" not in versions[1].text
    assert "a@b.io" in (await alice.knowledge_history("alice.city", raw=True))[1].text
    with pytest.raises(NotFoundError):
        await alice.knowledge_history("alice.nothing")
    with pytest.raises(PermissionDeniedError):
        await alice.knowledge_history("alice.city", user_id="bob")


def test_operation_ids_are_stable_and_readable(tmp_path: Path) -> None:
    spec = create_app(ServiceSettings(), db=tmp_path / "schema.db").openapi()
    ids = {
        operation["operationId"]: f"{method.upper()} {path}"
        for path, operations in spec["paths"].items()
        for method, operation in operations.items()
    }
    assert len(ids) == sum(len(ops) for ops in spec["paths"].values())  # unique
    assert all(re.fullmatch(r"[a-z]+(_[a-z]+)*", i) for i in ids), sorted(ids)
    pinned = {
        "semantic_memorize": "POST /v1/memory/semantic",
        "semantic_search": "GET /v1/memory/semantic/search",
        "semantic_history": "GET /v1/memory/semantic/{key}/history",
        "episodic_search": "GET /v1/memory/episodic/search",
        "episodic_recent": "GET /v1/memory/episodic/recent",
        "episodic_memorize_many": "POST /v1/memory/episodic/batch",
        "episodic_delete": "DELETE /v1/memory/episodic/{item_id}",
        "episodic_restore": "POST /v1/memory/episodic/{item_id}/restore",
        "procedural_context": "GET /v1/memory/procedural/context",
        "working_set": "PUT /v1/memory/working/{plan_id}/{key}",
        "working_capacity": "GET /v1/memory/working/capacity",
        "conversation_recent": "GET /v1/memory/conversation/recent",
        "assemble": "POST /v1/memory/assemble",
        "entries_recall": "POST /v1/memory/recall",
        "graph_traverse": "POST /v1/memory/graph/traverse",
        "task_context_get_task": "GET /v1/memory/task-context/{task_id}",
    }
    for memory_type in ("working", "episodic", "semantic", "procedural", "conversation"):
        pinned[f"{memory_type}_forget"] = f"POST /v1/memory/{memory_type}/forget"
        pinned[f"{memory_type}_summarize"] = f"POST /v1/memory/{memory_type}/summarize"
    assert {i: ids.get(i) for i in pinned} == pinned


async def test_the_specs_body_fields(connect: Connect, keys: Keys) -> None:
    alice, service = connect(keys["alice"]), connect(keys["service"])
    await service.log_interaction("user", "bob met Carol", user_id="bob", agent_id="scribe")
    bob_scribe = connect(keys["bob"], agent_id="scribe")
    assert [i.text for i in await bob_scribe.get_recent_history()] == ["bob met Carol"]
    assert await connect(keys["bob"]).get_recent_history() == []  # another agent's log
    with pytest.raises(PermissionDeniedError):
        await alice.log_interaction("user", "as bob", user_id="bob")
    with pytest.raises(PermissionDeniedError):  # the body contradicts X-Agent-ID
        await connect(keys["alice"], agent_id="a1").log_interaction("user", "x", agent_id="a2")
    with pytest.raises(PermissionDeniedError):
        await alice.add_procedure("Be brief", user_id="bob")
    with pytest.raises(PermissionDeniedError):
        await alice.store_knowledge("not mine", user_id="bob", agent_id="scribe")
    # trigger_condition is the spec's name of the trigger.
    answer = await alice.request(
        "POST",
        "/v1/memory/procedural",
        json={"content": "Check Stripe first", "trigger_condition": "keywords:billing"},
    )
    rule_id = answer.json()["id"]
    skills = await alice.get_relevant_skills("my billing failed")
    assert skills[0].id == rule_id
    assert skills[0].metadata["trigger"] == "keywords:billing"
    with pytest.raises(ValidationError):
        await alice.request(
            "POST",
            "/v1/memory/procedural",
            json={"content": "x", "trigger": "always", "trigger_condition": "keywords:a"},
        )


async def test_knowledge_without_a_user_is_the_tenants(connect: Connect, keys: Keys) -> None:
    word = unique("kestrel")
    stored = await connect(keys["service"]).store_knowledge(f"The company bird is a {word}.")
    for user in ("alice", "bob"):
        hits = await connect(keys[user]).search_knowledge(word)
        assert [h.id for h in hits] == [stored.id], user
    # A user's own knowledge stays theirs.
    private = unique("wren")
    await connect(keys["alice"]).store_knowledge(f"My bird is a {private}.")
    assert not any(private in h.text for h in await connect(keys["bob"]).search_knowledge(private))


async def test_unified_recall_takes_a_date_range(connect: Connect, keys: Keys) -> None:
    alice = connect(keys["alice"])
    may, june = datetime(2026, 5, 10, tzinfo=UTC), datetime(2026, 6, 10, tzinfo=UTC)
    await alice.log_interaction("user", "We hiked the Alps in May", occurred_at=may)
    await alice.log_interaction("user", "We hiked the Andes in June", occurred_at=june)
    june_only = await alice.recall("hiking trip", since=datetime(2026, 6, 1, tzinfo=UTC))
    texts = [r.entry.value["text"] for r in june_only if isinstance(r.entry.value, dict)]
    assert texts == ["We hiked the Andes in June"]
    may_only = await alice.recall("hiking trip", until=datetime(2026, 6, 1, tzinfo=UTC))
    texts = [r.entry.value["text"] for r in may_only if isinstance(r.entry.value, dict)]
    assert texts == ["We hiked the Alps in May"]
    both = await alice.recall("hiking trip")
    assert len([r for r in both if r.provider_id == "episodic"]) == 2
    with pytest.raises(ValidationError):
        await alice.request(
            "POST",
            "/v1/memory/recall",
            json={"query": "x", "since": june.isoformat(), "until": may.isoformat()},
        )
    with pytest.raises(ValidationError):  # a time without a zone
        await alice.request(
            "POST", "/v1/memory/recall", json={"query": "x", "since": "2026-05-01T00:00:00"}
        )
