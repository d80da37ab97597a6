"""The web inspector over a real engine: every page renders what the database holds, user
text is escaped, bad scopes are refused, and looking changes nothing."""

from __future__ import annotations

import asyncio
import re
import sys
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.inspector import create_inspector
from engramdb.inspector.graph_svg import graph_svg
from engramdb.inspector.html import score_bars
from engramdb.providers.graph import GraphEntity, GraphRelation
from tests.helpers.ports import free_port
from tests.helpers.processes import serving

HOSTILE = "<script>alert('x')</script>"


@pytest.fixture
async def inspector(any_engine: Engine) -> AsyncIterator[httpx.AsyncClient]:
    alice = any_engine.scope(tenant="acme", user="alice")
    for text in ("I moved to Lisbon last spring", "My sister Ana lives in Porto", HOSTILE):
        await alice.episodic.memorize(MemoryItem(text=text))
    await alice.semantic.memorize(MemoryItem(text="Alice prefers window seats"))
    await alice.graph.ingest(
        "Alice lives in Lisbon. Alice works for Acme.", occurred_at=datetime(2020, 1, 1, tzinfo=UTC)
    )
    await alice.assemble("Where does Alice live?")
    await any_engine.scope(tenant="globex", user="bob").episodic.memorize(MemoryItem(text="Oslo"))
    app = create_inspector(engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://inspector"
    ) as client:
        yield client


def text_of(html: str) -> str:
    return re.sub(r"<[^>]+>", " ", html)


async def test_overview_counts_and_lists_the_active_scopes(
    inspector: httpx.AsyncClient, any_engine: Engine
) -> None:
    page = await inspector.get("/")
    assert page.status_code == 200
    stats = await any_engine.stats()
    assert f"{stats.records} records" in page.text
    assert f"{stats.events} events" in page.text
    assert "/scope?tenant=acme&amp;user=alice" in page.text
    assert "/scope?tenant=globex&amp;user=bob" in page.text


async def test_a_scope_page_shows_its_memories_graph_traces_and_events(
    inspector: httpx.AsyncClient,
) -> None:
    page = await inspector.get("/scope", params={"tenant": "acme", "user": "alice"})
    assert page.status_code == 200
    shown = text_of(page.text)
    assert "episodic · 3 records" in shown
    assert "I moved to Lisbon last spring" in shown
    assert "Oslo" not in shown  # another tenant's memory
    assert "<svg" in page.text  # the graph, drawn
    assert "Alice → lives_in → Lisbon" in shown  # relations by their entities' names
    assert "Where does Alice live?" in shown  # the trace of the assembly
    assert "memory.written" in shown


async def test_recall_shows_each_hit_with_its_score_parts(inspector: httpx.AsyncClient) -> None:
    page = await inspector.get(
        "/scope", params={"tenant": "acme", "user": "alice", "q": "where did I move?"}
    )
    recall = page.text.split("Recall: episodic", 1)[1].split("</section>", 1)[0]
    rows = re.findall(r"<tr><td class=num>(\d+)</td>.*?</tr>", recall)
    assert rows[:1] == ["1"]
    first_row = recall.split("<td class=num>1</td>", 1)[1].split("</tr>", 1)[0]
    assert "Lisbon" in first_row
    assert "title='vector" in first_row
    assert "title='fused" in first_row


async def test_user_text_is_escaped_everywhere(inspector: httpx.AsyncClient) -> None:
    for path, params in (
        ("/", {}),
        ("/events", {}),
        ("/scope", {"tenant": "acme", "user": "alice", "q": HOSTILE}),
    ):
        page = await inspector.get(path, params=params)
        assert page.status_code == 200
        assert "<script>" not in page.text
    assert "&lt;script&gt;" in page.text


async def test_the_event_log_pages(inspector: httpx.AsyncClient, any_engine: Engine) -> None:
    total = await any_engine.events.count()
    first = await inspector.get("/events")
    assert "<tr><td class=num>1</td>" not in first.text  # positions are plain cells
    assert "<tr><td>1</td>" in first.text
    last = await inspector.get("/events", params={"after": total - 1})
    assert f"<tr><td>{total}</td>" in last.text
    assert "<tr><td>1</td>" not in last.text
    assert "next page" not in last.text


@pytest.mark.parametrize(
    "params", [{"tenant": " acme "}, {"tenant": "acme", "user": "a\x01b"}, {"after": "-1"}]
)
async def test_bad_input_is_refused(inspector: httpx.AsyncClient, params: dict[str, str]) -> None:
    path = "/events" if "after" in params else "/scope"
    assert (await inspector.get(path, params=params)).status_code == 422


async def test_looking_changes_nothing(inspector: httpx.AsyncClient, any_engine: Engine) -> None:
    async def contents() -> tuple[dict[str, int], list[str]]:
        # The file or database size is left out: PostgreSQL's moves on its own.
        events = await any_engine.events.read()
        return (await any_engine.stats()).records_by_namespace, [
            e.model_dump_json() for e in events
        ]

    before = await contents()
    await inspector.get("/")
    await inspector.get("/scope", params={"tenant": "acme", "user": "alice", "q": "Lisbon"})
    await inspector.get("/events")
    assert await contents() == before


def test_graph_picture_places_every_entity_and_known_relation() -> None:
    people = [GraphEntity(entity_id=f"e{i}", name=f"P{i}", entity_type="person") for i in range(3)]
    relations = [
        GraphRelation(source_id="e0", target_id="e1", relation_type="knows"),
        GraphRelation(source_id="e0", target_id="gone", relation_type="knows"),
    ]
    svg = graph_svg(people, relations)
    assert svg.count("<circle") == 3
    assert svg.count("<line") == 1  # the relation to an entity not shown is left out
    assert graph_svg([], []) == "<p class=muted>no entities</p>"


def test_score_bars_scale_each_part() -> None:
    bars = score_bars({"vector": 0.5, "bm25": 20.0, "unknown": 3.0}, width=100)
    assert "width:25px" in bars  # 0.5 of half the width
    assert "width:25px;background:#4c78a8" in bars  # BM25 20 saturates to 0.5
    assert "unknown" not in bars


def test_engram_inspect_serves_the_pages(tmp_path: Path) -> None:
    db = tmp_path / "engram.db"

    async def fill() -> None:
        async with engramdb.open(db, config=EngineConfig(embedder=None)) as engine:
            await engine.scope(user="alice").episodic.memorize(MemoryItem(text="I moved to Lisbon"))

    asyncio.run(fill())
    port = free_port()
    # --db after the command, as serve takes it (the global --db before it works as well).
    command = [sys.executable, "-m", "engramdb.cli", "inspect", "--db", str(db)]
    command += ["--port", str(port), "--no-vectors"]
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "inspect.log"
    with serving(command, f"{url}/", log=log):
        page = httpx.get(f"{url}/scope?user=alice", timeout=10)
        assert page.status_code == 200
        assert "I moved to Lisbon" in page.text
    assert f"store  {db}" in log.read_text()
