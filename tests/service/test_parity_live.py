"""Every row of the table "The engine over REST and the SDK" of docs/service.md, live: each
operation through ``MemoryClient`` and ``SyncMemoryClient`` against a real ``engram serve``
process on SQLite and on PostgreSQL (one server per backend for the module, one fresh user
per test). Each test names the operations it ``covers`` and is checked to have reached them;
``test_every_row_of_the_table_has_a_live_test`` reads the table itself, so a row added without
a live test fails."""

from __future__ import annotations

import importlib
import re
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import get_args

import httpx
import pytest

from engramdb.core.errors import (
    ConflictError,
    EntityNotFoundError,
    InvalidValueError,
    NotFoundError,
    PermissionDeniedError,
    RelationNotFoundError,
    ValidationError,
    VersionConflictError,
)
from engramdb.orchestrator.forget_instructions import ForgetInstructionError
from engramdb.service.app import create_app
from engramdb.service.auth import issue_token
from engramdb.service.intent_models import MemoryTypeName
from engramdb.service.settings import ServiceSettings
from tests.service.live_sdk import JWT_SECRET, TENANT, Clients, Served, covers, unique

DOCS = Path(__file__).parents[2] / "docs" / "service.md"
TABLE_HEADING = "## The engine over REST and the SDK"
#: The modules whose tests are the live tests of the table's rows.
LIVE_MODULES = ("tests.service.test_parity_live", "tests.service.test_registry_live")


# -- semantic, episodic, procedural, conversation -------------------------------------------


@covers(
    "semantic_memorize",
    "semantic_upsert",
    "semantic_search",
    "semantic_history",
    "semantic_delete",
    "semantic_restore",
)
async def test_semantic(sdk: Clients) -> None:
    me = sdk()
    first = await me.store_knowledge("Alice works at Acme", key="alice.employer")
    assert (first.id, first.status) == ("alice.employer", "created")
    second = await me.store_knowledge("Alice works at Initech", key="alice.employer")
    assert (second.id, second.status) == ("alice.employer", "updated")
    history = await me.knowledge_history("alice.employer")
    assert [(v.text, v.superseded) for v in history] == [
        ("Alice works at Initech", False),
        ("Alice works at Acme", True),
    ]
    same = await me.upsert_knowledge("Alice works at Initech")
    assert (same.id, same.status) == ("alice.employer", "updated")
    other = await me.upsert_knowledge("The office dog is called Biscuit")
    assert (other.status, other.id != "alice.employer") == ("created", True)
    best = await me.search_knowledge("where does Alice work?")
    assert best[0].id == "alice.employer"
    assert (await me.delete_memory("semantic", "alice.employer")).status == "forgotten"
    assert "alice.employer" not in [i.id for i in await me.search_knowledge("Alice works")]
    assert (await me.restore_memory("semantic", "alice.employer")).status == "restored"
    assert "alice.employer" in [i.id for i in await me.search_knowledge("Alice works")]
    # Another user sees none of it.
    stranger = sdk(user=unique("stranger"))
    assert await stranger.search_knowledge("Alice works") == []


@covers(
    "episodic_memorize",
    "episodic_memorize_many",
    "episodic_recent",
    "episodic_search",
    "episodic_delete",
    "episodic_restore",
)
async def test_episodic(sdk: Clients) -> None:
    me = sdk()
    may, june = datetime(2026, 5, 10, tzinfo=UTC), datetime(2026, 6, 10, tzinfo=UTC)
    alps = await me.log_interaction(
        "user", "We hiked the Alps", occurred_at=may, metadata={"turn": 1}
    )
    batch = await me.log_interactions(
        [
            {"role": "user", "content": "We hiked the Andes", "occurred_at": june.isoformat()},
            {"role": "assistant", "content": "Sounds lovely"},
        ]
    )
    assert [w.status for w in batch] == ["created", "created"]
    recent = await me.get_recent_history(10)
    assert [i.text for i in recent] == ["Sounds lovely", "We hiked the Andes", "We hiked the Alps"]
    assert recent[2].metadata == {"turn": 1}
    june_only = await me.search_interactions(
        "hiking", since=datetime(2026, 6, 1, tzinfo=UTC), until=datetime(2026, 7, 1, tzinfo=UTC)
    )
    assert [i.text for i in june_only] == ["We hiked the Andes"]
    with pytest.raises(ValidationError):  # one bad item stores none
        await me.log_interactions([{"role": "user", "content": "ok"}, {"role": "nobody"}])
    assert len(await me.get_recent_history(10)) == 3
    assert (await me.delete_memory("episodic", alps.id, mode="soft")).status == "forgotten"
    assert alps.id not in [i.id for i in await me.get_recent_history(10)]
    with pytest.raises(NotFoundError):  # already hidden
        await me.delete_memory("episodic", alps.id)
    assert (await me.restore_memory("episodic", alps.id)).status == "restored"
    assert alps.id in [i.id for i in await me.get_recent_history(10)]
    assert (await me.delete_memory("episodic", alps.id, mode="hard")).status == "deleted"
    with pytest.raises(NotFoundError):  # a hard delete cannot be undone
        await me.restore_memory("episodic", alps.id)


