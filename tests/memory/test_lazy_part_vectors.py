"""A SQLite partition large enough for a graph reads its records' part vectors as search
candidates need them, not all at load: answers are those of an index holding every part."""

from __future__ import annotations

from pathlib import Path

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from engramdb.storage.records import RecordQuery
from tests.memory.test_saved_vector_graphs import QUESTIONS, TEXTS

#: Two sentences each, so every record has part vectors.
STORIES = [f"{text} It rained the whole time and we laughed a lot." for text in TEXTS]


def config(embedder: MiniLMEmbedder) -> EngineConfig:
    return EngineConfig(embedder=embedder, search=SearchConfig(ann_threshold=40))


async def answers(engine: Engine) -> list[list[tuple[str, float]]]:
    mem = engine.scope(tenant="acme", user="alice")
    found = []
    for question in QUESTIONS:
        hits = await mem.episodic.remember(question, limit=8)
        found.append([(str(hit.text), round(hit.score or 0.0, 5)) for hit in hits])
    return found


async def test_parts_are_read_for_candidates_only_and_rank_as_when_all_are_held(
    db_path: Path, embedder: MiniLMEmbedder
) -> None:
    async with engramdb.open(db_path, config=config(embedder)) as engine:
        mem = engine.scope(tenant="acme", user="alice")
        await mem.episodic.memorize_many([MemoryItem(text=t, role="user") for t in STORIES])
    async with engramdb.open(db_path, config=config(embedder)) as engine:
        partition = engine.scope(tenant="acme", user="alice").episodic.provider.partition
        lazily = await answers(engine)
        index = await engine.indexer.vector_index("episodic", partition)
        assert index.uses_ann
        assert index.lazy_parts
        unread = len(index.parts_unknown(list(range(1, 10_000))))
        assert 0 < unread < len(STORIES)  # some still unread: only candidates were read
        everything = await engine.backend.search.part_vectors(
            RecordQuery("episodic", partition), engine.indexer.model
        )
        assert len(everything) == len(STORIES)
        index.set_parts(list(everything), list(everything.values()))
        assert index.parts_unknown(list(everything)) == []
        assert await answers(engine) == lazily
