"""``Engine.bulk_load`` on every backend: what is written inside it is stored, found and
ranked as outside it; a bad memory setting is refused before anything is written."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import engramdb
from engramdb.core.errors import InvalidValueError
from engramdb.core.intent import MemoryItem
from engramdb.engine import Engine
from tests.helpers.crash import engine_config

TEXTS = [
    "I moved to Lisbon in May and the light there is wonderful",
    "My sister Ana plays the cello in a quartet",
    "We adopted a beagle named Rex last spring",
    "I work at Acme as a welder on the night shift",
    "The bakery on our street sells a great sourdough",
]


@pytest.fixture
async def engine(target: str) -> AsyncIterator[Engine]:
    async with engramdb.open(target, config=engine_config()) as opened:
        yield opened


async def ranked(engine: Engine, tenant: str, question: str) -> list[str]:
    hits = await engine.scope(tenant=tenant, user="u").episodic.remember(question, limit=5)
    return [str(hit.text) for hit in hits]


async def test_memories_loaded_in_bulk_are_found_and_ranked_as_written_one_by_one(
    engine: Engine,
) -> None:
    async with engine.bulk_load(index_memory_mb=64):
        await engine.scope(tenant="bulk", user="u").episodic.memorize_many(
            [MemoryItem(text=text, role="user") for text in TEXTS]
        )
    for text in TEXTS:
        await engine.scope(tenant="plain", user="u").episodic.memorize(
            MemoryItem(text=text, role="user")
        )
    for question in ("where did I move?", "what is the dog called?", "cello"):
        assert await ranked(engine, "bulk", question) == await ranked(engine, "plain", question)
    assert len(await ranked(engine, "bulk", "Lisbon")) >= 1


@pytest.mark.parametrize(
    "memory",
    [0, -1, True, 1.5, "2GB", None, 2_097_152, pytest.param(10**5000, id="5001-digits")],
)
async def test_a_memory_setting_that_is_not_a_positive_whole_number_is_refused(
    engine: Engine, memory: object
) -> None:
    before = await engine.events.count()
    with pytest.raises(InvalidValueError, match="index_memory_mb"):
        async with engine.bulk_load(index_memory_mb=memory):  # type: ignore[arg-type]
            await engine.scope(tenant="bulk", user="u").episodic.memorize(
                MemoryItem(text="never written", role="user")
            )
    assert await engine.events.count() == before


def test_the_blocking_twin_loads_and_refuses_alike(target: str) -> None:
    with engramdb.open_sync(target, config=engine_config()) as engine:
        with engine.bulk_load(index_memory_mb=64):
            engine.scope(tenant="bulk", user="u").episodic.memorize_many(
                [MemoryItem(text=text, role="user") for text in TEXTS]
            )
        hits = engine.scope(tenant="bulk", user="u").episodic.remember("Lisbon", limit=5)
        assert "Lisbon" in str(hits[0].text)
        with pytest.raises(InvalidValueError), engine.bulk_load(index_memory_mb=0):
            pass