@covers("procedural_memorize", "procedural_context", "procedural_delete", "procedural_restore")
async def test_procedural(sdk: Clients) -> None:
    me = sdk()
    rule = await me.add_procedure("Check Stripe first", trigger="keywords:billing")
    await me.add_procedure("Answer in Portuguese", trigger="keywords:lisbon")
    skills = await me.get_relevant_skills("my billing failed")
    assert skills[0].id == rule.id
    assert skills[0].metadata["trigger"] == "keywords:billing"
    assert (await me.delete_memory("procedural", rule.id)).status == "forgotten"
    assert rule.id not in [s.id for s in await me.get_relevant_skills("my billing failed")]
    assert (await me.restore_memory("procedural", rule.id)).status == "restored"
    assert (await me.get_relevant_skills("my billing failed"))[0].id == rule.id


@covers("conversation_memorize", "conversation_search", "conversation_recent")
async def test_conversation(sdk: Clients) -> None:
    session = unique("s")
    me = sdk(session=session)
    await me.memorize_turn("user", "Where do I live again?")
    answer = await me.memorize_turn("assistant", "You live in Lisbon.")
    assert answer.status == "created"
    assert [t.text for t in await me.recent_turns()] == [
        "Where do I live again?",
        "You live in Lisbon.",
    ]
    assert (await me.remember_turns("Lisbon"))[0].text == "You live in Lisbon."
    # Another session of the same user has turns of its own.
    assert await sdk(session=unique("s")).recent_turns() == []


@covers("working_set", "working_get", "working_delete", "working_get_plan", "working_clear")
async def test_working(sdk: Clients) -> None:
    me = sdk()
    plan = unique("plan")
    first = await me.set_plan_state(plan, "step", {"n": 1})
    await me.set_plan_state(plan, "owner", "alice")
    with pytest.raises(VersionConflictError):
        await me.set_plan_state(plan, "step", {"n": 9}, expected_version=first.version + 5)
    assert (await me.get_plan_state(plan, "step")).value == {"n": 1}
    assert await me.get_all_plan_state(plan) == {"step": {"n": 1}, "owner": "alice"}
    assert await me.delete_plan_state(plan, "owner") == 1
    with pytest.raises(NotFoundError):
        await me.get_plan_state(plan, "owner")
    assert await me.delete_plan_state(plan) == 1
    assert await me.get_all_plan_state(plan) == {}


# -- the intent operations of every type ----------------------------------------------------

INTENT_TYPES: tuple[str, ...] = get_args(MemoryTypeName)


@covers(*(f"{t}_{op}" for t in INTENT_TYPES for op in ("forget", "summarize", "capacity")))
async def test_forget_summarize_capacity_of_every_type(sdk: Clients) -> None:
    session = unique("s")
    me = sdk(session=session)
    plan = unique("plan")
    await me.log_interaction("user", "I moved to Lisbon, mail me at a@b.io")
    await me.log_interaction("user", "My cat is called Miso")
    await me.store_knowledge("Alice likes green tea", key="alice.drink")
    await me.add_procedure("Answer briefly", trigger="always")
    await me.memorize_turn("user", "hello there")
    await me.set_plan_state(plan, "step", {"n": 1})
    counts = {"episodic": 2, "semantic": 1, "procedural": 1, "conversation": 1}
    for name, count in counts.items():
        info = await me.get_capacity_info(name)
        assert (info.item_count, info.token_usage > 0) == (count, True), name
    assert (await me.get_capacity_info("working", plan_id=plan)).item_count == 1
    with pytest.raises(ValidationError):  # working memory is a plan's
        await me.get_capacity_info("working")
    summary = await me.summarize("episodic", token_limit=200)
    assert "Lisbon" in summary.text
    assert "a@b.io" not in summary.text
    assert len(summary.source_ids) == 2
    assert "a@b.io" in (await me.summarize("episodic", raw=True)).text
    assert "green tea" in (await me.summarize("semantic")).text
    assert "briefly" in (await me.summarize("procedural")).text
    assert "hello" in (await me.summarize("conversation")).text
    assert (await me.summarize("working", plan_id=plan)).tokens > 0
    reader = sdk(role="reader")
    with pytest.raises(PermissionDeniedError):
        await reader.summarize("episodic", raw=True)
    with pytest.raises(PermissionDeniedError):
        await reader.forget("episodic", "all")
    with pytest.raises(ForgetInstructionError):
        await me.forget("episodic", "whatever you like")
    forgotten = await me.forget("episodic", 'matching "Miso"')
    assert (forgotten.mode, len(forgotten.forgotten)) == ("soft", 1)
    assert (await me.get_capacity_info("episodic")).item_count == 1
    assert (await me.forget("semantic", "key:alice.drink", mode="hard")).forgotten == [
        "alice.drink"
    ]
    assert await me.search_knowledge("green tea") == []
    assert len((await me.forget("procedural", "all")).forgotten) == 1
    assert await me.get_relevant_skills("anything") == []
    assert len((await me.forget("conversation", "all")).forgotten) == 1
    assert await me.recent_turns() == []
    assert (await me.forget("working", "all", plan_id=plan)).forgotten
    assert await me.get_all_plan_state(plan) == {}


