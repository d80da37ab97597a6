"""The default model's int8 products against float32: how close, how fast, on this CPU.

Embeds 300 varied texts (20 short chat texts, 100 LongMemEval questions, 130 user and 50
assistant turns of its first 60 haystacks, a fixed random sample) with the float32 products
of the packaged weights, then with each int8 variant, and prints per variant the cosine of
each text's two vectors (mean, median, 1st percentile, worst and its text) and texts/s on one
thread (best of ``--rounds`` interleaved rounds, the machine's other load evens out).

    python bench/bench_int8_products.py ../shared/eval/data/longmemeval_s_cleaned.json.xz

Variants:

- ``default``: what ``MiniLMEmbedder()`` runs here (its ``int8_kernel`` is printed);
- ``u8u8``: the widening kernel, exact on every x86-64 CPU;
- ``u8s8 unchecked``: uint8 x int8 taken whether or not its sums are exact on this CPU (the
  first int8 version; it saturates without VNNI);
- ``7-bit``: activations quantized to 0..127 (scale ``max|x| / 63``, zero point 64), so that
  no pair of uint8 x int8 products can overflow 16 bits;
- ``s8s8``: activations as int8 (-127..127, no zero point) against the int8 weights.

``--no-timing`` skips the speed rounds, for a run under an emulator (say
``qemu-x86_64 -cpu EPYC-Milan``, a CPU with AVX2 and no VNNI), where only the vectors mean
anything; ``--limit 70`` (the 20 short texts and 50 questions) keeps such a run short.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import lzma
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np

from engramdb.index import int8_matmul, minilm
from engramdb.index.minilm import MiniLMEmbedder

Rewrite = Callable[..., int8_matmul.Rewritten]
SHORT = [
    "thanks!",
    "ok",
    "yes please",
    "Lisbon",
    "user.city Lisbon",
    "I live in Porto.",
    "no",
    "hi there",
    "what's up?",
    "remind me tomorrow",
    "dog",
    "Kyoto temples",
    "my sister Maria",
    "coffee or tea?",
    "sounds good",
    "42",
    "the cat sat on the mat",
    "plan dinner",
    "current task: plan dinner",
    "bye",
]


def varied_texts(path: Path, seed: int = 0) -> list[str]:
    """The 300 texts (module docstring), in a fixed order."""
    with lzma.open(path) if path.suffix == ".xz" else path.open("rb") as handle:
        records: list[dict[str, Any]] = json.load(handle)
    rng = random.Random(seed)
    questions = [record["question"] for record in records]
    turns = [
        (turn["role"], turn["content"])
        for record in records[:60]
        for session in record["haystack_sessions"]
        for turn in session
    ]
    users = [text for role, text in turns if role == "user"]
    assistants = [text for role, text in turns if role == "assistant"]
    return SHORT + rng.sample(questions, 100) + rng.sample(users, 130) + rng.sample(assistants, 50)


def _unchecked_u8s8(model: bytes, kernel: int8_matmul.Kernel = "u8s8") -> int8_matmul.Rewritten:
    return int8_matmul.int8_matmuls(model, "u8s8")


def _seven_bit(model: bytes, kernel: int8_matmul.Kernel = "u8s8") -> int8_matmul.Rewritten:
    """The u8s8 rewrite with activations on 0..127: its shared constants changed."""
    import onnx
    from onnx import numpy_helper

    rewritten = int8_matmul.int8_matmuls(model, "u8s8")
    graph_model = onnx.load_from_string(rewritten.model)
    values: dict[str, np.ndarray[Any, Any]] = {
        "inv127": np.array(1.0 / 63.0, np.float32),
        "shift": np.array(64.0, np.float32),
        "zero": np.array(64, np.uint8),
    }
    for init in graph_model.graph.initializer:
        name = init.name.removeprefix(f"{int8_matmul._PREFIX}.")
        if name in values:
            init.CopyFrom(numpy_helper.from_array(values[name], init.name))
    return int8_matmul.Rewritten(graph_model.SerializeToString(), rewritten.int8_matmuls)


def _signed(model: bytes, kernel: int8_matmul.Kernel = "u8s8") -> int8_matmul.Rewritten:
    """The u8s8 rewrite with int8 activations: no shift, a Cast to int8, no zero point."""
    import onnx
    from onnx import helper

    rewritten = int8_matmul.int8_matmuls(model, "u8s8")
    graph_model = onnx.load_from_string(rewritten.model)
    nodes = []
    for node in graph_model.graph.node:
        if node.op_type == "Add" and node.name.endswith(".shifted"):
            continue
        if node.op_type == "Cast" and node.name.endswith(".q"):
            product = node.name.removesuffix(".q")
            node = helper.make_node(
                "Cast", [f"{product}.rounded"], [node.output[0]], name=node.name, to=3
            )
        if node.op_type == "MatMulInteger":
            del node.input[2:]
        nodes.append(node)
    del graph_model.graph.node[:]
    graph_model.graph.node.extend(nodes)
    return int8_matmul.Rewritten(graph_model.SerializeToString(), rewritten.int8_matmuls)


VARIANTS: dict[str, tuple[Rewrite | None, dict[str, Any]]] = {
    "default": (None, {}),
    "u8u8": (None, {"int8_kernel": "u8u8"}),
    "u8s8 unchecked": (_unchecked_u8s8, {}),
    "7-bit": (_seven_bit, {}),
    "s8s8": (_signed, {}),
}


@contextmanager
def _rewrite(rewrite: Rewrite | None) -> Iterator[None]:
    if rewrite is None:
        yield
        return
    with mock.patch.object(minilm, "int8_matmuls", rewrite):
        yield


async def _loaded(name: str, batch_size: int) -> MiniLMEmbedder:
    if name == "float32":
        embedder = MiniLMEmbedder(threads=1, batch_size=batch_size, precision="float32")
        await embedder.load()
        return embedder
    rewrite, settings = VARIANTS[name]
    embedder = MiniLMEmbedder(threads=1, batch_size=batch_size, **settings)
    with _rewrite(rewrite):
        await embedder.load()  # the graph is rewritten at load, under the patch
    return embedder


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="longmemeval_s_cleaned.json(.xz)")
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-timing", action="store_true")
    parser.add_argument("--limit", type=int, help="only the first N texts (short ones first)")
    parser.add_argument("--batch-size", type=int, default=minilm.DEFAULT_BATCH_SIZE)
    args = parser.parse_args()
    texts = varied_texts(args.dataset)[: args.limit]
    names = ["float32", *args.variants]
    embedders = {name: await _loaded(name, args.batch_size) for name in names}
    vectors = {name: await embedder.embed(texts) for name, embedder in embedders.items()}
    speed: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(0 if args.no_timing else args.rounds):
        for name, embedder in embedders.items():
            started = time.perf_counter()
            await embedder.embed(texts)
            speed[name].append(len(texts) / (time.perf_counter() - started))
    default = embedders["default"].int8_kernel if "default" in embedders else None
    report: dict[str, Any] = {"texts": len(texts), "default int8_kernel": default}
    for name in names:
        cosine = np.sum(vectors["float32"] * vectors[name], axis=1)
        report[name] = {
            "mean": round(float(cosine.mean()), 4),
            "median": round(float(np.median(cosine)), 4),
            "p1": round(float(np.quantile(cosine, 0.01)), 4),
            "min": round(float(cosine.min()), 4),
            "worst": texts[int(cosine.argmin())][:40],
            "texts/s": round(max(speed[name]), 1) if speed[name] else None,
            "texts/s rounds": [round(value, 1) for value in speed[name]],
        }
        print(name, json.dumps(report[name]), flush=True)
    if "default" in vectors and "u8u8" in vectors:
        gap = np.abs(vectors["default"] - vectors["u8u8"]).max()
        print(f"default vs u8u8: largest difference {gap:.2e}; kernel here {default}")
    for embedder in embedders.values():
        embedder.close()


if __name__ == "__main__":
    asyncio.run(main())
