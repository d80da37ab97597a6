"""``rebuild()`` from the log reproduces exactly what read, list_keys and search returned."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import engramdb
from engramdb.core.types import RecallQuery
from engramdb.engine import Engine, ScopedMemory
from engramdb.storage.sqlite.text_tokens import register_text_functions

SCOPES = [
    {"tenant": "acme", "user": "alice", "session": "s-1"},
    {"tenant": "acme", "user": "alice", "session": "s-2"},
    {"tenant": "acme", "user": "bob"},
    {"tenant": "globex", "user": "alice", "agent": "helper"},
]


async def populate(engine: Engine) -> list[ScopedMemory]:
    memories = [engine.scope(**fields) for fields in SCOPES]
    for n, mem in enumerate(memories):
        p = mem.persistent
        await p.write(
            "user.city",
            f"city {n}: Lisbon",
            content_type="profile",
            metadata={"turn": n, "source": "chat"},
        )
        await p.write("user.pet", {"kind": "dog", "name": f"Rex {n}"})
        await p.write("user.city", f"city {n}: Porto, moved from Lisbon", content_type="profile")
        await p.write("plan.today", ["call mom", "buy milk"], ttl_ms=60_000)
        await p.write("gone.soon", "expires", ttl_ms=1)
        await p.write("removed", "then deleted")
        await p.delete("removed")
    await asyncio.sleep(0.01)
    return memories


async def snapshot(memories: list[ScopedMemory]) -> list[Any]:
    shot = []
    for mem in memories:
        p = mem.persistent
        keys = await p.list_keys()
        shot.append(
            (
                keys,
                await p.list_keys(prefix="user."),
                await p.list_keys(content_types=["profile"]),
                [await p.read(k) for k in [*keys, "removed", "gone.soon", "nope"]],
                await p.search("lisbon"),
                await p.search("dog rex"),
                await p.search("porto", metadata_filters={"source": "chat"}),
                await mem.manager.recall(RecallQuery(query="city pet", limit=5)),
            )
        )
    return shot


async def test_engine_rebuild_reproduces_reads_lists_and_searches(db_path: Path) -> None:
    async with engramdb.open(db_path) as engine:
        memories = await populate(engine)
        before = await snapshot(memories)
        report = await engine.rebuild()
        # alice (both sessions share one partition), bob, globex: city, pet, plan, and the
        # expired but not yet swept entry each.
        assert report.records["event_sourced"] == 3 * 4
        assert await snapshot(memories) == before


async def test_rebuild_repairs_a_damaged_projection(db_path: Path) -> None:
    async with engramdb.open(db_path) as engine:
        before = await snapshot(await populate(engine))
    with sqlite3.connect(db_path) as conn:
        register_text_functions(conn)  # the statistics' triggers call them
        conn.execute("DELETE FROM records WHERE key = 'user.pet'")
        conn.execute("UPDATE records SET value = '\"tampered\"' WHERE key = 'user.city'")
        conn.execute(
            "INSERT INTO records (namespace, tenant, user_id, agent, session, plan, key,"
            " value, content_type, metadata, text, created_at) VALUES ('event_sourced',"
            " 'acme', 'alice', '', '', '', 'ghost', '1', 'fact', '{}', 'ghost',"
            " '2026-01-01T00:00:00.000000+00:00')"
        )
    async with engramdb.open(db_path) as engine:
        memories = [engine.scope(**fields) for fields in SCOPES]
        assert await snapshot(memories) != before
        await engine.rebuild()
        assert await snapshot(memories) == before


async def test_projection_is_rebuilt_from_the_log_alone(db_path: Path) -> None:
    async with engramdb.open(db_path) as engine:
        before = await snapshot(await populate(engine))
    with sqlite3.connect(db_path) as conn:
        register_text_functions(conn)  # the statistics' triggers call them
        conn.execute("DELETE FROM records")
    async with engramdb.open(db_path) as engine:
        memories = [engine.scope(**fields) for fields in SCOPES]
        await engine.rebuild()
        assert await snapshot(memories) == before


async def test_provider_rebuild_touches_only_its_own_partition(db_path: Path) -> None:
    async with engramdb.open(db_path) as engine:
        memories = await populate(engine)
        before = await snapshot(memories)
    with sqlite3.connect(db_path) as conn:
        register_text_functions(conn)  # the statistics' triggers call them
        conn.execute("DELETE FROM records WHERE tenant = 'globex'")
        conn.execute("DELETE FROM records WHERE user_id = 'bob'")
    async with engramdb.open(db_path) as engine:
        memories = [engine.scope(**fields) for fields in SCOPES]
        globex, bob = memories[3].persistent, memories[2].persistent
        await globex.rebuild()
        assert await globex.list_keys() == before[3][0]
        assert [await globex.read(k) for k in before[3][0]] == before[3][3][: len(before[3][0])]
        assert await bob.list_keys() == []  # bob's partition was not rebuilt
        await bob.rebuild()
        # BM25 statistics span the whole table, so searches match again only once every
        # partition is back.
        assert await snapshot(memories) == before


async def test_rebuild_after_sweep_drops_expired_entries_for_good(engine: Engine) -> None:
    mem = engine.scope(tenant="acme")
    await mem.persistent.write("short", "x", ttl_ms=1)
    await asyncio.sleep(0.01)
    assert await engine.sweep_expired() == 1
    await engine.rebuild()
    stats = await engine.stats()
    assert stats.records == 0


async def test_sweep_removes_expired_plain_entries_of_the_graph(engine: Engine) -> None:
    graph = engine.scope(tenant="acme", user="alice").graph
    await graph.write("note", "call back", content_type="note", ttl_ms=1)
    await graph.write("kept", "stays", content_type="note")
    await asyncio.sleep(0.01)
    assert await engine.sweep_expired() == 1
    assert await graph.list_keys() == ["kept"]
    await engine.rebuild()
    assert await graph.list_keys() == ["kept"]