@covers("assemble")
async def test_assemble(sdk: Clients) -> None:
    me = sdk(session=unique("s"))
    await me.log_interaction("user", "I moved to Lisbon last spring, mail me at a@b.io")
    await me.store_knowledge("Alice's cat is called Miso", key="alice.cat")
    await me.add_procedure("Answer in Portuguese", trigger="keywords:lisbon")
    context = await me.assemble("what about Lisbon?", token_limit=300)
    assert "Lisbon" in context.text
    assert "Portuguese" in context.text
    assert "a@b.io" not in context.text  # always redacted
    assert context.tokens <= 300
    assert {"episodic", "procedural"} <= {i.memory_type for i in context.items}
    assert context.incomplete == []


@covers("formation_ingest")
async def test_ingest(sdk: Clients) -> None:
    me = sdk()
    report = await me.ingest(
        [
            {"role": "user", "content": "I live in Porto and I work at Initech."},
            {"role": "assistant", "content": "Noted!"},
        ]
    )
    assert report.episodes == 2
    recent = await me.get_recent_history(5)
    assert [i.text for i in recent] == ["Noted!", "I live in Porto and I work at Initech."]


# -- entries, recall, events -----------------------------------------------------------------


@covers("entries_store_entry", "entries_list_entries", "entries_read_entry", "entries_delete_entry")
async def test_entries(sdk: Clients) -> None:
    me = sdk()
    stored = await me.store("user.city", "Lisbon", content_type="profile", metadata={"src": "t"})
    assert (stored.key, stored.value, stored.version) == ("user.city", "Lisbon", 1)
    await me.store("user.pet", {"name": "Miso"})
    with pytest.raises(VersionConflictError):
        await me.store("user.city", "Porto", expected_version=7)
    read = await me.read("user.city")
    assert read is not None
    assert (read.value, read.metadata) == ("Lisbon", {"src": "t"})
    page = await me.list_entries(prefix="user.")
    assert [e.key for e in page.items] == ["user.city", "user.pet"]
    assert await me.delete("user.pet") is True
    assert await me.read("user.pet") is None
    assert await me.delete("user.pet") is False
    assert [e.key for e in (await me.list_entries()).items] == ["user.city"]


@covers("entries_recall")
async def test_recall(sdk: Clients) -> None:
    me = sdk()
    may, june = datetime(2026, 5, 10, tzinfo=UTC), datetime(2026, 6, 10, tzinfo=UTC)
    await me.log_interaction("user", "We hiked the Alps in May", occurred_at=may)
    await me.log_interaction("user", "We hiked the Andes in June", occurred_at=june)
    await me.store("trip.gear", "hiking boots and a tent")
    june_only = await me.recall("hiking trip", since=datetime(2026, 6, 1, tzinfo=UTC))
    texts = [r.entry.value["text"] for r in june_only if r.provider_id == "episodic"]
    assert texts == ["We hiked the Andes in June"]
    report = await me.recall_report("hiking")
    assert report.failed_providers == []
    assert {"episodic", "event_sourced"} <= {r.provider_id for r in report.results}


@covers("events_read_events")
async def test_events(sdk: Clients) -> None:
    me = sdk()
    await me.store("user.city", "Lisbon")
    await me.delete("user.city")
    page = await me.events(event_types=["memory.written", "memory.deleted"])
    mine = [(e.event_type, e.payload.get("key")) for e in page.events]
    assert mine == [("memory.written", "user.city"), ("memory.deleted", "user.city")]
    # Credentials bound to another user see none of these.
    other = await sdk(user=unique("other")).events(event_types=["memory.written"])
    assert other.events == []


