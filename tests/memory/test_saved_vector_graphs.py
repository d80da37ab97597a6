"""A reopened SQLite store searches with the HNSW graph it saved beside the database file: the
same answers as a graph built afresh, what was written or deleted since seen, and a missing,
damaged or foreign graph only built again. Real model (MiniLM) vectors throughout."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path

import pytest

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from engramdb.providers.indexing import STALE_AFTER_S

PLACES = ["Lisbon", "Oslo", "Kyoto", "Lima", "Accra", "Perth", "Quebec", "Tunis", "Hanoi", "Bern"]
HOBBIES = ["chess", "rowing", "pottery", "salsa", "birding", "climbing", "baking", "sailing"]
#: 80 memories: a graph is used above 40 vectors.
TEXTS = [
    f"In {place} I spent the weekend on {hobby} with my cousin."
    for place in PLACES
    for hobby in HOBBIES
]
QUESTIONS = [
    "where did I go rowing?",
    "who did I bake with in Kyoto?",
    "climbing trips",
    "what did I do in Bern?",
    "salsa dancing weekend",
]


def config(embedder: MiniLMEmbedder, *, save: bool = True) -> EngineConfig:
    return EngineConfig(
        embedder=embedder, search=SearchConfig(ann_threshold=40, save_graphs=save, mode="vector")
    )


async def answers(engine: Engine) -> list[list[tuple[str, float]]]:
    mem = engine.scope(tenant="acme", user="alice")
    found = []
    for question in QUESTIONS:
        hits = await mem.episodic.remember(question, limit=8)
        found.append([(hit.text, round(hit.score or 0.0, 4)) for hit in hits])
    return found


async def fresh_answers(path: Path, embedder: MiniLMEmbedder) -> list[list[tuple[str, float]]]:
    """The answers of a graph built afresh (nothing saved is read or written)."""
    async with engramdb.open(path, config=config(embedder, save=False)) as engine:
        return await answers(engine)


async def partition_index_uses_graph(engine: Engine) -> bool:
    mem = engine.scope(tenant="acme", user="alice")
    index = await engine.indexer.vector_index("episodic", mem.episodic.provider.partition)
    return index.uses_ann


@pytest.fixture
async def store(db_path: Path, embedder: MiniLMEmbedder) -> Path:
    """A store of TEXTS whose graph was built by a search and saved."""
    async with engramdb.open(db_path, config=config(embedder)) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        await mem.episodic.memorize_many([MemoryItem(text=t, role="user") for t in TEXTS])
        assert await partition_index_uses_graph(engine)
    return db_path


def spoil(folder: Path, damage: str) -> None:
    if damage == "missing":
        shutil.rmtree(folder)
        return
    for path in folder.iterdir():
        size = path.stat().st_size
        path.write_bytes(
            os.urandom(size) if damage == "garbage" else path.read_bytes()[: size // 2]
        )


def manifests(path: Path) -> list[Path]:
    return sorted(Path(f"{path}.vectors").glob("*.manifest"))


async def test_a_reopened_store_answers_as_a_fresh_build_without_building(
    store: Path, embedder: MiniLMEmbedder
) -> None:
    (manifest,) = manifests(store)
    before = manifest.read_bytes()
    async with engramdb.open(store, config=config(embedder)) as engine:
        reopened = await answers(engine)
        assert await partition_index_uses_graph(engine)
    # Loaded and found current: nothing built, nothing saved again.
    assert manifest.read_bytes() == before
    assert reopened == await fresh_answers(store, embedder)
    assert reopened[0][0][0].startswith("In ")


async def test_writes_and_deletes_after_the_save_are_seen(
    store: Path, embedder: MiniLMEmbedder
) -> None:
    # Another run, which keeps no graph, writes and deletes after the save.
    async with engramdb.open(store, config=config(embedder, save=False)) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        new = await mem.episodic.memorize(
            MemoryItem(text="In Reykjavik I went rowing on the harbour at dawn.", role="user")
        )
        rowing = [t for t in TEXTS if "rowing" in t]
        for hit in await mem.episodic.remember("rowing", limit=40):
            if hit.text in rowing[:4]:
                assert hit.id is not None
                assert await mem.episodic.provider.delete(hit.id)
    (manifest,) = manifests(store)
    before = manifest.read_bytes()
    async with engramdb.open(store, config=config(embedder)) as engine:
        reopened = await answers(engine)
        mem = engine.scope(tenant="acme", user="alice")
        top = await mem.episodic.remember("rowing on the harbour in Reykjavik", limit=3)
        assert top[0].id == new.id
    texts = {text for question in reopened for text, _ in question}
    assert not texts & set(rowing[:4])
    assert "In Reykjavik I went rowing on the harbour at dawn." in texts
    assert reopened == await fresh_answers(store, embedder)
    # The patched graph was saved on close.
    assert manifest.read_bytes() != before


@pytest.mark.parametrize("damage", ["garbage", "truncated", "missing", "foreign"])
async def test_a_damaged_or_foreign_graph_is_rebuilt(
    store: Path, embedder: MiniLMEmbedder, tmp_path: Path, damage: str
) -> None:
    folder = Path(f"{store}.vectors")
    expected = await fresh_answers(store, embedder)
    if damage != "foreign":
        spoil(folder, damage)
    else:
        # The graph of another store, of the same partition, saved under the same name.
        other = tmp_path / "other.db"
        async with engramdb.open(other, config=config(embedder)) as engine:
            mem = engine.scope(tenant="acme", user="alice")
            await mem.episodic.memorize_many(
                [
                    MemoryItem(text=f"Shopping list {n}: eggs, milk and {n} pears.")
                    for n in range(60)
                ]
            )
            assert await partition_index_uses_graph(engine)
        shutil.rmtree(folder)
        shutil.copytree(Path(f"{other}.vectors"), folder)
    async with engramdb.open(store, config=config(embedder)) as engine:
        assert await answers(engine) == expected
    # Built again and saved: the next open loads it.
    (manifest,) = manifests(store)
    before = manifest.read_bytes()
    async with engramdb.open(store, config=config(embedder)) as engine:
        assert await answers(engine) == expected
    assert manifest.read_bytes() == before


async def test_a_store_copied_without_its_graph_and_rebuilt_answers_the_same(
    store: Path, embedder: MiniLMEmbedder, tmp_path: Path
) -> None:
    expected = await fresh_answers(store, embedder)
    copy = tmp_path / "copy.db"
    shutil.copyfile(store, copy)
    async with engramdb.open(copy, config=config(embedder)) as engine:
        assert await answers(engine) == expected
        await engine.rebuild()
        assert await answers(engine) == expected
    async with engramdb.open(store, config=config(embedder)) as engine:
        await engine.rebuild()
        assert await answers(engine) == expected
    assert manifests(copy)


async def test_a_graph_dropped_for_another_process_write_is_patched_on_reload(
    store: Path, embedder: MiniLMEmbedder
) -> None:
    text = "In Reykjavik I went rowing on the harbour at dawn."
    async with engramdb.open(store, config=config(embedder)) as reader:
        await answers(reader)
        mem = reader.scope(tenant="acme", user="alice")
        index = await reader.indexer.vector_index("episodic", mem.episodic.provider.partition)
        async with engramdb.open(store, config=config(embedder, save=False)) as writer:
            other = writer.scope(tenant="acme", user="alice")
            new = await other.episodic.memorize(MemoryItem(text=text, role="user"))
        await asyncio.sleep(STALE_AFTER_S * 2)
        top = await mem.episodic.remember("rowing on the harbour in Reykjavik", limit=3)
        assert top[0].id == new.id
        reloaded = await reader.indexer.vector_index("episodic", mem.episodic.provider.partition)
        # A new index over the same graph, patched, not a graph built again.
        assert reloaded is not index
        assert reloaded.saved_graph() is not None
        assert reloaded._ann is index._ann
        after = await answers(reader)
    assert after == await fresh_answers(store, embedder)


async def test_unsaved_changes_of_a_dropped_graph_are_still_saved_on_close(
    store: Path, embedder: MiniLMEmbedder
) -> None:
    text = "In Reykjavik I went rowing on the harbour at dawn."
    (manifest,) = manifests(store)
    before = manifest.read_bytes()
    async with engramdb.open(store, config=config(embedder)) as reader:
        mem = reader.scope(tenant="acme", user="alice")
        await answers(reader)
        await mem.episodic.memorize(MemoryItem(text=text, role="user"))
        # Another process's write elsewhere drops this process's indexes.
        async with engramdb.open(store, config=config(embedder, save=False)) as writer:
            await writer.scope(tenant="acme", user="bob").episodic.memorize(
                MemoryItem(text="Bob's note.", role="user")
            )
        await asyncio.sleep(STALE_AFTER_S * 2)
        reloaded = await reader.indexer.vector_index("episodic", mem.episodic.provider.partition)
        assert reloaded.unsaved
    assert manifest.read_bytes() != before
    async with engramdb.open(store, config=config(embedder)) as engine:
        top = await engine.scope(tenant="acme", user="alice").episodic.remember(text, limit=1)
        assert top[0].text == text
    # Loaded as saved: nothing to patch, nothing saved again.
    after = manifest.read_bytes()
    async with engramdb.open(store, config=config(embedder)) as engine:
        await answers(engine)
    assert manifest.read_bytes() == after
