"""Clustering of the facts no category holds: deterministic groups by embedding similarity,
named by their words, or by the chat model when one is configured."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import numpy as np
import pytest

import engramdb
from engramdb.core.errors import ValidationError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine, EngineConfig, ScopedMemory
from engramdb.formation.clusters import group, word_names
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.llm.client import LLMConfig
from tests.helpers.openai_server import FakeChatServer, Reply, fake, server

__all__ = ["fake", "server"]

OUTDOORS = (
    "The user enjoys hiking in the mountains.",
    "The user goes camping in the forest every summer.",
    "The user loves trail running on mountain paths.",
)
COOKING = (
    "The user's favourite food is sushi.",
    "The user cooks Italian pasta every Sunday.",
    "The user bakes sourdough bread at home.",
)
COMPUTERS = ("The user's laptop is a ThinkPad.", "The user writes Python code for work.")


def test_group_is_deterministic_and_keeps_order() -> None:
    vectors = np.array([[1, 0, 0], [0, 1, 0], [0.9, 0.1, 0], [0, 0.8, 0.2], [0, 0, 1]])
    assert group(vectors, 0.8) == [[0, 2], [1, 3], [4]]
    assert group(vectors, 0.8) == group(vectors.copy(), 0.8)
    assert group(vectors, -1.0) == [[0, 1, 2, 3, 4]]
    assert group(vectors, 1.0) == [[0], [1], [2], [3], [4]]
    with pytest.raises(ValidationError):
        group(vectors, 1.5)


def test_word_names_pick_distinctive_words() -> None:
    names = word_names([OUTDOORS[:2], ["The user hikes in the mountains", *COOKING[1:]]])
    assert names[0].split()[0] == "camping"  # "mountains" is in both groups: not distinctive
    assert "mountains" not in names[1]
    assert word_names([["The user is the user"]]) == ["misc"]


async def memorize(mem: ScopedMemory) -> None:
    for text in OUTDOORS + COOKING + COMPUTERS:
        await mem.semantic.memorize(MemoryItem(text=text))
    # A formed fact has a category: it is not clustered.
    await mem.ingest([{"role": "user", "content": "I live in Lisbon and I love hiking."}])


def members(mem_clusters: list[tuple[str, ...]]) -> set[frozenset[str]]:
    return {frozenset(texts) for texts in mem_clusters}


async def test_uncategorised_facts_cluster_by_meaning(any_engine: Engine) -> None:
    mem = any_engine.scope(user="ana")
    assert (await mem.clusters()).clusters == []
    await memorize(mem)
    found = await mem.clusters()
    assert found.names == "words"
    assert members([c.texts for c in found.clusters]) == {
        frozenset(OUTDOORS),
        frozenset(COOKING),
        frozenset(COMPUTERS),
    }
    assert [len(c.keys) for c in found.clusters] == [3, 3, 2]  # biggest first
    by_texts = {frozenset(c.texts): c.name for c in found.clusters}
    assert by_texts[frozenset(COMPUTERS)] == "code laptop python"
    assert await mem.clusters() == found  # the same facts, the same clusters
    singles = await mem.clusters(threshold=0.99)
    assert len(singles.clusters) == 8


@pytest.fixture
async def llm_engine(
    tmp_path: Path, embedder: MiniLMEmbedder, fake: FakeChatServer
) -> AsyncIterator[Engine]:
    config = EngineConfig(
        embedder=embedder, llm=LLMConfig(base_url=fake.base_url, model="m", json_attempts=1)
    )
    async with engramdb.open(tmp_path / "e.db", config=config) as opened:
        yield opened


async def test_the_model_names_the_clusters(llm_engine: Engine, fake: FakeChatServer) -> None:
    mem = llm_engine.scope(user="ana")
    fake.queue("chat", Reply.ok("{}"), Reply.ok("{}"), Reply.ok("{}"))  # ingest: nothing
    await memorize(mem)
    fake.reset()
    fake.queue("chat", Reply.ok('{"names": ["Outdoors", "Food and cooking", "Computers"]}'))
    named = await mem.clusters()
    assert named.names == "llm"
    shown = fake.asked("chat")[0].body["messages"][1]["content"]
    # Names are given in the order the clusters were shown.
    assert [c.name for c in named.clusters] == ["Outdoors", "Food and cooking", "Computers"]
    for n, cluster in enumerate(named.clusters):
        assert f"Cluster {n + 1}:\n- {cluster.texts[0]}" in shown


async def test_a_model_that_cannot_name_leaves_word_names(
    llm_engine: Engine, fake: FakeChatServer
) -> None:
    mem = llm_engine.scope(user="ana")
    fake.queue("chat", Reply.ok("{}"), Reply.ok("{}"), Reply.ok("{}"))
    await memorize(mem)
    fake.reset()
    fake.queue("chat", Reply.ok('{"names": ["Outdoors"]}'))
    named = await mem.clusters()
    assert named.names == "words"
    assert named.notes == [
        "the chat model did not name the clusters (LLMError: the chat model named 1 of 3 "
        "clusters); they are named by their words"
    ]
    assert "code laptop python" in [c.name for c in named.clusters]


async def test_without_an_embedder_clustering_is_refused(tmp_path: Path) -> None:
    async with engramdb.open(tmp_path / "e.db", config=EngineConfig(embedder=None)) as opened:
        with pytest.raises(ValidationError, match="configure an embedder"):
            await opened.scope(user="ana").clusters()
