"""``SearchConfig``: how hybrid recall ranks, as data (signals, fusion, boosts).

The functions that use it are pure (``index/fusion.py``); backends only supply candidates.
The defaults were chosen on LongMemEval_S (``engram eval``; see docs/benchmarks.md): weighted
fusion of saturated BM25 and cosine scores (both absolute, so a weak match stays weak in a
small store), each record's vector score its best over its whole text and its sentences,
vectors at 1.5 times BM25's weight, no similarity floor, time expressions left out of the
full-text query, and a 0.15 share for hits inside a time the question names.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import Literal

from engramdb.core.errors import InvalidValueError

SearchMode = Literal["hybrid", "bm25", "vector"]
FusionMethod = Literal["rrf", "weighted"]
#: The largest count a setting may hold: far past any store, and within a SQL ``LIMIT``.
MAX_COUNT = 10**9


@dataclass(frozen=True)
class SearchConfig:
    """Ranking settings of the indexed tier.

    Attributes:
        mode: which signals to use: both (``hybrid``), or one alone (for baselines).
        fusion: reciprocal-rank fusion (``rrf``) or a weighted sum of normalised scores.
        rrf_k: the RRF constant; larger flattens the advantage of the very top ranks.
        bm25_weight: weight of the full-text ranking in the fusion.
        bm25_saturation: the BM25 score that weighted fusion maps to 0.5 (``s / (s + k)``).
        vector_weight: weight of the dense-vector ranking in the fusion.
        candidates: how many hits each signal contributes before fusion.
        recency_weight: share of the final score given to recency (0 disables).
        recency_half_life_days: age at which the recency signal halves.
        importance_weight: share of the final score given to item importance (0 disables).
        time_boost: extra weight for hits inside a time range the query names (0 disables).
        neighbours: how many adjacent turns of the same session to add around each hit.
        neighbour_decay: a neighbour's score relative to the hit that brought it.
        max_term_share: full-text query words found in more than this share of the
            partition's documents are left out when the partition is large (they barely move
            BM25 yet make it score every document that holds them); 0 keeps every word.
        max_scored_docs: in a large partition, the most common query words are left out while
            the rest would have BM25 score more than this many of its documents (each scored
            document costs time; the words left out are the least telling); 0 keeps them.
        session_weight: share of a hit's score taken from its session's best hit (0 disables).
        strip_time: drop time expressions ("last week") from the full-text query; they are
            answered by the time boost, not by matching words.
        min_similarity: vector hits below this cosine similarity are dropped as noise.
        ann_threshold: partitions with more vectors than this use the ANN index (hnswlib),
            smaller ones exact search.
        save_graphs: keep each partition's HNSW graph in a folder beside a SQLite database
            file (``<file>.vectors``), so a reopened store does not build it again; a
            cache, checked against the stored vectors on load.
        part_vectors: score candidates by the best of their whole-text and sentence vectors
            (for memory types that store sentence vectors: episodes and conversation turns).
        part_candidates: how many of each signal's best candidates are re-scored that way
            (each costs a read of its vectors; 0 re-scores every candidate).
        rerank_candidates: with a reranker (``EngineConfig.reranker``), how many of the best
            hits it re-orders (0 turns it off).
        rerank_weight: a reranked hit's score is ``(1 - w) * hybrid + w * reranker``.
        held_vectors: on a database that searches vectors itself (PostgreSQL), how many
            records' vectors of partitions small enough to be searched exactly a process holds
            and searches itself, kept current from the tenant's event log; the partitions
            searched least recently are dropped first (0: every search runs in the database).
    """

    mode: SearchMode = "hybrid"
    fusion: FusionMethod = "weighted"
    rrf_k: int = 60
    bm25_weight: float = 1.0
    bm25_saturation: float = 20.0
    vector_weight: float = 1.5
    candidates: int = 100
    recency_weight: float = 0.0
    recency_half_life_days: float = 30.0
    importance_weight: float = 0.0
    time_boost: float = 0.15
    neighbours: int = 0
    neighbour_decay: float = 0.5
    max_term_share: float = 0.05
    max_scored_docs: int = 4000
    session_weight: float = 0.0
    strip_time: bool = True
    min_similarity: float = 0.0
    ann_threshold: int = 20_000
    save_graphs: bool = True
    part_vectors: bool = True
    part_candidates: int = 30
    rerank_candidates: int = 20
    rerank_weight: float = 0.5
    held_vectors: int = 100_000

    def __post_init__(self) -> None:
        for setting in fields(self):
            _check_kind(setting.name, str(setting.type), getattr(self, setting.name))
        if self.mode not in ("hybrid", "bm25", "vector"):
            raise InvalidValueError(f"unknown search mode {self.mode!r}", field="mode")
        if self.fusion not in ("rrf", "weighted"):
            raise InvalidValueError(f"unknown fusion {self.fusion!r}", field="fusion")
        if self.candidates < 1 or self.rrf_k < 1 or self.neighbours < 0:
            raise InvalidValueError(
                "candidates and rrf_k must be positive, neighbours non-negative",
                field="candidates",
            )
        counts = ("max_scored_docs", "part_candidates", "rerank_candidates", "held_vectors")
        for name in counts:
            if getattr(self, name) < 0:
                raise InvalidValueError(
                    "max_scored_docs, part_candidates, rerank_candidates and held_vectors "
                    "must not be negative",
                    field=name,
                )
        if not 0.0 <= self.rerank_weight <= 1.0:
            raise InvalidValueError("rerank_weight must be between 0 and 1", field="rerank_weight")


def _check_kind(name: str, kind: str, value: object) -> None:
    """Refuse a setting that is not of its declared kind: a flag that is not ``True`` or
    ``False`` (``"no"`` would count as on), a count that is not a whole number up to
    ``MAX_COUNT``, a number that is not finite (NaN would order every hit at random)."""
    if kind == "bool":
        fits, wanted = isinstance(value, bool), "True or False"
    elif kind == "int":
        fits = isinstance(value, int) and not isinstance(value, bool) and abs(value) <= MAX_COUNT
        wanted = f"a whole number of at most {MAX_COUNT:,}"
    elif kind == "float":
        fits = (
            isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        )
        wanted = "a finite number"
    else:
        return
    if not fits:
        raise InvalidValueError(f"SearchConfig.{name} must be {wanted}", field=name)
