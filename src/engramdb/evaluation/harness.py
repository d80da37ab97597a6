"""Run a retrieval benchmark through Engram's public API and score every question.

Core types: ``EvalSettings`` (what one run does), ``MemoryTarget`` (the two calls the harness
makes: memorize a session, remember for a question), ``EngramTarget`` (those calls on
``engramdb``'s episodic memory), ``QuestionResult``/``CategoryScores``/``RunResult`` (what a
run measured) and ``evaluate_modes`` (open a fresh engine per search mode and run each).

Each haystack goes into its own scope, ``tenant="eval", user=<haystack id>``, one
``memorize_many`` call per session; each question is then asked of the user's scope with the
question's own date as ``now``. Hits map back to turns through the metadata given at ingest.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections import defaultdict
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, Protocol

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.evaluation.datasets import Dataset, Haystack, Session
from engramdb.evaluation.fact_keys import fact_key_items
from engramdb.evaluation.metrics import first_occurrences, mean, percentile, score_ranking
from engramdb.index.embedder import Embedder
from engramdb.index.embedding_cache import PersistentEmbeddingCache
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.reranker import Reranker
from engramdb.index.search_config import SearchConfig, SearchMode

Granularity = Literal["turn", "session"]
MODES: tuple[SearchMode, ...] = ("bm25", "vector", "hybrid")
OVERALL = "overall"


@dataclass(frozen=True)
class EvalSettings:
    """What one benchmark run does.

    Attributes:
        mode: the engine's search mode.
        ks: cut-offs at which every metric is computed.
        granularity: index each turn (``turn``) or each session as one text (``session``;
            then only session-level metrics exist).
        depth: hits asked for per question. Turn metrics read the top ``k``; session metrics
            dedupe sessions in rank order, so they need more hits than ``k`` to see ``k``
            sessions (LongMemEval reads its whole ranking for this).
        tenant: the tenant every scope of the run uses.
        search: ``SearchConfig`` fields to set besides ``mode`` (for experiments).
        fact_keys: after each session is stored, store the facts the rule extractor finds in
            it as extra keys of their source turns (``evaluation.fact_keys``). Off by default:
            on LongMemEval_S it did not help (docs/benchmarks.md, "Fact keys").
    """

    mode: SearchMode = "hybrid"
    ks: tuple[int, ...] = (5, 10)
    granularity: Granularity = "turn"
    depth: int = 50
    tenant: str = "eval"
    search: dict[str, Any] = field(default_factory=dict)
    fact_keys: bool = False

    def __post_init__(self) -> None:
        if not self.ks or min(self.ks) < 1:
            raise ValueError("ks must hold at least one cut-off, each at least 1")
        if self.depth < 1:
            raise ValueError("depth must be at least 1")

    @property
    def levels(self) -> tuple[str, ...]:
        """The levels scored: turn and session, or session alone."""
        return ("turn", "session") if self.granularity == "turn" else ("session",)

    @property
    def limit(self) -> int:
        """Hits asked for per question: ``depth``, and never fewer than the largest ``k``."""
        return max(self.depth, *self.ks)


class MemoryTarget(Protocol):
    """The memory system under test, as the harness uses it."""

    async def memorize_session(
        self, haystack_id: str, session_id: str, items: Sequence[MemoryItem]
    ) -> None:
        """Store every item of one session, in one call."""
        ...

    async def remember(
        self, haystack_id: str, question: str, limit: int, now: datetime
    ) -> list[MemoryItem]:
        """The best ``limit`` items for ``question`` in the haystack's scope, best first."""
        ...


class EngramTarget:
    """``MemoryTarget`` on an open engine's episodic memory, through the public API."""

    def __init__(self, engram: engramdb.Engine, tenant: str = "eval") -> None:
        self._engram = engram
        self._tenant = tenant

    async def memorize_session(
        self, haystack_id: str, session_id: str, items: Sequence[MemoryItem]
    ) -> None:
        scope = self._engram.scope(tenant=self._tenant, user=haystack_id, session=session_id)
        await scope.episodic.memorize_many(list(items))

    async def remember(
        self, haystack_id: str, question: str, limit: int, now: datetime
    ) -> list[MemoryItem]:
        scope = self._engram.scope(tenant=self._tenant, user=haystack_id)
        return list(await scope.episodic.remember(question, limit=limit, now=now, raw=True))


class ProgressSink(Protocol):
    """Told how far a run is; the CLI draws progress bars with it."""

    def begin(self, phase: str, total: int) -> None:
        """A phase (``"ingest <mode>"`` or ``"query <mode>"``) starts with ``total`` units."""
        ...

    def advance(self, phase: str, amount: int) -> None:
        """``amount`` more units of ``phase`` are done."""
        ...


class _NoProgress:
    def begin(self, phase: str, total: int) -> None:
        pass

    def advance(self, phase: str, amount: int) -> None:
        pass


