"""Pure rank fusion and score shaping for hybrid recall.

Signals (BM25, vector similarity) each rank candidate ids; fusion turns those rankings into
one relevance in [0, 1]; recency, importance and a named time range then shift it by the
shares ``SearchConfig`` gives them. Every function here is deterministic and database-free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engramdb.index.search_config import SearchConfig


@dataclass(frozen=True)
class Fused:
    """One candidate's final score and how it was made."""

    id: int
    score: float
    breakdown: dict[str, float] = field(default_factory=dict)


def rrf(
    rankings: Mapping[str, Sequence[int]], weights: Mapping[str, float], k: int
) -> dict[int, float]:
    """Reciprocal-rank fusion, scaled to [0, 1]: a candidate ranked first by every signal
    scores 1.0. ``rankings`` maps a signal to ids, best first."""
    total = sum(weights.get(name, 0.0) for name in rankings) / (k + 1)
    if total <= 0:
        return {}
    fused: dict[int, float] = {}
    for name, ids in rankings.items():
        weight = weights.get(name, 0.0)
        for rank, item in enumerate(ids, 1):
            fused[item] = fused.get(item, 0.0) + weight / (k + rank)
    return {item: value / total for item, value in fused.items()}


def min_max(scores: Mapping[int, float]) -> dict[int, float]:
    """Scores rescaled to [0, 1] within their own set (all equal → all 1.0)."""
    if not scores:
        return {}
    low, high = min(scores.values()), max(scores.values())
    span = high - low
    return {item: 1.0 if span == 0 else (value - low) / span for item, value in scores.items()}


#: BM25 scores at or below this mean the index cannot tell documents apart (IDF ~ 0).
COLLAPSED_BM25 = 1e-3


def absolute(name: str, signal: Mapping[int, float], saturation: float) -> dict[int, float]:
    """A signal's scores on a fixed [0, 1] scale, so a weak match stays weak however few
    candidates there are: cosine similarity as it is (clamped), BM25 as ``s / (s + k)``."""
    if name == "vector":
        return {item: max(0.0, min(1.0, value)) for item, value in signal.items()}
    if signal and max(signal.values()) <= COLLAPSED_BM25:
        # Every stored document holds the query's words (a store of a few memories): BM25's
        # IDF collapses to ~0, yet the documents do match. Count them as plain matches.
        return dict.fromkeys(signal, 0.5)
    return {
        item: max(0.0, value) / (max(0.0, value) + saturation) for item, value in signal.items()
    }


def weighted(
    scores: Mapping[str, Mapping[int, float]], weights: Mapping[str, float], saturation: float
) -> dict[int, float]:
    """Weighted mean of per-signal absolute scores (see :func:`absolute`; a missing signal
    counts 0)."""
    total = sum(weights.get(name, 0.0) for name in scores)
    if total <= 0:
        return {}
    fused: dict[int, float] = {}
    for name, signal in scores.items():
        weight = weights.get(name, 0.0)
        for item, value in absolute(name, signal, saturation).items():
            fused[item] = fused.get(item, 0.0) + weight * value
    return {item: value / total for item, value in fused.items()}


def recency(age_days: float, half_life_days: float) -> float:
    """1.0 for something new, halving every ``half_life_days``."""
    return math.pow(0.5, max(age_days, 0.0) / half_life_days) if half_life_days > 0 else 0.0


def fuse(
    scores: Mapping[str, Mapping[int, float]],
    config: SearchConfig,
    *,
    ages_days: Mapping[int, float] | None = None,
    importance: Mapping[int, float] | None = None,
    in_range: Mapping[int, bool] | None = None,
) -> list[Fused]:
    """Rank candidates from per-signal scores (higher is better), best first, ties by id.

    The relevance from fusion takes the share of the score that recency, importance and the
    time boost leave, so the final score stays in [0, 1].
    """
    weights = {"bm25": config.bm25_weight, "vector": config.vector_weight}
    if config.fusion == "rrf":
        rankings = {
            name: sorted(signal, key=lambda item: (-signal[item], item))
            for name, signal in scores.items()
        }
        relevance = rrf(rankings, weights, config.rrf_k)
    else:
        relevance = weighted(scores, weights, config.bm25_saturation)
    shares = {
        "recency": config.recency_weight if ages_days is not None else 0.0,
        "importance": config.importance_weight if importance is not None else 0.0,
        "time": config.time_boost if in_range is not None else 0.0,
    }
    base = max(0.0, 1.0 - sum(shares.values()))
    fused = []
    for item, rel in relevance.items():
        parts = {"fused": rel}
        for name, signal in scores.items():
            if item in signal:
                parts[name] = signal[item]
        extra = {
            "recency": recency(ages_days[item], config.recency_half_life_days)
            if ages_days is not None and item in ages_days
            else 0.0,
            "importance": importance.get(item, 0.0) if importance is not None else 0.0,
            "time": 1.0 if in_range is not None and in_range.get(item, False) else 0.0,
        }
        score = base * rel + sum(shares[name] * extra[name] for name in shares)
        parts.update({name: extra[name] for name in shares if shares[name] > 0})
        fused.append(Fused(item, min(1.0, max(0.0, score)), parts))
    fused.sort(key=lambda f: (-f.score, f.id))
    return fused


def group_boost(fused: Sequence[Fused], groups: Mapping[int, str], weight: float) -> list[Fused]:
    """Lift candidates whose group (a conversation's session) scores well as a whole.

    A group's score is its best candidate's; each candidate keeps ``1 - weight`` of its own
    score and takes ``weight`` of its group's, so an answer sitting in a session about the
    question's topic outranks a lone turn that merely shares its words.
    """
    if weight <= 0:
        return list(fused)
    best: dict[str, float] = {}
    for candidate in fused:
        group = groups.get(candidate.id)
        if group:
            best[group] = max(best.get(group, 0.0), candidate.score)
    lifted = []
    for candidate in fused:
        group = groups.get(candidate.id)
        group_score = best.get(group, candidate.score) if group else candidate.score
        score = (1 - weight) * candidate.score + weight * group_score
        lifted.append(Fused(candidate.id, score, {**candidate.breakdown, "session": group_score}))
    lifted.sort(key=lambda f: (-f.score, f.id))
    return lifted


def rerank(fused: Sequence[Fused], judged: Mapping[int, float], weight: float) -> list[Fused]:
    """The candidates a reranker ``judged`` (id → relevance in [0, 1]) first, by the blend
    ``(1 - weight) * score + weight * relevance``, then the rest in their order.

    The rest keep their scores but never above the last judged one, so scores still fall
    down the list and a caller merging lists by score keeps the reranker's order.
    """
    ahead = []
    for hit in fused:
        if hit.id in judged:
            relevance = min(1.0, max(0.0, judged[hit.id]))
            score = (1.0 - weight) * hit.score + weight * relevance
            ahead.append(Fused(hit.id, score, {**hit.breakdown, "rerank": relevance}))
    ahead.sort(key=lambda f: (-f.score, f.id))
    floor = ahead[-1].score if ahead else 1.0
    rest = [
        Fused(hit.id, min(hit.score, floor), hit.breakdown) for hit in fused if hit.id not in judged
    ]
    return ahead + rest
