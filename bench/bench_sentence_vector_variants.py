"""Vector-only recall of other ways to get a turn's vectors with less model work, on LongMemEval_S.

Engram embeds a turn twice over: the whole text (``user: …``) and each of its sentences
(``index/sentences.py``), and scores a turn by its best vector. The sentences are most of a
write's model work. This measures, on the first ``--haystacks`` haystacks of
``longmemeval_s_cleaned.json.xz`` (user turns, one scope per haystack, LongMemEval's
``recall_all@k`` and ``ndcg_any@10`` of the turns ranked by vector score alone, no BM25):

* ``whole``: the whole-text vector alone (no sentences);
* ``whole+sentences``: what Engram does: each turn scored by its best of the whole-text vector
  and its sentences' vectors, each sentence embedded on its own;
* ``whole+pooled``: the sentences' vectors pooled from the whole text's one model run ("late
  chunking": the mean of each sentence's token vectors within the turn), so the sentences cost
  no model run of their own;
* ``pooled+context``: the same, with the ``[CLS]``, ``[SEP]`` and speaker tokens in each mean;
* ``mean+sentences``: the sentences embedded on their own and the whole-text vector replaced by
  the normalized mean of the sentences' vectors (one-sentence turns keep their own), so the
  whole text costs no model run;
* ``mean``: that mean alone.

Run: ``python bench/bench_sentence_vector_variants.py --haystacks 100`` (about 12 minutes on two
cores). Prints a table and writes JSON to ``bench/results/``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from bench_common import save_result
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from engramdb.evaluation.datasets import Turn, load_dataset
from engramdb.evaluation.metrics import ndcg_any_at_k, recall_all_at_k
from engramdb.index.contextual import episode_key
from engramdb.index.embedder import l2_normalize
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.sentences import sentence_keys

DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")
VARIANTS = (
    "whole",
    "whole+sentences",
    "whole+pooled",
    "pooled+context",
    "mean+sentences",
    "mean",
)
Matrix = npt.NDArray[np.float32]


class Model:
    """The default MiniLM: its vectors as the engine gets them, and its token vectors, read
    from its session directly (the embedder gives pooled vectors only)."""

    def __init__(self, threads: int) -> None:
        self.embedder = MiniLMEmbedder(threads=threads)
        runtime = self.embedder._ensure_loaded()
        self.tokenizer, self.session = runtime.tokenizer, runtime.session
        self._loop = asyncio.new_event_loop()

    def token_vectors(self, ids: list[int]) -> Matrix:
        """One text's token vectors."""
        input_ids = np.array([ids], dtype=np.int64)
        (hidden,) = self.session.run(
            ["last_hidden_state"],
            {
                "input_ids": input_ids,
                "attention_mask": np.ones_like(input_ids),
                "token_type_ids": np.zeros_like(input_ids),
            },
        )
        tokens: Matrix = np.asarray(hidden, dtype=np.float32)[0]
        return tokens

    def embed(self, texts: Sequence[str]) -> Matrix:
        """Unit vectors of ``texts``, from ``MiniLMEmbedder.embed``."""
        vectors: Matrix = self._loop.run_until_complete(self.embedder.embed(texts))
        return vectors


def sentence_spans(text: str, sentences: Sequence[str]) -> list[tuple[int, int]]:
    """Where each sentence lies in ``text`` (the splitter strips and may join pieces with one
    space, so each is found word by word)."""
    spans, position = [], 0
    for sentence in sentences:
        words = sentence.split()
        start = end = text.find(words[0], position)
        for word in words:
            end = text.find(word, end) + len(word)
        spans.append((start, end))
        position = end
    return spans


def pooled_sentences(
    model: Model, turn: Turn, whole: str, sentences: Sequence[str]
) -> tuple[Matrix, Matrix]:
    """The sentences' vectors pooled from the whole text's one run: without and with the
    ``[CLS]``, ``[SEP]`` and speaker tokens. A sentence past the 256-token cut has none."""
    encoding = model.tokenizer.encode(whole)
    hidden = model.token_vectors(encoding.ids)
    offsets = encoding.offsets
    prefix = len(whole) - len(turn.text)
    context = [0, len(offsets) - 1] + [
        n for n, (a, b) in enumerate(offsets) if b > a and b <= prefix
    ]
    bare, framed = [], []
    for start, end in sentence_spans(turn.text, sentences):
        tokens = [
            n
            for n, (a, b) in enumerate(offsets)
            if b > a and a >= start + prefix and b <= end + prefix
        ]
        if tokens:
            bare.append(hidden[tokens].mean(axis=0))
            framed.append(hidden[tokens + context].mean(axis=0))
    if not bare:
        return np.zeros((0, 384), np.float32), np.zeros((0, 384), np.float32)
    return l2_normalize(np.array(bare)), l2_normalize(np.array(framed))