@dataclass(frozen=True)
class QuestionResult:
    """One question's scores (``level -> metric@k -> value``), latency and top hits."""

    question_id: str
    category: str
    scores: dict[str, dict[str, float]]
    latency_s: float
    retrieved: tuple[str, ...]


@dataclass(frozen=True)
class CategoryScores:
    """Mean scores of the questions of one category (or of all, ``overall``)."""

    category: str
    n: int
    scores: dict[str, dict[str, float]]


@dataclass(frozen=True)
class IngestStats:
    """What ingest stored and how long it took (wall time); ``fact_keys`` counts the key
    records among ``items``."""

    haystacks: int
    sessions: int
    turns: int
    items: int
    seconds: float
    fact_keys: int = 0

    @property
    def turns_per_s(self) -> float:
        """Indexed turns per second of wall time."""
        return self.turns / self.seconds if self.seconds > 0 else float("inf")


@dataclass(frozen=True)
class RunResult:
    """Everything one run measured; ``embedding_cache`` counts the texts the run's embeddings
    took from the persistent cache (``hits``) and computed (``misses``), when there is one."""

    settings: EvalSettings
    questions: tuple[QuestionResult, ...]
    ingest: IngestStats
    query_seconds: float
    embedding_cache: dict[str, int] | None = None
    categories: tuple[CategoryScores, ...] = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "categories", summarize(self.questions, self.settings))

    @property
    def mode(self) -> SearchMode:
        """The search mode of the run."""
        return self.settings.mode

    @property
    def overall(self) -> CategoryScores:
        """The mean over every question."""
        return self.categories[-1]

    def latency_ms(self) -> dict[str, float]:
        """``remember`` latency over the questions: p50, p95 and mean, in milliseconds."""
        values = [question.latency_s * 1000.0 for question in self.questions]
        return {
            "p50": percentile(values, 50),
            "p95": percentile(values, 95),
            "mean": mean(values),
        }


def summarize(
    questions: Sequence[QuestionResult], settings: EvalSettings
) -> tuple[CategoryScores, ...]:
    """Per-category means (categories by name), then the mean over all questions."""
    groups: dict[str, list[QuestionResult]] = defaultdict(list)
    for question in questions:
        groups[question.category].append(question)
    rows = [_mean_scores(name, groups[name], settings) for name in sorted(groups)]
    rows.append(_mean_scores(OVERALL, list(questions), settings))
    return tuple(rows)


def _mean_scores(
    name: str, questions: Sequence[QuestionResult], settings: EvalSettings
) -> CategoryScores:
    scores: dict[str, dict[str, float]] = {}
    for level in settings.levels:
        names = questions[0].scores[level] if questions else {}
        scores[level] = {
            metric: mean([question.scores[level][metric] for question in questions])
            for metric in names
        }
    return CategoryScores(name, len(questions), scores)


def session_items(session: Session, granularity: Granularity) -> list[MemoryItem]:
    """What one ``memorize_many`` call stores for ``session``.

    Each item's metadata carries ``session_id``, ``turn`` (index in the source session, or
    ``None`` for a whole session), ``has_answer`` and ``dia_id`` (LoCoMo's turn id).
    """
    if not session.turns:
        return []
    if granularity == "session":
        speakers = {turn.speaker for turn in session.turns}
        return [
            MemoryItem(
                text=" ".join(turn.text for turn in session.turns),
                role="user",
                speaker=speakers.pop() if len(speakers) == 1 else None,
                occurred_at=session.occurred_at,
                metadata={
                    "session_id": session.session_id,
                    "turn": None,
                    "has_answer": any(turn.has_answer for turn in session.turns),
                    "dia_id": None,
                },
            )
        ]
    return [
        MemoryItem(
            text=turn.text,
            role="user",
            speaker=turn.speaker,
            occurred_at=session.occurred_at,
            metadata={
                "session_id": session.session_id,
                "turn": turn.index,
                "has_answer": turn.has_answer,
                "dia_id": turn.dia_id,
            },
        )
        for turn in session.turns
    ]


def _hit_ids(hit: MemoryItem, rank: int) -> tuple[str, str]:
    # (turn id, session id) of a hit, from the metadata given at ingest. A hit without it
    # (nothing the harness stored) keeps its rank and matches no evidence.
    session_id = hit.metadata.get("session_id")
    if session_id is None:
        unknown = f"?{hit.id or rank}"
        return unknown, unknown
    return f"{session_id}:{hit.metadata.get('turn')}", str(session_id)


def score_hits(
    hits: Sequence[MemoryItem],
    evidence_turns: frozenset[str],
    evidence_sessions: frozenset[str],
    settings: EvalSettings,
) -> tuple[dict[str, dict[str, float]], tuple[str, ...]]:
    """Scores per level for one question's hits, and the ids of the top ``max(ks)`` hits."""
    ids = [_hit_ids(hit, rank) for rank, hit in enumerate(hits)]
    turns = first_occurrences(turn for turn, _ in ids)
    sessions = first_occurrences(session for _, session in ids)
    scores = {"session": score_ranking(sessions, evidence_sessions, settings.ks)}
    if settings.granularity == "turn":
        scores = {"turn": score_ranking(turns, evidence_turns, settings.ks), **scores}
    shown = turns if settings.granularity == "turn" else sessions
    return scores, tuple(shown[: max(settings.ks)])


