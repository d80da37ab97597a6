"""Episodic memory end to end: memorize, remember with hybrid search, time, neighbours,
hard deletes that leave no trace in any index, and index rebuilds that rank the same."""

from __future__ import annotations

import asyncio
import sqlite3
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

import engramdb
from engramdb.core.errors import StaleVectorsError, StaleVectorsWarning, ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from engramdb.storage.sqlite.text_tokens import register_text_functions

NOW = datetime(2023, 5, 30, 10, 0, tzinfo=UTC)
TURNS = [
    ("s1", 0, "I adopted a golden retriever puppy called Max last spring."),
    ("s1", 1, "Can you suggest a good brand of kibble for him?"),
    ("s1", 2, "Thanks, I will try the salmon one."),
    ("s2", 0, "I started a new job as a nurse at the city hospital."),
    ("s2", 1, "The night shifts are exhausting but the team is great."),
    ("s3", 0, "We are planning a trip to Kyoto in the autumn."),
    ("s3", 1, "Which temples should we not miss?"),
]


async def ingest(engine: Engine, user: str = "alice") -> None:
    for days, session in enumerate(["s1", "s2", "s3"]):
        items = [
            MemoryItem(
                text=text,
                role="user",
                id=f"{session}-{turn}",
                occurred_at=NOW - timedelta(days=30 - 10 * days),
                metadata={"session_id": session, "turn": turn},
            )
            for s, turn, text in TURNS
            if s == session
        ]
        await engine.scope(tenant="acme", user=user, session=session).episodic.memorize_many(items)


def ids(items: list[MemoryItem]) -> list[str | None]:
    return [item.id for item in items]


async def test_remember_finds_a_paraphrase_across_sessions(engine: Engine) -> None:
    await ingest(engine)
    mem = engine.scope(tenant="acme", user="alice")
    hits = await mem.episodic.remember("What kind of pet does the user have?", limit=3)
    assert hits[0].id == "s1-0"
    assert hits[0].text == TURNS[0][2]
    assert hits[0].role == "user"
    assert hits[0].metadata == {"session_id": "s1", "turn": 0}
    assert hits[0].occurred_at == NOW - timedelta(days=30)
    assert 0.0 < hits[0].score <= 1.0  # type: ignore[operator]
    assert {"fused", "vector"} <= set(hits[0].score_breakdown)
    work = await mem.episodic.remember("where does she work", limit=2)
    assert work[0].id == "s2-0"


async def test_remember_is_scoped_to_the_user(engine: Engine) -> None:
    await ingest(engine)
    assert await engine.scope(tenant="acme", user="bob").episodic.remember("dog") == []
    assert await engine.scope(tenant="globex", user="alice").episodic.remember("dog") == []


async def test_since_and_until_filter_strictly(engine: Engine) -> None:
    await ingest(engine)
    mem = engine.scope(tenant="acme", user="alice")
    recent = await mem.episodic.remember("dog job trip", since=NOW - timedelta(days=15), limit=10)
    assert set(ids(recent)) <= {"s3-0", "s3-1"}
    older = await mem.episodic.remember("dog job trip", until=NOW - timedelta(days=25), limit=10)
    assert set(ids(older)) <= {"s1-0", "s1-1", "s1-2"}
    assert older


async def test_metadata_filters(engine: Engine) -> None:
    await ingest(engine)
    mem = engine.scope(tenant="acme", user="alice")
    hits = await mem.episodic.remember("dog", filters={"session_id": "s2"}, limit=10)
    assert set(ids(hits)) <= {"s2-0", "s2-1"}


