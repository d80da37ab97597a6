"""The MCP server through the SDK's client, in memory, on both storage backends: every tool,
the resources and the prompt, isolation between tenants, and bad input as error results."""

from __future__ import annotations

import pytest
from mcp import Client

from engramdb.core.scope import Scope
from engramdb.core.types import MemoryTier
from engramdb.engine import Engine
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server
from tests.mcp.conftest import (
    BASE_TOOLS,
    TOOLS,
    Connect,
    call,
    exercise_every_tool,
    read_json,
    refused,
)


async def test_lists_every_tool_with_what_a_model_needs_to_choose(connect: Connect) -> None:
    async with connect("acme", "alice") as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert len(tool.description or "") > 40, tool.name
        for name, field in tool.input_schema["properties"].items():
            assert field.get("description"), (tool.name, name)
    kind = tools["memorize"].input_schema["properties"]["type"]
    for name in ("episodic", "semantic", "procedural", "conversation", "working"):
        assert f"'{name}'" in kind["description"]
    assert "memory_types" in kind["description"]
    assert tools["memory_types"].annotations is not None
    assert tools["memory_types"].annotations.read_only_hint is True
    assert tools["remember"].annotations is not None
    assert tools["remember"].annotations.read_only_hint is True
    assert tools["forget"].annotations is not None
    assert tools["forget"].annotations.destructive_hint is True


async def test_the_intent_tools_of_every_memory_type(connect: Connect) -> None:
    async with connect("acme", "alice") as client:
        fact = await call(
            client,
            "memorize",
            type="semantic",
            text="Alice lives in Lisbon; write to alice@example.com",
            key="user.city",
            metadata={"source": "chat-7"},
        )
        assert fact == {"id": "user.city", "status": "created", "evicted": []}
        again = await call(
            client, "memorize", type="semantic", text="Alice lives in Porto", key="user.city"
        )
        assert again["status"] == "updated"
        await call(
            client,
            "memorize",
            type="episodic",
            text="Alice ran a half marathon in Porto",
            role="user",
            occurred_at="2026-03-01T09:00:00+00:00",
        )
        await call(
            client,
            "memorize",
            type="procedural",
            text="Answer in metric units",
            key="units",
            trigger="keywords:distance,weight",
        )
        await call(client, "memorize", type="conversation", text="How far is it?", role="user")
        await call(client, "memorize", type="working", text="Planning the trip to Porto")

        facts = (await call(client, "remember", type="semantic", query="where does Alice live"))[
            "items"
        ]
        assert [f["text"] for f in facts] == ["Alice lives in Porto"]
        assert facts[0]["version"] == 2
        assert facts[0]["score"] > 0
        rules = await call(client, "remember", type="procedural", query="what distance is it")
        assert [r["id"] for r in rules["items"]] == ["units"]
        episodes = await call(client, "remember", type="episodic", query="marathon")
        assert "half marathon" in episodes["items"][0]["text"]
        assert episodes["items"][0]["role"] == "user"

        summary = await call(client, "summarize", type="episodic", scope="recent")
        assert "half marathon" in summary["text"]
        assert summary["tokens"] <= 500
        capacity = await call(client, "capacity", type="procedural")
        assert capacity["item_count"] == 1

        context = await call(client, "assemble", query="how far did Alice run in Porto?")
        assert "Porto" in context["text"]
        assert {i["type"] for i in context["items"]} >= {"semantic", "episodic"}

        forgotten = await call(client, "forget", type="procedural", instruction="key:units")
        assert forgotten["forgotten"] == ["units"]
        assert forgotten["mode"] == "soft"
        after = await call(client, "remember", type="procedural", query="what distance is it")
        assert after["items"] == []


async def test_every_read_is_redacted(connect: Connect, any_engine: Engine) -> None:
    secret = "alice@example.com"
    card = "4111 1111 1111 1111"
    mem = any_engine.scope(tenant="acme", user="alice")
    await mem.manager.store(
        "user.email", secret, content_type="profile", tier=MemoryTier.PERSISTENT
    )
    async with connect("acme", "alice") as client:
        await call(client, "memorize", type="semantic", text=f"Alice's mail is {secret}")
        await call(client, "memorize", type="episodic", text=f"Alice paid with card {card}")
        await call(client, "graph_add_entity", name="Alice", properties={"email": secret})
        reads = [
            await call(client, "remember", type="semantic", query="mail of Alice"),
            await call(client, "remember", type="episodic", query="card payment"),
            await call(client, "summarize", type="semantic"),
            await call(client, "summarize", type="episodic"),
            await call(client, "assemble", query="Alice's mail and card"),
            await call(client, "graph_search", query="Alice"),
            await read_json(client, "engram://profile"),
            await read_json(client, "engram://episodes/recent"),
        ]
        prompt = await client.get_prompt("recall_then_answer", {"question": "Alice's mail?"})
    shown = str(reads) + str(prompt.messages)
    assert secret not in shown
    assert card not in shown
    assert "[EMAIL]" in str(reads[0])
    assert "[EMAIL]" in str(reads[6]["profile"])


