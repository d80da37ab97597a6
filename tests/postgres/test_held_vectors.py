"""A PostgreSQL partition small enough to be searched exactly is searched from vectors the
process holds (``providers.held_vectors``): it ranks as the database's own search does, and
follows every write, another engine's included, before each search — key by key from the
tenant's event log, or by loading afresh when the log says more than it can follow."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from engramdb.index.vector_index import VectorIndex
from engramdb.orchestrator.episodic import EPISODIC_SPEC
from engramdb.providers import held_vectors
from engramdb.storage.postgres.search import PostgresSearch
from engramdb.storage.records import RecordQuery
from tests.postgres.database import empty_database

SCOPE = {"tenant": "acme", "user": "alice"}
TURNS = (
    "I repaired the garden fence with my neighbour on Saturday.",
    "My daughter started piano lessons at the music school.",
    "We booked a cabin by the lake for the first week of August.",
)
NEW = "The dentist moved my appointment to Tuesday morning."
ASKED = "when do I see the dentist?"
EPISODES = RecordQuery(EPISODIC_SPEC.namespace, None)


@pytest.fixture
async def engines(embedder: MiniLMEmbedder) -> AsyncIterator[tuple[Engine, Engine]]:
    """A writer and a reader on one database, each with its own pool (as two processes)."""
    url = empty_database()
    vectors_only = EngineConfig(embedder=embedder, search=SearchConfig(mode="vector"))
    async with (
        engramdb.open(url, config=EngineConfig(embedder=embedder)) as writer,
        engramdb.open(url, config=vectors_only) as reader,
    ):
        for turn in TURNS:
            await _memorize(writer, MemoryItem(text=turn, role="user"))
        yield writer, reader


async def _memorize(engine: Engine, item: MemoryItem, scope: dict[str, str] = SCOPE) -> None:
    """``memorize`` through ``engine``, and the vector write it queued committed (a read of
    its own comes after it): another engine sees a lone turn's vector once that is, just after
    ``memorize`` returns, and until then finds the turn by full text only."""
    await engine.scope(**scope).episodic.memorize(item)
    await engine.backend.scan(EPISODES)


def _held(engine: Engine, user: str = "alice") -> VectorIndex | None:
    slot = (EPISODIC_SPEC.namespace, Scope(tenant="acme", user=user))
    return engine.indexer._indexes.get(slot)


async def _texts(
    engine: Engine, prompt: str, limit: int = 3, scope: dict[str, str] = SCOPE
) -> list[str]:
    hits = await engine.scope(**scope).episodic.remember(prompt, limit=limit)
    return [hit.text for hit in hits]


async def test_another_engines_writes_are_followed_key_by_key(
    engines: tuple[Engine, Engine],
) -> None:
    writer, reader = engines
    assert NEW not in await _texts(reader, ASKED)
    index = _held(reader)
    assert index is not None
    assert len(index) == len(TURNS)
    await _memorize(writer, MemoryItem(text=NEW, role="user"))
    # No wait: the next search reads the log first.
    assert (await _texts(reader, ASKED))[0] == NEW
    assert _held(reader) is index
    assert len(index) == len(TURNS) + 1
    (record,) = [r for r in await writer.backend.scan(EPISODES) if NEW in (r.text or "")]
    assert await writer.scope(**SCOPE).episodic.provider.delete(record.key)
    assert NEW not in await _texts(reader, ASKED, limit=10)
    assert _held(reader) is index


async def test_a_key_written_again_is_found_by_its_new_text(
    engines: tuple[Engine, Engine],
) -> None:
    writer, reader = engines
    await _memorize(writer, MemoryItem(text=NEW, role="user", id="appointment"))
    assert (await _texts(reader, ASKED))[0] == NEW
    later = "The plumber comes on Friday to fix the kitchen sink."
    await _memorize(writer, MemoryItem(text=later, role="user", id="appointment"))
    assert (await _texts(reader, "who fixes the kitchen sink?"))[0] == later
    assert NEW not in await _texts(reader, ASKED, limit=10)


async def test_own_writes_keep_the_index(engines: tuple[Engine, Engine]) -> None:
    _, reader = engines
    await _texts(reader, ASKED)
    index = _held(reader)
    await reader.scope(**SCOPE).episodic.memorize(MemoryItem(text=NEW, role="user"))
    assert (await _texts(reader, ASKED))[0] == NEW
    assert _held(reader) is index


async def test_held_vectors_rank_as_the_database_does(embedder: MiniLMEmbedder) -> None:
    url = empty_database()
    async with (
        engramdb.open(url, config=EngineConfig(embedder=embedder)) as here,
        engramdb.open(url, config=EngineConfig(embedder=embedder)) as there,
    ):
        there.indexer.held = None  # the database's own exact search
        mem = here.scope(**SCOPE).episodic
        for turn in (*TURNS, NEW, "The dentist said my teeth look fine."):
            await mem.memorize(MemoryItem(text=turn, role="user"))
        for prompt in (ASKED, "piano", "what did we fix on the weekend?", "lake holiday"):
            ours = await here.scope(**SCOPE).episodic.remember(prompt, limit=5)
            theirs = await there.scope(**SCOPE).episodic.remember(prompt, limit=5)
            assert [h.key for h in ours] == [h.key for h in theirs]
            for a, b in zip(ours, theirs, strict=True):
                assert a.score == pytest.approx(b.score, abs=1e-5)
        assert _held(here) is not None
        assert _held(there) is None


async def test_more_changes_than_it_follows_load_the_partition_afresh(
    engines: tuple[Engine, Engine], monkeypatch: pytest.MonkeyPatch
) -> None:
    writer, reader = engines
    await _texts(reader, ASKED)
    index = _held(reader)
    monkeypatch.setattr(held_vectors, "CHANGES_READ", 3)
    for n in range(3):
        await _memorize(writer, MemoryItem(text=f"Note {n}: the car needs new tyres.", role="user"))
    await _memorize(writer, MemoryItem(text=NEW, role="user"))
    assert (await _texts(reader, ASKED))[0] == NEW
    reloaded = _held(reader)
    assert reloaded is not None
    assert reloaded is not index
    assert len(reloaded) == len(TURNS) + 4


async def test_a_partition_too_large_to_hold_is_searched_by_the_database(
    engines: tuple[Engine, Engine],
) -> None:
    writer, reader = engines
    search = reader.backend.search
    assert isinstance(search, PostgresSearch)
    search.exact_nearest_up_to = len(TURNS) - 1
    await _memorize(writer, MemoryItem(text=NEW, role="user"))
    assert (await _texts(reader, ASKED))[0] == NEW
    assert _held(reader) is None


async def test_a_filtered_search_is_the_databases(engines: tuple[Engine, Engine]) -> None:
    writer, reader = engines
    await _memorize(writer, MemoryItem(text=NEW, role="user", metadata={"topic": "health"}))
    hits = await reader.scope(**SCOPE).episodic.remember(ASKED, filters={"topic": "health"})
    assert [hit.text for hit in hits] == [NEW]
    assert _held(reader) is None


async def test_the_least_recently_searched_partition_leaves_first(
    engines: tuple[Engine, Engine],
) -> None:
    writer, reader = engines
    assert reader.indexer.held is not None
    reader.indexer.held._budget = len(TURNS) + 1
    bob = {"tenant": "acme", "user": "bob"}
    for turn in TURNS[:2]:
        await _memorize(writer, MemoryItem(text=turn, role="user"), bob)
    await _texts(reader, ASKED)
    assert _held(reader) is not None
    assert await _texts(reader, "piano lessons", scope=bob)
    assert _held(reader, "bob") is not None
    assert _held(reader) is None
    # Dropped is not lost: searched again, the partition loads afresh.
    await _memorize(writer, MemoryItem(text=NEW, role="user"))
    assert (await _texts(reader, ASKED))[0] == NEW


async def test_a_kept_record_hidden_or_expired_elsewhere_is_not_returned(
    engines: tuple[Engine, Engine],
) -> None:
    writer, reader = engines
    mem = writer.scope(**SCOPE).episodic
    await _memorize(writer, MemoryItem(text=NEW, role="user", id="appointment"))
    assert (await _texts(reader, ASKED))[0] == NEW  # its record is now kept by the reader
    assert await mem.provider.forget("appointment", mode="soft")
    assert NEW not in await _texts(reader, ASKED, limit=10)
    assert await mem.provider.restore("appointment")
    assert (await _texts(reader, ASKED))[0] == NEW
    brief = "The dentist called: the appointment is cancelled for today."
    await _memorize(writer, MemoryItem(text=brief, role="user", ttl_ms=400))
    assert brief in await _texts(reader, "did the dentist call?", limit=10)
    await asyncio.sleep(0.5)
    assert brief not in await _texts(reader, "did the dentist call?", limit=10)


async def test_records_read_before_a_change_was_followed_are_not_kept(
    engines: tuple[Engine, Engine],
) -> None:
    writer, reader = engines
    held = reader.indexer.held
    assert held is not None
    await _memorize(writer, MemoryItem(text=NEW, role="user", id="appointment"))
    assert (await _texts(reader, ASKED))[0] == NEW
    slot = (EPISODIC_SPEC.namespace, Scope(tenant="acme", user="alice"))
    (old,) = [r for r in await reader.backend.scan(EPISODES) if r.key == "appointment"]
    assert old.id is not None
    began = held.generation(slot)  # a search reads ``old`` ...
    later = "The plumber comes on Friday to fix the kitchen sink."
    await _memorize(writer, MemoryItem(text=later, role="user", id="appointment"))
    assert (await _texts(reader, "who fixes the kitchen sink?"))[0] == later
    # ... and would keep it only now, after another search followed the change.
    held.keep(slot, [old], began)
    assert held.records(slot, [old.id], utc_now()) == {}
    assert (await _texts(reader, "who fixes the kitchen sink?"))[0] == later


async def test_many_searches_at_once_find_the_same(engines: tuple[Engine, Engine]) -> None:
    writer, reader = engines
    await _texts(reader, ASKED)
    await _memorize(writer, MemoryItem(text=NEW, role="user"))
    # Beyond a few at once, the database answers: every one finds the write all the same.
    found = await asyncio.gather(*(_texts(reader, ASKED) for _ in range(12)))
    assert all(texts[0] == NEW for texts in found)
