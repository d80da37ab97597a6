"""A lone memorize sets the model on its text before the write is prepared
(``Indexer.foresee``): the model is asked once, the stored vector is the text's own, and a
write refused after the model began stores nothing and holds up nothing after it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

import engramdb
from engramdb.core.errors import ValueTooLargeError
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.index.embedder import FloatArray, WrappingEmbedder, start_embedding
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.episodic import EPISODIC_SPEC
from engramdb.orchestrator.tokens import count_tokens_many
from engramdb.storage.records import RecordQuery

SCOPE = {"tenant": "acme", "user": "alice"}
TURN = "We sailed to Hydra in June. The ferry was late. My brother lost his hat overboard."
EPISODES = RecordQuery(EPISODIC_SPEC.namespace, None)


class Counted(WrappingEmbedder[MiniLMEmbedder]):
    """The real model, noting every text it is handed."""

    def __init__(self, inner: MiniLMEmbedder) -> None:
        super().__init__(inner)
        self.texts: list[str] = []

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        return await self.start(texts)

    def start(self, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
        self.texts += texts
        return start_embedding(self.inner, texts)


async def test_a_lone_memorize_asks_the_model_once_before_counting_its_tokens(
    target: str, embedder: MiniLMEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Counted(embedder)

    def noted(texts: Sequence[str]) -> list[int]:
        model.texts.append("(counted)")
        return count_tokens_many(texts)

    monkeypatch.setattr("engramdb.orchestrator.plugin.count_tokens_many", noted)
    async with engramdb.open(target, config=EngineConfig(embedder=model)) as engine:
        mem = engine.scope(**SCOPE)
        await mem.episodic.memorize(MemoryItem(text=TURN, role="user"))
        assert model.texts == [f"user: {TURN}", "(counted)"]
        (record,) = await engine.backend.scan(EPISODES)
        ids, blobs = await engine.backend.search.vectors(EPISODES, engine.indexer.model)
        expected = await engine.indexer.embed_records(EPISODIC_SPEC, [record], parts=False)
        assert expected is not None
        assert dict(zip(ids, blobs, strict=True)) == {record.id: expected[0][0]}


async def test_a_write_refused_after_the_model_began_stores_nothing(
    target: str, embedder: MiniLMEmbedder
) -> None:
    model = Counted(embedder)
    async with engramdb.open(target, config=EngineConfig(embedder=model)) as engine:
        mem = engine.scope(**SCOPE)
        # Under the item's character limit, over the stored value's byte limit: refused by
        # the write, after the model was set on the text.
        with pytest.raises(ValueTooLargeError):
            await mem.episodic.memorize(MemoryItem(text="Ça été. " * 120_000, role="user"))
        assert len(model.texts) == 1
        assert await engine.backend.scan(EPISODES) == []
        for n in range(10):
            await mem.episodic.memorize(MemoryItem(text=f"{TURN} Day {n}.", role="user"))
        stored = await engine.backend.scan(EPISODES)
        ids, _ = await engine.backend.search.vectors(EPISODES, engine.indexer.model)
        assert sorted(ids) == sorted(r.id for r in stored if r.id is not None)
        assert len(ids) == 10
        assert len(model.texts) == 11