async def test_working_state_of_the_scope_and_of_a_shared_plan(connect: Connect) -> None:
    async with connect("acme", "alice") as alice, connect("acme", "bob") as bob:
        await call(alice, "set_state", key="step", value={"n": 2, "done": ["book"]})
        assert await call(alice, "get_state", key="step") == {
            "key": "step",
            "value": {"n": 2, "done": ["book"]},
            "plan": None,
        }
        assert (await call(alice, "get_state"))["state"] == {"step": {"n": 2, "done": ["book"]}}
        assert "not_found" in await refused(bob, "get_state", key="step")
        await call(alice, "set_state", key="owner", value="alice", plan="trip")
        shared = await call(bob, "get_state", plan="trip")
        assert shared["state"] == {"owner": "alice"}


async def test_graph_add_search_and_traverse(connect: Connect) -> None:
    async with connect("acme", "alice") as client:
        alice = await call(client, "graph_add_entity", name="Alice", entity_type="person")
        acme = await call(
            client,
            "graph_add_entity",
            name="Acme Corp",
            entity_type="organization",
            aliases=["Acme"],
        )
        lisbon = await call(client, "graph_add_entity", name="Lisbon", entity_type="location")
        same = await call(client, "graph_add_entity", name="alice", entity_type="person")
        assert same["entity_id"] == alice["entity_id"]
        works = await call(
            client,
            "graph_add_relation",
            source_id=alice["entity_id"],
            target_id=acme["entity_id"],
            relation_type="works_at",
        )
        assert works["relation_type"] == "works_at"
        await call(
            client,
            "graph_add_relation",
            source_id=acme["entity_id"],
            target_id=lisbon["entity_id"],
            relation_type="located_in",
        )
        hits = (await call(client, "graph_search", query="Acme"))["items"]
        assert hits[0]["entity_id"] == acme["entity_id"]
        near = await call(client, "graph_traverse", start_entity_id=acme["entity_id"])
        assert {e["name"] for e in near["entities"]} == {"Alice", "Lisbon"}
        path = await call(
            client,
            "graph_traverse",
            start_entity_id=alice["entity_id"],
            pattern="shortest_path",
            target_entity_id=lisbon["entity_id"],
            direction="outgoing",
        )
        assert path["paths"] == [
            {
                "entities": [alice["entity_id"], acme["entity_id"], lisbon["entity_id"]],
                "relations": ["works_at", "located_in"],
            }
        ]


async def test_profile_and_recent_episodes_resources_and_the_recall_prompt(
    connect: Connect, any_engine: Engine
) -> None:
    mem = any_engine.scope(tenant="acme", user="alice")
    await mem.manager.store(
        "user.diet", "vegetarian", content_type="profile", tier=MemoryTier.PERSISTENT
    )
    async with connect("acme", "alice") as client:
        listed = {str(r.uri) for r in (await client.list_resources()).resources}
        assert listed == {"engram://profile", "engram://episodes/recent"}
        await call(client, "memorize", type="semantic", text="Alice is allergic to peanuts")
        for day in (1, 2, 3):
            await call(
                client,
                "memorize",
                type="episodic",
                text=f"Dinner number {day}",
                occurred_at=f"2026-04-0{day}T19:00:00+00:00",
            )
        profile = await read_json(client, "engram://profile")
        assert profile["profile"] == {"user.diet": "vegetarian"}
        assert [f["text"] for f in profile["facts"]] == ["Alice is allergic to peanuts"]
        recent = await read_json(client, "engram://episodes/recent")
        assert [e["text"] for e in recent["items"]] == [
            "Dinner number 3",
            "Dinner number 2",
            "Dinner number 1",
        ]
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["recall_then_answer"]
        prompt = await client.get_prompt(
            "recall_then_answer", {"question": "What should I cook for Alice?"}
        )
        text = prompt.messages[0].content
        assert "allergic to peanuts" in getattr(text, "text", "")
        assert "What should I cook for Alice?" in getattr(text, "text", "")