async def test_a_named_time_boosts_what_happened_then(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    config = EngineConfig(embedder=embedder, search=SearchConfig(time_boost=0.5))
    async with engramdb.open(tmp_path / "t.db", config=config) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        await mem.episodic.memorize_many(
            [
                MemoryItem(
                    text="I went hiking in the hills",
                    id="old",
                    occurred_at=NOW - timedelta(days=60),
                ),
                MemoryItem(
                    text="I went hiking by the lake",
                    id="recent",
                    occurred_at=NOW - timedelta(days=6),
                ),
            ]
        )
        plain = await mem.episodic.remember("hiking", now=NOW)
        timed = await mem.episodic.remember("where did I go hiking last week?", now=NOW)
        assert timed[0].id == "recent"
        assert timed[0].score_breakdown["time"] == 1.0
        assert {i.id for i in plain} == {"old", "recent"}


async def test_neighbour_expansion_brings_the_adjacent_turn(
    tmp_path: Path, embedder: MiniLMEmbedder
) -> None:
    config = EngineConfig(embedder=embedder, search=SearchConfig(neighbours=1))
    async with engramdb.open(tmp_path / "n.db", config=config) as engine:
        await ingest(engine)
        hits = await engine.scope(tenant="acme", user="alice").episodic.remember(
            "golden retriever puppy", limit=3
        )
        assert hits[0].id == "s1-0"
        assert "s1-1" in ids(hits)


async def test_hard_delete_leaves_nothing_in_either_index(engine: Engine, db_path: Path) -> None:
    await ingest(engine)
    mem = engine.scope(tenant="acme", user="alice")
    assert "s1-0" in ids(await mem.episodic.remember("golden retriever", limit=3))
    provider = mem.episodic.provider
    record = await provider.read_record("s1-0")
    assert record is not None
    assert await provider.delete("s1-0") is True
    assert "s1-0" not in ids(await mem.episodic.remember("golden retriever", limit=10))
    with sqlite3.connect(db_path) as conn:
        fts = conn.execute("SELECT rowid FROM records_fts WHERE records_fts MATCH 'retriever'")
        assert fts.fetchall() == []
        vectors = conn.execute("SELECT count(*) FROM vectors WHERE record_id = ?", (record.id,))
        assert vectors.fetchone()[0] == 0
    index = await engine.indexer.vector_index("episodic", provider.partition)
    assert engine.indexer.embedder is not None
    query = await engine.indexer.embedder.embed_one("golden retriever")
    assert record.id not in [hit for hit, _ in index.search(query, 50)]


QUERIES = ["what pet do I have", "night shifts at work", "travel plans", "temples in Kyoto"]


async def rankings(engine: Engine) -> list[list[tuple[str | None, float | None]]]:
    mem = engine.scope(tenant="acme", user="alice")
    return [[(i.id, i.score) for i in await mem.episodic.remember(q, limit=5)] for q in QUERIES]


def stored_parts(db_path: Path) -> list[bytes]:
    with sqlite3.connect(db_path) as conn:
        return [row[0] for row in conn.execute("SELECT parts FROM vectors ORDER BY parts")]


async def test_rebuilt_indexes_rank_the_same(engine: Engine, db_path: Path) -> None:
    await ingest(engine)
    # One turn of several sentences: each sentence has a vector of its own too.
    await engine.scope(tenant="acme", user="alice", session="s3").episodic.memorize(
        MemoryItem(text="We booked the flights. The hotel is near Gion, by the temples.", id="s3-2")
    )
    # The search stores the part vectors the write left owed before it ranks.
    before = await rankings(engine)
    parts = stored_parts(db_path)
    assert sum(part is not None for part in parts) == 1
    await engine.rebuild()
    assert await rankings(engine) == before
    assert await engine.reindex() == len(TURNS) + 1
    assert await rankings(engine) == before
    with sqlite3.connect(db_path) as conn:
        register_text_functions(conn)  # the statistics' triggers call them
        conn.execute("DELETE FROM vectors")
        conn.execute("DELETE FROM records")
    await engine.rebuild()
    assert await engine.reindex() == len(TURNS) + 1
    assert await rankings(engine) == before
    assert stored_parts(db_path) == parts


async def test_another_process_writing_is_seen(
    engine: Engine, db_path: Path, embedder: MiniLMEmbedder
) -> None:
    await ingest(engine)
    mem = engine.scope(tenant="acme", user="alice")
    assert "late" not in ids(await mem.episodic.remember("violin lessons"))
    async with engramdb.open(db_path, config=EngineConfig(embedder=embedder)) as other:
        await other.scope(tenant="acme", user="alice").episodic.memorize(
            MemoryItem(text="I signed up for violin lessons", id="late")
        )
    assert ids(await mem.episodic.remember("violin lessons"))[0] == "late"


async def test_bad_input_is_typed_and_writes_nothing(engine: Engine) -> None:
    mem = engine.scope(tenant="acme", user="alice")
    with pytest.raises(ValidationError):
        await mem.episodic.remember("  ")
    with pytest.raises(ValidationError):
        await mem.episodic.remember("x", limit=0)
    with pytest.raises(ValidationError):
        await mem.episodic.memorize("just a string")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        await mem.episodic.memorize_many(
            [MemoryItem(text="a", id="same"), MemoryItem(text="b", id="same")]
        )
    with pytest.raises(ValidationError):
        MemoryItem(text="")
    assert await mem.episodic.provider.list_keys() == []


async def test_vector_indexing_is_tracked_by_memory_indexed_events(engine: Engine) -> None:
    await ingest(engine)
    query = engramdb.EventQuery(event_types=("memory.indexed",))
    indexed = await engine.events.read(query)
    written = {
        e.event_id: e.payload["key"]
        for e in await engine.events.read(engramdb.EventQuery(event_types=("memory.written",)))
    }
    assert sorted(e.payload["key"] for e in indexed) == sorted(written.values())
    assert all(e.payload["index_type"] == "vector" and e.payload["model"] for e in indexed)
    assert all(written[e.trace.causation_id or ""] == e.payload["key"] for e in indexed)
    await engine.reindex()
    assert await engine.events.count(query) == 2 * len(TURNS)


async def test_a_best_match_that_expired_after_the_index_loaded_gives_way(engine: Engine) -> None:
    await ingest(engine)
    mem = engine.scope(tenant="acme", user="alice")
    await mem.episodic.memorize(
        MemoryItem(text="What kind of pet does the user have? A dog.", id="brief", ttl_ms=300)
    )
    first = await mem.episodic.remember("What kind of pet does the user have?", limit=2)
    assert "brief" in ids(first)
    await asyncio.sleep(0.35)
    # The loaded vector index still holds the expired memory; its record is no longer live.
    after = await mem.episodic.remember("What kind of pet does the user have?", limit=2)
    assert "brief" not in ids(after)
    assert len(after) == 2
    assert after[0].id == "s1-0"


async def test_a_caller_that_gives_up_does_not_cancel_the_shared_query_embedding(
    engine: Engine,
) -> None:
    await ingest(engine)
    question = "Which temples should we visit in Kyoto?"
    patient = asyncio.create_task(engine.indexer.embed_query(question))
    impatient = asyncio.create_task(engine.indexer.embed_query(question))
    await asyncio.sleep(0)  # both now wait on the one embedding in flight
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    shared = await patient
    assert engine.indexer.embedder is not None
    assert np.array_equal(shared, await engine.indexer.embedder.embed_one(question))
    # The query still searches afterwards: the Kyoto session's turns lead, far ahead of the
    # rest (which of its two turns comes first is a near tie, not this test's concern).
    hits = await engine.scope(tenant="acme", user="alice").episodic.remember(question, limit=3)
    assert {hit.id for hit in hits[:2]} == {"s3-0", "s3-1"}


async def test_a_file_from_before_sentence_vectors_upgrades_and_reindexes(
    db_path: Path, embedder: MiniLMEmbedder
) -> None:
    config = EngineConfig(embedder=embedder)
    text = "We booked the flights to Japan. My sister Maria moved to Porto in June."
    async with engramdb.open(db_path, config=config) as engine:
        await engine.scope(tenant="acme", user="alice").episodic.memorize(MemoryItem(text=text))
    # The file as an engine before sentence vectors left it: no parts column, no migration.
    with sqlite3.connect(db_path) as conn:
        conn.execute("ALTER TABLE vectors DROP COLUMN parts")
        conn.execute("ALTER TABLE records DROP COLUMN version")
        for trigger in ("insert", "delete", "update"):
            conn.execute(f"DROP TRIGGER records_stats_{trigger}")
            conn.execute(f"DROP TRIGGER records_counts_{trigger}")
        conn.execute("DROP TABLE text_stats")
        conn.execute("DROP TABLE text_terms")
        conn.execute("DROP TABLE text_counts")
        conn.execute("DELETE FROM engram_migrations WHERE name >= '0006_part_vectors'")
    async with engramdb.open(db_path, config=config) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        assert stored_parts(db_path) == [None]
        assert [h.text for h in await mem.episodic.remember("where did my sister move")] == [text]
        assert await engine.reindex() == 1
        assert [part is not None for part in stored_parts(db_path)] == [True]
        hits = await mem.episodic.remember("where did my sister move")
        assert hits[0].text == text


async def test_sentence_vectors_can_be_turned_off(db_path: Path, embedder: MiniLMEmbedder) -> None:
    config = EngineConfig(embedder=embedder, sentence_vectors=False)
    text = "We booked the flights to Japan. My sister Maria moved to Porto in June."
    async with engramdb.open(db_path, config=config) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        await mem.episodic.memorize(MemoryItem(text=text))
        hits = await mem.episodic.remember("where did my sister move")
    assert [h.text for h in hits] == [text]
    assert stored_parts(db_path) == [None]


async def ingest_with_the_float_model(db_path: Path) -> str:
    """Fill ``db_path`` as the float32 model would have; returns that model's id."""
    async with (
        MiniLMEmbedder(threads=1, precision="float32") as old,
        engramdb.open(db_path, config=EngineConfig(embedder=old)) as engine,
    ):
        await ingest(engine)
        return old.model_id


async def test_a_model_change_is_seen_at_open_and_a_stale_reindex_fixes_it(
    db_path: Path, embedder: MiniLMEmbedder
) -> None:
    old_model = await ingest_with_the_float_model(db_path)
    assert old_model != embedder.model_id
    with pytest.warns(StaleVectorsWarning, match="engram reindex --stale") as caught:
        engine = await engramdb.open(db_path, config=EngineConfig(embedder=embedder))
    assert caught[0].filename == __file__  # the caller's line, not the library's
    async with engine:
        assert await engine.vector_counts() == {old_model: len(TURNS)}
        mem = engine.scope(tenant="acme", user="alice")
        await mem.episodic.memorize(MemoryItem(text="I took up pottery classes.", id="new"))
        assert await engine.vector_counts() == {old_model: len(TURNS), embedder.model_id: 1}
        with pytest.raises(StaleVectorsError) as raised:
            await engramdb.open(
                db_path, config=EngineConfig(embedder=embedder, on_model_change="error")
            )
        assert raised.value.details == {"model": embedder.model_id, "stored_models": [old_model]}
        assert await engine.reindex(stale_only=True) == len(TURNS)
        assert await engine.vector_counts() == {embedder.model_id: len(TURNS) + 1}
        assert await engine.reindex(stale_only=True) == 0
        hits = await mem.episodic.remember("What kind of pet does the user have?", limit=3)
        assert hits[0].id == "s1-0"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with engramdb.open(db_path, config=EngineConfig(embedder=embedder)):
            pass


async def test_opening_can_reindex_the_vectors_of_another_model(
    db_path: Path, embedder: MiniLMEmbedder
) -> None:
    await ingest_with_the_float_model(db_path)
    config = EngineConfig(embedder=embedder, on_model_change="reindex")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with engramdb.open(db_path, config=config) as engine:
            assert await engine.vector_counts() == {embedder.model_id: len(TURNS)}
            mem = engine.scope(tenant="acme", user="alice")
            work = await mem.episodic.remember("where does she work", limit=2)
            assert work[0].id == "s2-0"
