"""The blocking API runs the async core on a private loop thread: the main paths through it,
its errors, and its life cycle."""

from __future__ import annotations

import json
import threading
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import (
    EngineClosedError,
    InvalidKeyError,
    NotFoundError,
    UsageError,
    ValidationError,
)
from engramdb.core.intent import MemoryItem
from engramdb.core.portal import ClosingView, Portal
from engramdb.engine import EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.budget import Budget
from engramdb.orchestrator.plans import Plan
from engramdb.orchestrator.sessions import Session
from engramdb.orchestrator.tasks import TaskContext
from engramdb.providers.graph import GraphEntity, GraphRelation, GraphTraversal, TraversalPattern
from engramdb.storage.backend import EventQuery
from engramdb.sync import (
    SyncEngine,
    SyncEventSourcedProvider,
    SyncGraphMemoryProvider,
    SyncWorkingMemoryProvider,
)
from tests.postgres.database import empty_database


@pytest.fixture(params=["sqlite", "postgresql"])
def engram(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: MiniLMEmbedder
) -> Iterator[SyncEngine]:
    """A blocking engine on each backend, with the default embedder."""
    target = str(tmp_path / "sync.db") if request.param == "sqlite" else empty_database()
    with engramdb.open_sync(target, config=EngineConfig(embedder=embedder)) as opened:
        yield opened


def test_the_memory_types_and_assemble(engram: SyncEngine) -> None:
    mem = engram.scope(tenant="acme", user="alice", session="s-1")
    when = datetime(2023, 5, 20, tzinfo=UTC)
    stored = mem.episodic.memorize_many(
        [
            MemoryItem(text="I adopted a golden retriever called Max", occurred_at=when),
            MemoryItem(text="We are planning a trip to Kyoto", occurred_at=when),
        ]
    )
    assert len(stored) == 2
    (pet, *_) = mem.episodic.remember("what pet do I have?", limit=2, now=when)
    assert pet.text == "I adopted a golden retriever called Max"
    mem.semantic.memorize(MemoryItem(text="Alice lives in Lisbon", key="user.city"))
    mem.semantic.memorize(MemoryItem(text="Alice lives in Porto", key="user.city"))
    assert [i.text for i in mem.semantic.remember("where does Alice live?", limit=1)] == [
        "Alice lives in Porto"
    ]
    assert [i.text for i in mem.semantic.history("user.city")] == [
        "Alice lives in Porto",
        "Alice lives in Lisbon",
    ]
    mem.working.set("step", 2)
    assert mem.working.get("step") == 2
    assert mem.working.state() == {"step": 2}
    mem.conversation.memorize(MemoryItem(text="hello there", role="user"))
    assert [i.text for i in mem.conversation.recent(5)] == ["hello there"]
    assert mem.episodic.get_capacity_info().item_count == 2
    assert mem.episodic.summarize("all", token_limit=50).tokens <= 50
    forgotten = mem.episodic.forget("matching 'Kyoto'", mode="hard")
    assert len(forgotten.forgotten) == 1
    assert len(mem.episodic.records()) == 1
    # A time budget no loaded machine misses: timing is the benchmarks' business.
    context = mem.assemble("where does Alice live?", budget=Budget(500, time_limit_ms=60_000))
    assert "Porto" in context.text
    trace = mem.last_trace()
    assert trace is not None
    assert trace.tokens_used == context.tokens
    assert [t.name for t in mem.types()] == [
        "working",
        "episodic",
        "semantic",
        "procedural",
        "conversation",
    ]
    assert mem.scope.user == "alice"