async def ingest(
    haystacks: Sequence[Haystack],
    target: MemoryTarget,
    settings: EvalSettings,
    progress: ProgressSink | None = None,
) -> IngestStats:
    """Memorize every session of every haystack, one call per session (and, with
    ``settings.fact_keys``, one more for the session's fact keys)."""
    total_turns = sum(haystack.turn_count for haystack in haystacks)
    phase = f"ingest {settings.mode}"
    progress = progress or _NoProgress()
    progress.begin(phase, total_turns)
    sessions = items = keys = 0
    started = time.perf_counter()
    for haystack in haystacks:
        for session in haystack.sessions:
            batch = session_items(session, settings.granularity)
            if batch:
                await target.memorize_session(haystack.haystack_id, session.session_id, batch)
                sessions += 1
                items += len(batch)
            facts = fact_key_items(batch) if settings.fact_keys else []
            if facts:
                await target.memorize_session(haystack.haystack_id, session.session_id, facts)
                items += len(facts)
                keys += len(facts)
            progress.advance(phase, len(session.turns))
    seconds = time.perf_counter() - started
    return IngestStats(len(haystacks), sessions, total_turns, items, seconds, keys)


async def run_benchmark(
    dataset: Dataset,
    target: MemoryTarget,
    settings: EvalSettings,
    progress: ProgressSink | None = None,
) -> RunResult:
    """Ingest ``dataset`` into ``target``, ask every question, score the rankings."""
    sink = progress or _NoProgress()
    stats = await ingest(dataset.haystacks, target, settings, sink)
    phase = f"query {settings.mode}"
    sink.begin(phase, len(dataset.questions))
    results = []
    started = time.perf_counter()
    for haystack in dataset.haystacks:
        for question in haystack.questions:
            asked = time.perf_counter()
            hits = await target.remember(
                haystack.haystack_id, question.question, settings.limit, question.asked_at
            )
            latency = time.perf_counter() - asked
            scores, shown = score_hits(
                hits, question.evidence_turns, question.evidence_sessions, settings
            )
            results.append(
                QuestionResult(question.question_id, question.category, scores, latency, shown)
            )
            sink.advance(phase, 1)
    return RunResult(settings, tuple(results), stats, time.perf_counter() - started)


@asynccontextmanager
async def eval_embedder(cache: Path | None) -> AsyncIterator[Embedder]:
    """The engine's default model (MiniLM on every core this process may run on), behind a
    persistent cache if given; closed on exit."""
    model = MiniLMEmbedder(threads=len(os.sched_getaffinity(0)) or 1)
    cached = None if cache is None else PersistentEmbeddingCache(model, cache)
    try:
        yield model if cached is None else cached
    finally:
        if cached is not None:
            await cached.aclose()
        model.close()


async def evaluate_modes(
    dataset: Dataset,
    settings: EvalSettings,
    modes: Sequence[SearchMode],
    *,
    embedder: Embedder,
    progress: ProgressSink | None = None,
    reranker: Reranker | None = None,
) -> list[RunResult]:
    """One run per mode, each on a fresh engine in a temporary folder, all with ``embedder``
    (``bm25`` runs without one); ``reranker``, if given, serves the ``hybrid`` run alone, so the
    baselines stay what they are.

    Raises:
        EngramError: the engine failed; the temporary folder is removed either way.
    """
    results = []
    if any(mode != "bm25" for mode in modes):
        await embedder.embed(["warm-up"])  # load the model now, not inside the first ingest
    with tempfile.TemporaryDirectory(prefix="engram-eval-") as workdir:
        for mode in modes:
            # BM25 alone needs no vectors: not embedding at all is how it would be run.
            config = engramdb.EngineConfig(
                search=SearchConfig(mode=mode, **settings.search),
                embedder=None if mode == "bm25" else embedder,
                reranker=reranker if mode == "hybrid" else None,
            )
            async with engramdb.open(Path(workdir) / f"{mode}.db", config=config) as engram:
                target = EngramTarget(engram, settings.tenant)
                counts = _cache_counts(config.embedder)
                run = await run_benchmark(dataset, target, replace(settings, mode=mode), progress)
                after = _cache_counts(config.embedder)
                if counts is not None and after is not None:
                    hits, misses = (now - before for now, before in zip(after, counts, strict=True))
                    run = replace(run, embedding_cache={"hits": hits, "misses": misses})
                results.append(run)
    return results


def _cache_counts(embedder: object) -> tuple[int, int] | None:
    if isinstance(embedder, PersistentEmbeddingCache):
        return embedder.hits, embedder.misses
    return None
