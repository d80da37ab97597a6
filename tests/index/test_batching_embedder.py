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
from engramdb.index.embedder import FloatArray, StartingEmbedder, l2_normalize

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


class StartingGated(GatedEmbedder):
    """``GatedEmbedder`` that can begin a call at once (``StartingEmbedder``): the call is
    recorded before ``start`` returns."""

    def start(self, texts: Sequence[str]) -> asyncio.Future[FloatArray]:
        self.calls.append(list(texts))
        self.called.set()
        return asyncio.ensure_future(self._answer(list(texts)))

    async def _answer(self, texts: list[str]) -> FloatArray:
        await self.gate.wait()
        return np.stack([self.vector(text) for text in texts])


async def test_start_at_an_idle_model_begins_the_call_before_it_returns() -> None:
    inner = StartingGated()
    batching = BatchingEmbedder(inner, max_wait_s=30.0)
    assert isinstance(batching, StartingEmbedder)
    started = batching.start(["b", "a", "b"])
    # Asked before the caller's next await, not on the loop's next turn.
    assert inner.calls == [["b", "a"]]
    rows = await asyncio.wait_for(started, 5)
    assert np.array_equal(rows, expected(inner, ["b", "a", "b"]))
    # Again right after (the sender still waits for company): begun at once too.
    again = batching.start(["c"])
    assert inner.calls[-1] == ["c"]
    assert np.array_equal(await again, expected(inner, ["c"]))
    assert batching.calls == 2


async def test_start_while_the_model_runs_takes_the_next_batch() -> None:
    inner = StartingGated()
    inner.gate.clear()
    batching = BatchingEmbedder(inner, max_wait_s=0.0)
    first = batching.start(["first"])
    later = [batching.start([f"later {n}"]) for n in range(3)]
    # Later callers of the same turn wait for the running call, then go together.
    assert inner.calls == [["first"]]
    inner.gate.set()
    rows = await asyncio.gather(first, *later)
    assert inner.calls == [["first"], [f"later {n}" for n in range(3)]]
    assert np.array_equal(
        np.stack([r[0] for r in rows]), expected(inner, inner.calls[0] + inner.calls[1])
    )


async def test_a_started_caller_that_gives_up_cancels_nothing() -> None:
    inner = StartingGated()
    inner.gate.clear()
    batching = BatchingEmbedder(inner, max_wait_s=0.0)
    impatient = batching.start(["shared"])
    patient = asyncio.ensure_future(batching.embed(["shared", "mine"]))
    await asyncio.sleep(0)
    impatient.cancel()
    inner.gate.set()
    assert np.array_equal(await patient, expected(inner, ["shared", "mine"]))
    assert impatient.cancelled()
    # Bad input is the future's exception, and reaches no model.
    calls = len(inner.calls)
    with pytest.raises(InvalidValueError):
        await batching.start("one string")
    assert (await batching.start([])).shape == (0, inner.dimensions)
    assert len(inner.calls) == calls


async def test_start_without_a_starting_model_is_embed() -> None:
    inner = GatedEmbedder()
    batching = BatchingEmbedder(inner, max_wait_s=30.0)
    rows = await asyncio.wait_for(batching.start(["x", "y"]), 5)
    assert inner.calls == [["x", "y"]]
    assert np.array_equal(rows, expected(inner, ["x", "y"]))
    # A failure reaches the caller.
    inner.failures = 1
    with pytest.raises(EmbedderError):
        await batching.start(["z"])


async def test_minilm_start_gives_embed_s_vectors(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, StartingEmbedder)
    texts = TEXTS[:4]
    assert np.array_equal(await minilm.start(texts), await minilm.embed(texts))
    # More texts than one batch of the model, and bad input.
    many = [f"text number {n}" for n in range(minilm.batch_size + 3)]
    assert np.array_equal(await minilm.start(many), await minilm.embed(many))
    with pytest.raises(InvalidValueError):
        await minilm.start(["fine", 3])  # type: ignore[list-item]


async def test_start_after_a_crowded_batch_waits_for_company_as_embed_does() -> None:
    inner = StartingGated()
    batching = BatchingEmbedder(inner, max_wait_s=0.05)
    await asyncio.gather(batching.embed(["a"]), batching.embed(["b"]))
    assert inner.calls == [["a", "b"]]
    # Callers just answered together ask again together: their texts meet in one batch.
    rows = await asyncio.gather(batching.start(["c"]), batching.start(["d"]))
    assert inner.calls == [["a", "b"], ["c", "d"]]
    assert np.array_equal(np.stack([r[0] for r in rows]), expected(inner, ["c", "d"]))
