"""The model's lane for work no caller waits for (``MiniLMEmbedder.embed_aside``): the vectors
``embed`` gives, on a thread of its own at the lowest priority, never ahead of a call."""

from __future__ import annotations

import asyncio
import os
import sys
import threading

import numpy as np
import pytest

from engramdb.core.errors import EmbedderError, InvalidValueError
from engramdb.index.batching import BatchingEmbedder, aside_lane
from engramdb.index.embedder import AsideEmbedder, CachedEmbedder
from engramdb.index.minilm import MiniLMEmbedder
from tests.index.test_minilm import TEXTS

LONG = "a long conversation turn about many different things, one after another " * 12


async def test_the_aside_lane_gives_the_vectors_embed_gives(embedder: MiniLMEmbedder) -> None:
    texts = [*TEXTS, LONG, *TEXTS[::-1]]
    assert np.array_equal(await embedder.embed_aside(texts), await embedder.embed(texts))
    assert (await embedder.embed_aside([])).shape == (0, 384)


@pytest.mark.skipif(sys.platform != "linux", reason="a nice value per thread is Linux's")
async def test_the_aside_lane_runs_at_the_lowest_priority(embedder: MiniLMEmbedder) -> None:
    await embedder.embed_aside(["warm"])
    aside = [t for t in threading.enumerate() if t.name.startswith("engram-minilm-aside")]
    model = [t for t in threading.enumerate() if t.name.startswith("engram-minilm_")]
    assert len(aside) == 1
    assert aside[0].native_id is not None
    assert os.getpriority(os.PRIO_PROCESS, aside[0].native_id) == 19
    # The model's own thread, which callers wait for, keeps the process's priority.
    assert model
    assert all(
        os.getpriority(os.PRIO_PROCESS, t.native_id or 0) == os.getpriority(os.PRIO_PROCESS, 0)
        for t in model
    )


async def test_a_call_never_waits_for_the_aside_lane(embedder: MiniLMEmbedder) -> None:
    await embedder.embed_aside(["warm"])
    gate = threading.Event()
    # The lane's thread held up by work that has not ended.
    stuck = asyncio.get_running_loop().run_in_executor(embedder._aside, gate.wait)
    try:
        alone = await asyncio.wait_for(embedder.embed([LONG]), 60)
    finally:
        gate.set()
        await stuck
    assert np.array_equal(alone, await embedder.embed_aside([LONG]))


async def test_bad_input_and_a_closed_embedder_are_refused_on_the_aside_lane() -> None:
    embedder = MiniLMEmbedder()
    with pytest.raises(InvalidValueError):
        await embedder.embed_aside(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidValueError):
        await embedder.embed_aside("a bare string is not a list of texts")
    await embedder.aclose()
    with pytest.raises(EmbedderError, match="closed"):
        await embedder.embed_aside(["hello"])


def test_the_lane_is_found_through_batching_only(embedder: MiniLMEmbedder) -> None:
    assert isinstance(embedder, AsideEmbedder)
    assert aside_lane(embedder) is embedder
    assert aside_lane(BatchingEmbedder(embedder)) is embedder
    # Another wrapper may note, limit or change calls: work is not sent around it.
    assert aside_lane(CachedEmbedder(embedder)) is None
    assert aside_lane(BatchingEmbedder(CachedEmbedder(embedder))) is None