def test_the_manager_and_its_providers(engram: SyncEngine) -> None:
    mem = engram.scope(tenant="acme", user="alice")
    mem.manager.store("user.city", "Lisbon", tier=engramdb.MemoryTier.PERSISTENT)
    mem.manager.store("scratch", "thinking about Lisbon")
    assert mem.manager.read("user.city").value == "Lisbon"  # type: ignore[union-attr]
    # Both match the whole query (score 1.0); the tie goes to the higher tier.
    hits = mem.manager.recall(engramdb.RecallQuery(query="lisbon"))
    assert [r.entry.key for r in hits] == ["scratch", "user.city"]
    assert mem.manager.list_keys() == ["scratch", "user.city"]
    assert set(mem.manager.providers()) >= {"working", "event_sourced", "graph"}
    with pytest.raises(InvalidKeyError):
        mem.manager.store("", "x")
    persistent = mem.manager.get_provider("event_sourced")
    assert isinstance(persistent, SyncEventSourcedProvider)
    assert persistent.count() == 1
    assert isinstance(mem.manager.get_provider("graph"), SyncGraphMemoryProvider)
    (working,) = mem.manager.providers_by_tier(engramdb.MemoryTier.WORKING)
    assert isinstance(working, SyncWorkingMemoryProvider)
    assert mem.persistent.list_keys() == ["user.city"]
    assert mem.working_provider.read("scratch").value == "thinking about Lisbon"  # type: ignore[union-attr]
    assert mem.manager.delete("scratch") == ["working"]
    written = engram.events.read(EventQuery(event_types=("memory.written",)))
    assert [e.payload["key"] for e in written] == ["user.city"]
    streamed = list(engram.events.stream(EventQuery(event_types=("memory.written",))))
    assert streamed == written
    assert engram.events.count() == engram.events.last_position() > 0
    assert {ns: n for ns, n in engram.rebuild().records.items() if n} == {"event_sourced": 1}
    assert engram.stats().records >= 1


def test_tasks_plans_sessions_and_tenancy(engram: SyncEngine) -> None:
    mem = engram.scope(tenant="acme", user="alice")
    plan = mem.plans.create(Plan(plan_id="trip", goal_event="trip.requested"))
    assert mem.plans.get("trip").goal_event == plan.goal_event
    assert mem.plans.update("trip", {"status": "done"}).status == "done"
    assert [p.plan_id for p in mem.plans.list(filters={"status": "done"}).items] == ["trip"]
    mem.tasks.create(TaskContext(task_id="t1", event_type="book", sub_tasks=["t2"]))
    assert mem.tasks.by_subtask("t2").task_id == "t1"  # type: ignore[union-attr]
    session = mem.sessions.create(Session(session_id="s-1", user_id="alice"))
    assert session.last_interaction is not None
    mem.sessions.delete("s-1")
    assert mem.sessions.find("s-1") is None
    with pytest.raises(NotFoundError):
        mem.plans.get("nope")
    engram.tenancy.create_tenant("acme", "Acme")
    key, token = engram.tenancy.create_key("acme", role="reader")
    assert engram.tenancy.verify_key(token).key_id == key.key_id
    assert [t.tenant_id for t in engram.tenancy.list_tenants().items] == ["acme"]


def test_sync_graph(tmp_path: Path) -> None:
    with engramdb.open_sync(tmp_path / "graph.db", config=EngineConfig(embedder=None)) as engram:
        graph = engram.scope(tenant="acme", user="alice").graph
        ada = graph.add_entity(GraphEntity(name="Ada", entity_type="person")).key
        acme = graph.add_entities([GraphEntity(name="Acme", entity_type="organization")])[0].key
        globex = graph.add_entity(GraphEntity(name="Globex", entity_type="organization")).key
        assert graph.get_entity(ada).name == "Ada"  # type: ignore[union-attr]
        assert graph.find_entity("acme", "organization").entity_id == acme  # type: ignore[union-attr]
        was = datetime(2020, 1, 1, tzinfo=UTC)
        first = graph.add_relation(ada, acme, "works_for", valid_at=was)
        (knows,) = graph.add_relations([GraphRelation(source_id=ada, target_id=globex)])
        assert [r.target_id for r in graph.get_relations(ada, relation_type="works_for")] == [acme]
        assert graph.invalidate_relation(first.relation_id).invalid_at is not None
        assert graph.get_relations(ada, as_of=was) == [graph.get_relations(ada, history=True)[0]]
        start = GraphTraversal(start_entity_id=ada, pattern=TraversalPattern.NEIGHBORS)
        assert [e.name for e in graph.traverse(start)] == ["Globex"]
        path = GraphTraversal(
            start_entity_id=ada, pattern=TraversalPattern.SHORTEST_PATH, target_entity_id=globex
        )
        assert [e.name for e in graph.paths(path)[0].entities] == ["Ada", "Globex"]
        graph.delete_relation(knows.relation_id)
        added = graph.ingest("Bob works for Initech")
        assert {e.name for e in added.entities} == {"Bob", "Initech"}
        assert graph.search_entities("Initech")[0][0].name == "Initech"
        assert graph.merge_entities(acme, globex).entity_id == acme
        assert graph.export_json(tmp_path / "graph.json").exists()
        assert graph.delete(ada)
        assert graph.get_entity(ada) is None


