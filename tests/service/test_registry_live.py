"""The memory-type registry over REST, the SDK (both flavors) and MCP, against a real
``engram serve`` on SQLite and on PostgreSQL: the types it lists (built-ins, the categories
of its memory files, ``notes`` of an installed package), their memories stored, recalled,
summarized and forgotten by name, and bad names and bodies refused with nothing changed."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from engramdb.core.errors import (
    InvalidValueError,
    NotFoundError,
    PermissionDeniedError,
    ValidationError,
    ValueTooLargeError,
)
from engramdb.orchestrator.forget_instructions import UnsupportedForgetError
from engramdb.service.auth import issue_token
from tests.mcp.conftest import call, refused
from tests.service.live_sdk import JWT_SECRET, TENANT, Clients, Served, covers, unique

BUILT_INS = ["working", "episodic", "semantic", "procedural", "conversation"]
FILE_CATEGORIES = ["activity", "profile", "event"]
#: Names no type can have, each refused before any lookup; those with a slash as well (sent
#: as ``%2F``), not missing every route.
HOSTILE_NAMES = ["a\x00b", "\ud800", "..", ".", "Notes", "x" * 65, "-x", "notes\n"]
PATH_NAMES = ["a/b", "../semantic", "notes/../x", "notes/memorize", "/notes", "notes/"]


@covers("types_list")
async def test_the_registered_types_are_listed(sdk: Clients) -> None:
    types = {t.name: t for t in await sdk().list_memory_types()}
    assert list(types) == [*BUILT_INS, *FILE_CATEGORIES, "notes"]
    assert all(t.offered for t in types.values())  # the server keeps memory files
    assert (types["semantic"].heading, types["semantic"].share) == ("Known facts", 0.2)
    assert types["profile"].heading == "Profile (memory files)"
    assert (types["notes"].namespace, types["notes"].description) == ("notes", "the user's notes")
    assert sdk(role="reader") is not None
    assert [t.name for t in await sdk(role="reader").list_memory_types()] == list(types)


@covers("types_memorize", "types_remember", "types_forget", "types_summarize", "types_capacity")
async def test_an_installed_type_over_rest(sdk: Clients) -> None:
    me = sdk()
    first = await me.memorize("notes", "The flowerpot key is under the mat", metadata={"n": 1})
    second = await me.memorize("notes", "Buy oat milk, mail a@b.io", tags=["shopping"])
    assert first.status == second.status == "created"
    found = await me.remember("notes", "where is the key?")
    assert (found[0].id, found[0].metadata) == (first.id, {"n": 1})
    assert "a@b.io" not in (await me.remember("notes", "oat milk"))[0].text  # redacted
    assert "a@b.io" in (await me.remember("notes", "oat milk", raw=True))[0].text
    info = await me.get_capacity_info("notes")
    assert (info.item_count, info.token_usage > 0) == (2, True)
    summary = await me.summarize("notes", token_limit=100)
    assert "flowerpot" in summary.text
    assert set(summary.source_ids) == {first.id, second.id}
    # The notes take part in unified recall and in assemble, as in process.
    hits = await me.recall("flowerpot key")
    assert ("notes", first.id) in [(h.provider_id, h.entry.key) for h in hits]
    context = await me.assemble("where is the flowerpot key?", token_limit=300)
    assert "flowerpot" in context.text
    assert "notes" in {i.memory_type for i in context.items}
    # Forget, in the forms the type supports.
    with pytest.raises(UnsupportedForgetError):
        await me.forget("notes", "oldest 1")
    gone = await me.forget("notes", 'matching "oat milk"')
    assert gone.forgotten == [second.id]
    assert [i.id for i in await me.remember("notes", "oat milk")] == [first.id]
    # Another user of the tenant sees none of it; a reader may read but not write.
    assert await sdk(user=unique("stranger")).remember("notes", "flowerpot") == []
    reader = sdk(role="reader")
    assert [i.id for i in await reader.remember("notes", "flowerpot")] == [first.id]
    with pytest.raises(PermissionDeniedError):
        await reader.memorize("notes", "not allowed")
    with pytest.raises(PermissionDeniedError):
        await reader.forget("notes", "all")
    assert (await me.forget("notes", "all", mode="hard")).forgotten == [first.id]
    assert (await me.get_capacity_info("notes")).item_count == 0


async def test_file_categories_and_built_ins_by_name(sdk: Clients) -> None:
    me = sdk()
    stored = await me.memorize("profile", "Lives in Lisbon", key="city")
    assert stored.status == "created"
    assert [i.text for i in await me.remember("profile", "where does the user live?")] == [
        "Lives in Lisbon"
    ]
    assert (await me.get_capacity_info("profile")).item_count == 1
    # A built-in reached by name is the same memory as through its own endpoints.
    fact = await me.memorize("semantic", "Alice likes green tea", key="alice.drink")
    assert fact.id == "alice.drink"
    assert [i.id for i in await me.search_knowledge("green tea")] == ["alice.drink"]
    plan = unique("plan")
    note = await me.memorize("working", "draft the itinerary", plan_id=plan)
    found = await me.remember("working", "itinerary", plan_id=plan)
    assert [i.id for i in found] == [note.id]
    assert (await me.get_capacity_info("working", plan_id=plan)).item_count == 1
    with pytest.raises(ValidationError):  # working memory is a plan's
        await me.memorize("working", "no plan")
    with pytest.raises(ValidationError):  # and only working memory is
        await me.remember("semantic", "tea", plan_id=plan)
    assert (await me.forget("profile", "key:city", mode="hard")).forgotten == ["city"]
    assert await me.remember("profile", "Lisbon") == []


async def test_bad_names_and_bodies_change_nothing(sdk: Clients, served: Served) -> None:
    me = sdk()
    await me.memorize("notes", "The only note")
    before = (await me.events()).events
    with pytest.raises(NotFoundError) as unknown:
        await me.memorize("nonesuch", "x")
    assert "notes" in unknown.value.details["choices"]
    for call_ in (
        me.remember("nonesuch", "x"),
        me.forget("nonesuch", "all"),
        me.summarize("nonesuch"),
        me.get_capacity_info("nonesuch"),
    ):
        with pytest.raises(NotFoundError):
            await call_
    for name in [*HOSTILE_NAMES, *PATH_NAMES]:
        for operation, arguments in (
            (me.memorize, (name, "x")),
            (me.remember, (name, "x")),
            (me.forget, (name, "all")),
            (me.summarize, (name,)),
            (me.get_capacity_info, (name,)),
        ):
            with pytest.raises(ValidationError):
                await operation(*arguments)
    for bad_text in ("a\x00b", "\ud800"):
        with pytest.raises((InvalidValueError, ValidationError)):
            await me.memorize("notes", bad_text)
        with pytest.raises((InvalidValueError, ValidationError)):
            await me.memorize("notes", "ok", metadata={bad_text: 1})
    token = issue_token(JWT_SECRET, TENANT, user=sdk.user)
    deep = '{"content":"x","metadata":' + '{"a":' * 10_000 + "1" + "}" * 10_000 + "}"
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers) as http:
        answer = await http.post("/v1/memory/types/notes/memorize", content=deep)
        # A name with a slash gets the answer of any other name no type can have.
        invalid, slashed = [
            (await http.get(f"/v1/memory/types/{name}/remember", params={"q": "x"})).json()
            for name in ("A-b", "a%2Fb")
        ]
    assert answer.status_code == 400
    assert invalid == slashed
    assert (slashed["error"], slashed["details"]["errors"][0]["loc"]) == (
        "validation_error",
        ["path", "name"],
    )
    too_deep: Any = 1
    for _ in range(10_000):
        too_deep = {"a": too_deep}
    with pytest.raises(InvalidValueError):  # the SDK cannot even encode it
        await me.memorize("notes", "ok", metadata=too_deep)
    nested: Any = 1
    for _ in range(150):  # deeper than a value may be, shallow enough to parse
        nested = {"a": nested}
    with pytest.raises(ValidationError):
        await me.memorize("notes", "ok", metadata=nested)
    assert (await me.events()).events == before
    assert (await me.get_capacity_info("notes")).item_count == 1


# -- MCP -------------------------------------------------------------------------------------


@asynccontextmanager
async def mcp_client(served: Served, user: str) -> AsyncIterator[Client]:
    """A client of the MCP SDK connected to ``/mcp`` as ``user``."""
    headers = {"Authorization": f"Bearer {issue_token(JWT_SECRET, TENANT, user=user)}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=60) as http,
        Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client,
    ):
        yield client


async def test_the_registry_over_mcp(served: Served) -> None:
    user = unique("mcp")
    async with mcp_client(served, user) as client:
        listed = await call(client, "memory_types")
        assert [t["name"] for t in listed["types"]] == [*BUILT_INS, *FILE_CATEGORIES, "notes"]
        assert all(t["offered"] for t in listed["types"])
        stored = await call(client, "memorize", type="notes", text="The flowerpot key is green")
        found = await call(client, "remember", type="notes", query="flowerpot key")
        assert [i["id"] for i in found["items"]] == [stored["id"]]
        assert (await call(client, "capacity", type="notes"))["item_count"] == 1
        assert "flowerpot" in (await call(client, "summarize", type="notes"))["text"]
        await call(client, "memorize", type="profile", text="Lives in Porto", key="city")
        assert (await call(client, "capacity", type="profile"))["item_count"] == 1
        assert "not_found" in await refused(client, "memorize", type="nonesuch", text="x")
        for name in [*HOSTILE_NAMES, *PATH_NAMES]:
            if name != "\ud800":  # the SDK cannot send it (below, as JSON escapes)
                assert "type" in await refused(client, "memorize", type=name, text="x")
        assert "unsupported_forget_instruction" in await refused(
            client, "forget", type="notes", instruction="oldest 1"
        )
        forgotten = await call(client, "forget", type="notes", instruction="all", mode="hard")
        assert forgotten["forgotten"] == [stored["id"]]
        assert (await call(client, "capacity", type="notes"))["item_count"] == 0
    token = issue_token(JWT_SECRET, TENANT, user=user)
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }
    arguments = {"type": "\ud800", "text": "x"}
    message = {"name": "memorize", "arguments": arguments}
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": message}
    async with httpx.AsyncClient(base_url=served.url, headers=headers) as http:
        answer = await http.post("/mcp", content=json.dumps(rpc))
        capacities = {
            name: (await http.get(f"/v1/memory/types/{name}/capacity")).json()["item_count"]
            for name in ("profile", "notes")
        }
    # The transport's JSON parser refuses the lone surrogate before any tool runs.
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, -32700)
    # The REST view of the same user agrees: one profile item, no notes.
    assert capacities == {"profile": 1, "notes": 0}


async def test_huge_input_and_another_tenants_ids_change_nothing(
    sdk: Clients, served: Served
) -> None:
    me = sdk()
    note = await me.memorize("notes", "The flowerpot key is under the mat")
    plan = unique("plan")
    await me.memorize("working", "draft the itinerary", plan_id=plan)
    before = (await me.events()).events
    huge = "x" * 10_000_000
    intruder = issue_token(JWT_SECRET, unique("other-tenant"), user="mallory")
    headers = {"Authorization": f"Bearer {intruder}"}
    async with httpx.AsyncClient(base_url=served.url, headers=headers, timeout=120) as http:
        # Another tenant naming this one's ids and plan finds nothing and changes nothing.
        forgotten = await http.post(
            "/v1/memory/types/notes/forget", json={"instruction": f"id:{note.id}", "mode": "hard"}
        )
        found = await http.get(
            "/v1/memory/types/working/remember", params={"q": "itinerary", "plan_id": plan}
        )
        capacity = await http.get("/v1/memory/types/working/capacity", params={"plan_id": plan})
        # Ten megabytes as a body, a query and a type name: refused before any work.
        body = await http.post(
            "/v1/memory/types/notes/memorize", json={"content": huge, "metadata": {"a": huge}}
        )
        long = "x" * 60_000  # past what a URL may hold, within what a client sends
        query = await http.get("/v1/memory/types/notes/remember", params={"q": long})
        name = await http.get(f"/v1/memory/types/{long}/capacity")

    assert (forgotten.status_code, forgotten.json()["forgotten"]) == (200, [])
    assert (found.status_code, found.json()["items"]) == (200, [])
    assert (capacity.status_code, capacity.json()["item_count"]) == (200, 0)
    answers = {
        "body": (body.status_code, body.json()["error"]),
        "query": query.status_code,
        "name": name.status_code,
    }
    assert answers == {"body": (413, "value_too_large"), "query": 422, "name": 422}
    # The SDK says as much of a value no URL can hold, before sending anything.
    with pytest.raises(ValueTooLargeError):
        await me.remember("notes", huge)
    with pytest.raises(ValueTooLargeError):
        await me.get_capacity_info(huge)
    with pytest.raises(ValueTooLargeError):
        await me.memorize("notes", huge)
    assert (await me.events()).events == before
    assert [i.id for i in await me.remember("notes", "flowerpot")] == [note.id]