# -- task contexts, plans, sessions ---------------------------------------------------------


@covers(
    "task_context_create_task",
    "task_context_list_tasks",
    "task_context_task_by_subtask",
    "task_context_get_task",
    "task_context_update_task",
    "task_context_delete_task",
)
async def test_task_contexts(sdk: Clients) -> None:
    me = sdk()
    task, plan = unique("task"), unique("plan")
    made = await me.store_task_context(task, "order.placed", plan_id=plan, data={"n": 1})
    assert (made.task_id, made.data, made.version) == (task, {"n": 1}, 1)
    with pytest.raises(ConflictError):
        await me.store_task_context(task, "again")
    await me.add_sub_task(task, "sub-1")
    assert (await me.get_task_context(task)).sub_tasks == ["sub-1"]
    assert (await me.get_task_by_subtask("sub-1")).task_id == task
    assert await me.find_parent_task(unique("nobody")) is None
    updated = await me.update_task_context(task, state={"done": True})
    assert updated.state == {"done": True}
    assert [t.task_id for t in (await me.list_task_contexts(plan_id=plan)).items] == [task]
    await me.delete_task_context(task)
    with pytest.raises(NotFoundError):
        await me.get_task_context(task)


@covers(
    "plans_create_plan",
    "plans_list_plans",
    "plans_get_plan",
    "plans_update_plan",
    "plans_delete_plan",
)
async def test_plans(sdk: Clients) -> None:
    me = sdk()
    plan = unique("plan")
    made = await me.create_plan(plan, "trip.booked", goal_data={"to": "Porto"})
    assert (made.plan_id, made.goal_data) == (plan, {"to": "Porto"})
    changed = await me.update_plan(plan, status="done", expected_version=made.version)
    assert changed.status == "done"
    with pytest.raises(VersionConflictError):
        await me.update_plan(plan, status="active", expected_version=made.version)
    assert (await me.get_plan(plan)).status == "done"
    assert [p.plan_id for p in (await me.list_plans(status="done")).items] == [plan]
    await me.delete_plan(plan)
    with pytest.raises(NotFoundError):
        await me.get_plan(plan)
    assert (await me.list_plans()).items == []


@covers(
    "sessions_create_session",
    "sessions_list_sessions",
    "sessions_get_session",
    "sessions_update_session",
    "sessions_delete_session",
)
async def test_sessions(sdk: Clients) -> None:
    me = sdk()
    session = unique("s")
    made = await me.create_session(session, metadata={"channel": "web"})
    assert (made.session_id, made.metadata) == (session, {"channel": "web"})
    changed = await me.update_session(session, metadata={"channel": "app"})
    assert changed.metadata == {"channel": "app"}
    assert (await me.get_session(session)).metadata == {"channel": "app"}
    assert [s.session_id for s in (await me.list_sessions()).items] == [session]
    await me.delete_session(session)
    with pytest.raises(NotFoundError):
        await me.get_session(session)


# -- graph -----------------------------------------------------------------------------------


@covers(
    "graph_add_entity",
    "graph_get_entity",
    "graph_delete_entity",
    "graph_merge_entities",
    "graph_get_relations",
    "graph_add_relation",
    "graph_invalidate_relation",
    "graph_delete_relation",
    "graph_traverse",
    "graph_search_entities",
    "graph_ingest",
)
async def test_graph(sdk: Clients) -> None:
    graph = sdk().graph
    ada = await graph.add_entity("Ada", "person", properties={"role": "engineer"})
    assert await graph.get_entity(ada.entity_id) == ada
    acme = await graph.add_entity("Acme", "organization")
    porto = await graph.add_entity("Porto", "place")
    works = await graph.add_relation(ada.entity_id, acme.entity_id, "works_for")
    lives = await graph.add_relation(ada.entity_id, porto.entity_id, "lives_in")
    assert {r.relation_type for r in await graph.get_relations(ada.entity_id)} == {
        "works_for",
        "lives_in",
    }
    ended = await graph.invalidate_relation(works.relation_id)
    assert ended.invalid_at is not None
    assert [r.relation_type for r in await graph.get_relations(ada.entity_id)] == ["lives_in"]
    history = await graph.get_relations(ada.entity_id, history=True)
    assert {r.relation_id for r in history} == {works.relation_id, lives.relation_id}
    reached = await graph.traverse(ada.entity_id, "neighbors")
    assert porto.entity_id in {e.entity_id for e in reached.entities}
    assert (await graph.search("Acme"))[0][0].entity_id == acme.entity_id
    await graph.delete_relation(lives.relation_id)
    with pytest.raises(RelationNotFoundError):
        await graph.delete_relation(lives.relation_id)
    twin = await graph.add_entity("A. Lovelace", "person", resolve=False)
    merged = await graph.merge_entities(ada.entity_id, twin.entity_id)
    assert "A. Lovelace" in merged.aliases
    assert await graph.get_entity(twin.entity_id) is None
    assert await graph.delete_entity(porto.entity_id) is True
    with pytest.raises(EntityNotFoundError):
        await graph.get_relations(porto.entity_id)
    ingested = await graph.ingest("Grace works at Initech.")
    assert {e.name for e in ingested.entities} >= {"Grace", "Initech"}