def test_export_iterates_and_restore_loads_it(tmp_path: Path) -> None:
    config = EngineConfig(embedder=None)
    with engramdb.open_sync(tmp_path / "a.db", config=config) as engram:
        engram.scope(tenant="acme").manager.store("k", "v", tier=engramdb.MemoryTier.PERSISTENT)
        lines = [json.dumps(line) for line in engram.export()]
        # An export left part-way closes its iterator on the loop.
        first = engram.export()
        assert next(first)["kind"] == "record"
        first.close()
    assert {json.loads(line)["kind"] for line in lines} == {"record", "event"}
    (tmp_path / "export.jsonl").write_text("\n".join(lines) + "\n")
    with engramdb.open_sync(tmp_path / "b.db", config=config) as restored:
        seen: list[tuple[str, int]] = []
        report = restored.restore(tmp_path / "export.jsonl", lambda *p: seen.append(p))
        assert report.records == report.records_expected == 1
        assert seen
        assert restored.scope(tenant="acme").manager.read("k").value == "v"  # type: ignore[union-attr]


def test_errors_cross_the_thread_typed(tmp_path: Path) -> None:
    with engramdb.open_sync(tmp_path / "e.db", config=EngineConfig(embedder=None)) as engram:
        mem = engram.scope(tenant="acme", user="alice")
        with pytest.raises(ValidationError, match="remember needs a non-empty prompt"):
            mem.working.remember("  ")
        with pytest.raises(ValidationError):
            mem.episodic.forget("forget the moon and the stars")


def test_a_blocking_call_from_the_loop_thread_is_refused(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    with engramdb.open_sync(tmp_path / "r.db", config=EngineConfig(embedder=embedder)) as engram:
        engram.scope(tenant="acme").semantic.memorize(MemoryItem(text="Alice lives in Lisbon"))
        refused: list[Exception] = []

        def progress(count: int) -> None:
            try:
                engram.stats()
            except UsageError as error:
                refused.append(error)

        assert engram.reindex(progress) == 1
        assert refused
        assert "use the async API there" in str(refused[0])


def test_a_closed_engine_says_so(tmp_path: Path) -> None:
    engram = engramdb.open_sync(tmp_path / "c.db", config=EngineConfig(embedder=None))
    mem = engram.scope(tenant="acme")
    engram.close()
    engram.close()  # idempotent
    with pytest.raises(EngineClosedError, match="closed"):
        mem.working.get("x")
    with pytest.raises(EngineClosedError):
        engram.stats()


class _Unclosable:
    async def close(self) -> None:
        raise OSError("the socket is gone")


class _UnclosableView(ClosingView[_Unclosable]):
    def _closing(self) -> Callable[[], Awaitable[None]]:
        return self.wrapped.close


def test_a_view_that_fails_to_close_still_stops_its_own_thread() -> None:
    before = threading.active_count()
    owned = _UnclosableView(_Unclosable(), Portal())
    with pytest.raises(OSError, match="gone"), owned:
        pass
    assert threading.active_count() == before
    owned.close()  # its loop is stopped: nothing is left to close
    lent = Portal()
    try:
        with pytest.raises(OSError, match="gone"):
            _UnclosableView(_Unclosable(), lent, owns_portal=False).close()
        assert not lent.closed  # a lent loop is its owner's to stop
    finally:
        lent.stop()


def test_opening_a_bad_target_stops_the_thread(tmp_path: Path) -> None:
    before = threading.active_count()
    with pytest.raises(engramdb.UnsupportedTargetError):
        engramdb.open_sync("nosuch://where")
    assert threading.active_count() == before


async def test_awaiting_open_gives_an_engine(tmp_path: Path) -> None:
    engine = await engramdb.open(tmp_path / "a.db")
    try:
        assert await engine.scope().persistent.list_keys() == []
    finally:
        await engine.close()
        await engine.close()