async def test_two_tenants_see_nothing_of_each_other(connect: Connect) -> None:
    async with connect("acme", "alice") as acme, connect("globex", "alice") as globex:
        await call(acme, "memorize", type="semantic", text="The launch code name is Falcon")
        await call(acme, "memorize", type="episodic", text="Met Falcon's team on Monday")
        await call(acme, "set_state", key="stage", value="launch")
        await call(acme, "graph_add_entity", name="Falcon", entity_type="project")
        for kind in ("semantic", "episodic"):
            assert (await call(globex, "remember", type=kind, query="Falcon"))["items"] == []
            summary = await call(globex, "summarize", type=kind)
            assert "Falcon" not in summary["text"]
        assert "Falcon" not in (await call(globex, "assemble", query="Falcon launch"))["text"]
        assert (await call(globex, "get_state"))["state"] == {}
        assert (await call(globex, "graph_search", query="Falcon"))["items"] == []
        assert (await read_json(globex, "engram://profile"))["facts"] == []
        assert (await read_json(globex, "engram://episodes/recent"))["items"] == []
        forgotten = await call(globex, "forget", type="semantic", instruction="all", mode="hard")
        assert forgotten["forgotten"] == []
        still = await call(acme, "remember", type="semantic", query="launch code name")
        assert [i["text"] for i in still["items"]] == ["The launch code name is Falcon"]


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("memorize", {"type": "dreams", "text": "x"}, "type"),
        ("memorize", {"type": "semantic", "text": ""}, "text"),
        (
            "memorize",
            {"type": "episodic", "text": "x", "occurred_at": "2026-01-01T10:00"},
            "timezone",
        ),
        ("memorize", {"type": "procedural", "text": "x", "trigger": "regex:("}, "invalid_pattern"),
        ("memorize", {"type": "semantic", "text": "x", "importance": 3}, "importance"),
        ("remember", {"type": "semantic", "query": "x", "limit": 0}, "limit"),
        ("forget", {"type": "semantic", "instruction": "everything nice"}, "invalid_forget"),
        ("forget", {"type": "procedural", "instruction": "before 2026-01-01"}, "unsupported"),
        ("summarize", {"type": "episodic", "scope": "whenever"}, "validation_error"),
        ("get_state", {"key": "missing"}, "not_found"),
        ("graph_add_relation", {"source_id": "nobody", "target_id": "nothing"}, "not_found"),
        ("graph_traverse", {"start_entity_id": "nobody"}, "entity_not_found"),
        ("graph_add_entity", {"name": "X", "entity_type": "Not A Type"}, "entity_type"),
    ],
)
async def test_bad_input_is_an_error_result_that_says_why_and_changes_nothing(
    connect: Connect, any_engine: Engine, tool: str, arguments: dict[str, object], expected: str
) -> None:
    before = await any_engine.events.count()
    async with connect("acme", "alice") as client:
        message = await refused(client, tool, **arguments)
    assert expected in message
    assert await any_engine.events.count() == before


async def test_memory_types_with_hostile_arguments_answers_the_same_and_changes_nothing(
    connect: Connect, any_engine: Engine
) -> None:
    before = await any_engine.events.count()
    async with connect("acme", "alice") as client:
        listed = await call(client, "memory_types")
        # The tool takes no argument; whatever a model adds is not read (by the MCP SDK's
        # argument model), so another tenant's name, a NUL, a lone surrogate or 10 MB reach
        # nothing and the answer is the caller's own list.
        for extra in (
            {"tenant": "globex"},
            {"type": "a\x00b"},
            {"name": "\ud800"},
            {"filter": "x" * 10_000_000},
            {"depth": "[" * 10_000 + "]" * 10_000},
        ):
            assert await call(client, "memory_types", **extra) == listed
    assert await any_engine.events.count() == before


async def test_credentials_that_may_only_read_cannot_write(connect: Connect) -> None:
    async with connect("acme", "alice", may_write=False) as client:
        assert "permission_denied" in await refused(client, "memorize", type="semantic", text="x")
        assert "permission_denied" in await refused(client, "set_state", key="k", value=1)
        assert (await call(client, "remember", type="semantic", query="x"))["items"] == []


async def test_assemble_says_which_memory_types_ran_out_of_time(
    connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("engramdb.mcp.memory_tools.TOOL_TIME_LIMIT_MS", 1e-6)
    async with connect("acme", "alice") as client:
        await call(client, "memorize", type="semantic", text="Alice likes tea")
        answer = await call(client, "assemble", query="what does Alice like?")
    assert answer["incomplete"]
    assert set(answer["incomplete"]) <= {
        "working",
        "procedural",
        "conversation",
        "semantic",
        "episodic",
    }


async def test_every_tool_over_the_in_memory_transport_with_the_handshake(
    any_engine: Engine,
) -> None:
    # The SDK's legacy mode: the initialize handshake and JSON-RPC over in-memory streams,
    # as clients of protocol revisions before 2026 speak it.
    binding = Binding(any_engine, Scope(tenant="acme", user="alice"))
    async with Client(build_server(fixed(binding)), mode="legacy") as client:
        assert client.server_info is not None
        assert client.server_info.name == "engram"
        assert await exercise_every_tool(client) == BASE_TOOLS