# -- bad input on every path and query ---------------------------------------------------


async def test_hostile_ids_and_queries_change_nothing(sdk: Clients, served: Served) -> None:
    me = sdk()
    plan = unique("plan")
    await me.store("user.city", "Lisbon")
    await me.set_plan_state(plan, "step", 1)
    before = (await me.events()).events
    for bad in ("\ud800", "a\udfffb"):
        for attempt in (
            me.read(bad),
            me.delete(bad),
            me.set_plan_state(plan, bad, 2),
            me.set_plan_state(bad, "step", 2),
            me.delete_plan_state(bad),
            me.delete_memory("episodic", bad),
            me.restore_memory("semantic", bad),
            me.knowledge_history(bad),
            me.get_task_context(bad),
            me.delete_plan(bad),
            me.graph.delete_entity(bad),
            me.search_knowledge(bad),
            me.list_entries(prefix=bad),
            me.events(event_types=[bad]),
            me.remember("notes", bad),
            me.forget(bad, "all"),
        ):
            with pytest.raises(InvalidValueError):
                await attempt
    # In a body, a plain string of the schema is refused as the schema's validation_error.
    for attempt in (
        me.store("\ud800", "x"),
        me.store("a\x00b", "x"),
        me.set_plan_state(plan, "a\x00b", 2),
    ):
        with pytest.raises(ValidationError):
            await attempt
    token = issue_token(JWT_SECRET, TENANT, user=sdk.user)
    async with httpx.AsyncClient(
        base_url=served.url, headers={"Authorization": f"Bearer {token}"}
    ) as http:
        for path in (f"/v1/memory/working/{plan}/%FF", "/v1/memory/semantic/search?q=%C0%AF"):
            answer = await http.request("PUT" if "working" in path else "GET", path)
            assert (answer.status_code, answer.json()["error"]) == (422, "invalid_value")
    assert (await me.events()).events == before
    assert await me.get_all_plan_state(plan) == {"step": 1}
    assert [e.key for e in (await me.list_entries()).items] == ["user.city"]


# -- the table -------------------------------------------------------------------------------


def table_rows(text: str) -> list[list[str]]:
    """The rows of the table under ``TABLE_HEADING``: each row's cells."""
    blocks = text.split(TABLE_HEADING, 1)[1].split("\n\n")
    table = next(b for b in blocks if b.startswith("|"))
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in table.splitlines()[2:]]


def row_operations(cell: str, known: set[str]) -> set[str]:
    """The operation ids a row's operationId cell names, with ``<type>_x`` and ``prefix_…``
    spelt out against the served schema."""
    found: set[str] = set()
    for name in re.findall(r"`([^`]+)`", cell):
        if name.startswith("<type>_"):
            spelt = {f"{t}_{name.removeprefix('<type>_')}" for t in INTENT_TYPES} & known
        elif name.endswith("…"):
            spelt = {k for k in known if k.startswith(name.removesuffix("…"))}
        else:
            spelt = {name} & known
        assert spelt, f"{name} names no operation of the service"
        found |= spelt
    return found


def covered_operations(modules: list[ModuleType]) -> set[str]:
    return {
        op
        for module in modules
        for member in vars(module).values()
        if callable(member) and member.__name__.startswith("test_")
        for op in getattr(member, "covers", ())
    }


def test_every_row_of_the_table_has_a_live_test(tmp_path: Path) -> None:
    schema = create_app(ServiceSettings(), db=tmp_path / "schema.db").openapi()
    known = {o["operationId"] for ops in schema["paths"].values() for o in ops.values()}
    rows = table_rows(DOCS.read_text())
    assert len(rows) >= 25
    covered = covered_operations([importlib.import_module(m) for m in LIVE_MODULES])
    for row in rows:
        missing = row_operations(row[2], known) - covered
        assert not missing, f"row {row[0]}: no live test of {sorted(missing)}"