def haystack_vectors(model: Model, turns: Sequence[Turn]) -> dict[str, Any]:
    """Per variant: the whole-text vectors (one row per turn) and each turn's part vectors."""
    wholes = [episode_key(t.text, speaker=t.speaker, role="user") for t in turns]
    whole = model.embed(wholes)
    sentences = [sentence_keys(t.text) for t in turns]
    keyed = [
        (n, episode_key(s, speaker=t.speaker, role="user"))
        for n, (t, split) in enumerate(zip(turns, sentences, strict=True))
        for s in split
    ]
    vectors = model.embed([text for _, text in keyed]) if keyed else np.zeros((0, 384))
    parts: dict[int, list[Matrix]] = {}
    for (n, _), vector in zip(keyed, vectors, strict=True):
        parts.setdefault(n, []).append(vector)
    separate = {n: np.array(rows) for n, rows in parts.items()}
    mean = whole.copy()
    for n, rows in separate.items():
        mean[n] = l2_normalize(rows.mean(axis=0, keepdims=True))[0]
    bare: dict[int, Matrix] = {}
    framed: dict[int, Matrix] = {}
    for n, split in enumerate(sentences):
        if split:
            bare[n], framed[n] = pooled_sentences(model, turns[n], wholes[n], split)
    return {
        "whole": (whole, {}),
        "whole+sentences": (whole, separate),
        "whole+pooled": (whole, bare),
        "pooled+context": (whole, framed),
        "mean+sentences": (mean, separate),
        "mean": (mean, {}),
    }


def ranked(whole: Matrix, parts: dict[int, Matrix], query: Matrix, ids: list[str]) -> list[str]:
    scores = whole @ query
    for n, rows in parts.items():
        if len(rows):
            scores[n] = max(scores[n], float((rows @ query).max()))
    return [ids[n] for n in np.argsort(-scores, kind="stable")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--haystacks", type=int, default=100)
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--threads", type=int, default=2)
    options = parser.parse_args()
    if options.haystacks < 1 or options.threads < 1:
        parser.error("--haystacks and --threads take 1 or more")
    dataset = load_dataset(options.data)
    model = Model(options.threads)
    scores: dict[str, list[tuple[float, float, float]]] = {v: [] for v in VARIANTS}
    began = time.perf_counter()
    haystacks = dataset.haystacks[: options.haystacks]
    with Progress() as progress:
        task = progress.add_task("haystacks", total=len(haystacks))
        for haystack in haystacks:
            turns = [turn for session in haystack.sessions for turn in session.turns]
            ids = [turn.turn_id for turn in turns]
            variants = haystack_vectors(model, turns)
            for question in haystack.questions:
                query = model.embed([question.question])[0]
                for name, (whole, parts) in variants.items():
                    order = ranked(whole, parts, query, ids)
                    evidence = question.evidence_turns
                    scores[name].append(
                        (
                            recall_all_at_k(order, evidence, 5),
                            recall_all_at_k(order, evidence, 10),
                            ndcg_any_at_k(order, evidence, 10),
                        )
                    )
            progress.advance(task)
    questions = len(scores["whole"])
    table = Table(title=f"vector-only recall, {questions} questions, {len(haystacks)} haystacks")
    for column in ("variant", "R@5", "R@10", "NDCG@10"):
        table.add_column(column, justify="left" if column == "variant" else "right")
    figures = {}
    for name in VARIANTS:
        means = np.mean(scores[name], axis=0)
        figures[name] = {"R@5": means[0], "R@10": means[1], "NDCG@10": means[2]}
        table.add_row(name, *(f"{m:.3f}" for m in means))
    Console().print(table)
    print(f"{time.perf_counter() - began:.0f} s")
    save_result(
        "sentence-vector-variants",
        {"questions": questions, "haystacks": len(haystacks), "figures": figures},
    )


if __name__ == "__main__":
    main()
