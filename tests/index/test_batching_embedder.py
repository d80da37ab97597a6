"""``BatchingEmbedder``: concurrent calls share one call of the wrapped embedder, each caller
gets its own rows in its own order, a caller that gives up cancels nothing, and with the real
MiniLM model a batched text's vector is the one it gets alone."""

from __future__ import annotations

import asyncio
import zlib
from collections.abc import Sequence

import numpy as np
import pytest

from engramdb.core.errors import EmbedderError, InvalidValueError
from engramdb.index import BatchingEmbedder, Embedder, MiniLMEmbedder
from engramdb.index.embedder import FloatArray, l2_normalize

from .test_minilm import TEXTS


class GatedEmbedder:
    """Each text's vector is seeded by its crc32; calls are recorded and, while ``gate`` is
    clear, held before they answer."""

    model_id = "gated-v1"
    dimensions = 6

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.called = asyncio.Event()
        self.gate = asyncio.Event()
        self.gate.set()
        self.failures = 0

    def vector(self, text: str) -> FloatArray:
        rng = np.random.default_rng(zlib.crc32(text.encode()))
        row: FloatArray = l2_normalize(rng.standard_normal((1, self.dimensions)))[0]
        return row

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        self.calls.append(list(texts))
        self.called.set()
        await self.gate.wait()
        if self.failures:
            self.failures -= 1
            raise EmbedderError("the model fell over", model_id=self.model_id)
        return np.stack([self.vector(text) for text in texts])

    async def embed_one(self, text: str) -> FloatArray:
        row: FloatArray = (await self.embed([text]))[0]
        return row


def expected(inner: GatedEmbedder, texts: Sequence[str]) -> FloatArray:
    return np.stack([inner.vector(text) for text in texts])


async def test_concurrent_calls_share_one_inner_call_and_keep_their_own_rows() -> None:
    inner = GatedEmbedder()
    batching = BatchingEmbedder(inner, max_wait_s=0.05)
    assert isinstance(batching, Embedder)
    asks = [["b", "a"], ["c"], ["a", "d", "a"], ["e"]]
    results = await asyncio.gather(*(batching.embed(texts) for texts in asks))
    # One call, each distinct text once, in the order they arrived.
    assert inner.calls == [["b", "a", "c", "d", "e"]]
    assert batching.calls == 1
    for texts, rows in zip(asks, results, strict=True):
        assert rows.dtype == np.float32
        assert np.array_equal(rows, expected(inner, texts))


async def test_texts_arriving_while_a_batch_runs_make_up_the_next_batch() -> None:
    inner = GatedEmbedder()
    inner.gate.clear()
    batching = BatchingEmbedder(inner, max_wait_s=0.0)
    first = asyncio.create_task(batching.embed_one("first"))
    await inner.called.wait()
    later = [asyncio.create_task(batching.embed_one(f"later {n}")) for n in range(5)]
    await asyncio.sleep(0.01)
    assert inner.calls == [["first"]]  # one call at a time: the others wait together
    inner.gate.set()
    rows = await asyncio.gather(first, *later)
    assert inner.calls == [["first"], [f"later {n}" for n in range(5)]]
    assert np.array_equal(np.stack(rows), expected(inner, ["first"] + inner.calls[1]))


async def test_a_lone_call_at_an_idle_model_does_not_wait_for_company() -> None:
    inner = GatedEmbedder()
    batching = BatchingEmbedder(inner, max_wait_s=30.0)
    assert np.array_equal(
        await asyncio.wait_for(batching.embed_one("alone"), 5), inner.vector("alone")
    )
    # One caller asking again and again (a write's embeddings, one after another) has no
    # company to wait for either.
    for text in ("then", "and then"):
        await asyncio.wait_for(batching.embed_one(text), 5)
    # A full batch need not wait for max_wait_s.
    full = BatchingEmbedder(inner, max_wait_s=30.0, max_texts=2)
    await full.embed_one("warm")
    rows = await asyncio.wait_for(asyncio.gather(full.embed_one("p"), full.embed_one("q")), 5)
    assert inner.calls[-1] == ["p", "q"]
    assert np.array_equal(np.stack(rows), expected(inner, ["p", "q"]))


async def test_a_batch_never_holds_more_than_max_texts() -> None:
    inner = GatedEmbedder()
    batching = BatchingEmbedder(inner, max_wait_s=0.05, max_texts=3)
    asks = [[f"t{n}", f"u{n}"] for n in range(4)]
    results = await asyncio.gather(*(batching.embed(texts) for texts in asks))
    assert all(len(call) <= 3 for call in inner.calls)
    sent = sorted(text for call in inner.calls for text in call)
    assert sent == sorted(text for texts in asks for text in texts)
    for texts, rows in zip(asks, results, strict=True):
        assert np.array_equal(rows, expected(inner, texts))
    # A call larger than a batch goes to the wrapped embedder as it is.
    big = [f"big {n}" for n in range(5)]
    assert np.array_equal(await batching.embed(big), expected(inner, big))
    assert inner.calls[-1] == big


async def test_a_caller_that_gives_up_does_not_cancel_the_others() -> None:
    inner = GatedEmbedder()
    inner.gate.clear()
    batching = BatchingEmbedder(inner, max_wait_s=0.0)
    patient = asyncio.create_task(batching.embed(["shared", "mine"]))
    impatient = asyncio.create_task(batching.embed(["shared"]))
    await inner.called.wait()
    impatient.cancel()
    with pytest.raises(asyncio.CancelledError):
        await impatient
    inner.gate.set()
    assert np.array_equal(await patient, expected(inner, ["shared", "mine"]))
    # A timed-out caller (the usual way to give up) leaves the batcher working.
    inner.gate.clear()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(batching.embed_one("slow"), 0.01)
    inner.gate.set()
    assert np.array_equal(await batching.embed_one("after"), inner.vector("after"))


async def test_a_failure_reaches_every_caller_of_its_batch_and_the_next_batch_runs() -> None:
    inner = GatedEmbedder()
    inner.failures = 1
    batching = BatchingEmbedder(inner, max_wait_s=0.05)
    outcomes = await asyncio.gather(
        batching.embed_one("x"), batching.embed_one("y"), return_exceptions=True
    )
    assert all(isinstance(outcome, EmbedderError) for outcome in outcomes)
    assert np.array_equal(await batching.embed_one("x"), inner.vector("x"))


async def test_bad_input_and_empty_calls_never_reach_the_model() -> None:
    inner = GatedEmbedder()
    batching = BatchingEmbedder(inner)
    assert (await batching.embed([])).shape == (0, inner.dimensions)
    with pytest.raises(InvalidValueError):
        await batching.embed("one string")
    with pytest.raises(InvalidValueError):
        await batching.embed(["fine", 3])  # type: ignore[list-item]
    assert inner.calls == []
    with pytest.raises(ValueError, match="max_texts"):
        BatchingEmbedder(inner, max_texts=0)


async def test_minilm_vectors_batched_with_others_equal_vectors_alone(
    minilm: MiniLMEmbedder,
) -> None:
    batching = BatchingEmbedder(minilm, max_wait_s=0.05)
    # Texts of very different lengths in one call: short ones are padded to the longest.
    together = await asyncio.gather(*(batching.embed_one(text) for text in TEXTS))
    assert batching.calls == 1
    alone = np.stack([await minilm.embed_one(text) for text in TEXTS])
    assert np.allclose(np.stack(together), alone, atol=1e-5)
    assert batching.model_id == minilm.model_id
    assert batching.dimensions == minilm.dimensions
