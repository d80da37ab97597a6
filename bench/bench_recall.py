"""Recall benchmark of the indexed tier on the embedded default (SQLite, MiniLM on one thread).

Three phases, each through the public API (``engramdb.open`` and ``scope(...).episodic``):

1. **Model alone vs ingest.** N texts are embedded by a fresh ``MiniLMEmbedder(threads=1)`` in
   calls of the engine's batch size (texts/s), then memorized into one scope with
   ``episodic.memorize_many`` in batches of that size by an engine with its own fresh embedder
   (memories/s), then embedded by a fresh model again; the ratio is ingest over the mean of the
   two model passes. The model-alone passes embed the strings the engine embeds for these
   items: ``user: <text>``, and ``user: <sentence>`` for each sentence of a text of several
   (its sentence vectors), in one call per batch of texts as the engine makes them; both
   rates count texts. The write path without embedding
   (``EngineConfig(embedder=None)``) is timed on the same N texts and on W texts, with
   ``synchronous="full"`` (the default) and ``"normal"``.
2. **remember latency at scale.** A store of M memories with vectors is built in one scope;
   its vectors come from the persistent embedding cache (``index.embedding_cache``, default file
   under the user cache dir) so repeated runs do not spend an hour embedding, or, with
   ``--stand-in-vectors``, are seeded random vectors (``StandInEmbedder``). The database
   is then reopened by an engine with a plain, uncached ``MiniLMEmbedder(threads=1)``.
   ``remember(question, limit=10)`` is timed for Q distinct questions, each asked once, so every
   query is embedded by the model (the engine's memo of recent query vectors never hits), with
   the default ``SearchConfig`` (HNSW above ``ann_threshold`` vectors) and with exact search
   (``ann_threshold`` above M). One more question is asked first, untimed in the percentiles:
   it loads the vector index and is reported as the first-query latency. The parts of a query
   (query embedding, vector-index search, the BM25 SQL query) are then timed alone.
3. **Index rebuild.** ``engine.reindex()`` (drops and recomputes every vector, with the plain
   model) on a store of R memories, and ``engine.rebuild()`` (projections from the log, vectors
   of unchanged texts kept) on the store of M.

Before any timing, one batch is memorized and one query asked in a throwaway in-memory
database, so lazy imports and loads on first use are not charged to the first pass.

Texts: by default the distinct user turns of LongMemEval_S in file order, read at run time from
``--data`` (never copied anywhere; the results hold counts, not texts), topped up with
synthetic sentences when more are needed; questions are LongMemEval's. ``--source synthetic``
generates deterministic template sentences and questions instead.

Run by hand (not in CI)::

    python bench/bench_recall.py --quick        # smoke run, about a minute
    python bench/bench_recall.py                # N=5,000, W=100,000, M=100,000, Q=300, R=10,000

Results are printed as a table and written as JSON to ``bench/results/`` (git-ignored) after
every phase, so an interrupted run keeps what it finished. The JSON records the commit measured
and the files under ``src/`` that differed from it, and the load average around every phase.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import hashlib
import json
import lzma
import os
import platform
import random
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

import numpy as np
import platformdirs
from bench_common import percentiles
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

import engramdb
from engramdb import EngineConfig
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.core.types import utc_now
from engramdb.engine import Engine
from engramdb.index.embedder import Embedder, l2_normalize
from engramdb.index.embedding_cache import PersistentEmbeddingCache
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.search_config import SearchConfig
from engramdb.orchestrator.episodic import NAMESPACE, episode_embed_parts, episode_embed_text
from engramdb.storage.records import RecordQuery

Source = Literal["longmemeval", "synthetic"]
Synchronous = Literal["full", "normal"]
PHASES = ("model", "write", "recall", "reindex")
RESULTS_DIR = Path(__file__).resolve().parent / "results"
DEFAULT_DATA = Path("/work/shared/eval/data/longmemeval_s_cleaned.json.xz")
TENANT = "bench"
USER = "u"
ROLE = "user"
# Memories per memorize_many call; also the texts per embed call of the model-alone pass (the
# engine hands each batch to the embedder in one call, which cuts it into model runs of 8).
BATCH = 256
TURNS_PER_SESSION = 16
START = dt.datetime(2023, 1, 1, 9, 0, tzinfo=dt.UTC)
DEFAULTS = {"texts": 5_000, "write_texts": 100_000, "memories": 100_000, "queries": 300}
DEFAULTS |= {"reindex_size": 10_000}
QUICK = {"texts": 300, "write_texts": 2_000, "memories": 3_000, "queries": 30}
QUICK |= {"reindex_size": 500, "ann_threshold": 1_000}
TARGETS = {"ingest_model_ratio": 0.90, "write_per_s": 2_000.0, "remember_p95_ms": 25.0}

_SUBJECTS = (
    "I",
    "My sister",
    "My manager",
    "Our team",
    "My landlord",
    "The client",
    "My neighbour",
    "My doctor",
    "My partner",
    "A friend from work",
    "My son",
    "The coach",
)
_VERBS = (
    "booked",
    "asked about",
    "mentioned",
    "is planning",
    "wants to avoid",
    "recommended",
    "forgot about",
    "paid for",
    "complained about",
    "finally finished",
    "keeps talking about",
    "cancelled",
)
_OBJECTS = (
    "the dentist appointment",
    "a window seat on the flight to Lisbon",
    "the quarterly report",
    "Thai food without peanuts",
    "the yoga class",
    "the Berlin trip",
    "a standing desk",
    "the vegetarian cooking course",
    "the onboarding checklist",
    "the car insurance renewal",
    "a weekend hike near the lake",
    "the electricity bill",
    "the Python workshop",
    "the birthday party",
    "a new pair of running shoes",
    "the garden fence",
    "the piano lessons",
    "the tax return",
    "the book club meeting",
    "the photography exhibition",
)
_WHEN = (
    "on Monday",
    "last week",
    "yesterday",
    "this morning",
    "in March",
    "after lunch",
    "before the holidays",
    "on the weekend",
    "two days ago",
    "at the end of the month",
)
_DETAILS = (
    "and it cost {n} dollars",
    "which took {n} minutes",
    "with {n} people",
    "for the {n}th time",
    "around {h}:{m:02d}",
    "at gate {n}",
    "in room {n}",
    "and paid a {n} dollar deposit",
)


@dataclass(frozen=True)
class Corpus:
    """The texts to memorize and the questions to ask."""

    source: str
    texts: list[str]
    questions: list[str]
    warmup: str
    longmemeval_texts: int
    synthetic_texts: int
    note: str


def synthetic_sentences(count: int, seed: int, exclude: set[str] | None = None) -> list[str]:
    """``count`` distinct deterministic chat-like sentences, none of them in ``exclude``."""
    rng = random.Random(seed)
    taken = set(exclude or ())
    out: list[str] = []
    while len(out) < count:
        detail = rng.choice(_DETAILS).format(
            n=rng.randint(2, 400), h=rng.randint(6, 22), m=rng.randrange(0, 60, 5)
        )
        sentence = (
            f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)} "
            f"{rng.choice(_WHEN)}, {detail}."
        )
        if sentence not in taken:
            taken.add(sentence)
            out.append(sentence)
    return out


def mid_sentence(subject: str) -> str:
    """``subject`` as written inside a sentence ("I" stays capitalised)."""
    return subject if subject == "I" else subject[0].lower() + subject[1:]


def synthetic_questions(count: int, seed: int) -> list[str]:
    """``count`` distinct deterministic questions in the style of the synthetic sentences."""
    rng = random.Random(seed)
    forms = (
        "When did {s} say something about {o}?",
        "How much did {o} cost {w}?",
        "What did {s} decide about {o}?",
        "Did {s} finish {o} {w}?",
    )
    out: dict[str, None] = {}
    while len(out) < count:
        question = rng.choice(forms).format(
            s=mid_sentence(rng.choice(_SUBJECTS)), o=rng.choice(_OBJECTS), w=rng.choice(_WHEN)
        )
        out.setdefault(question, None)
    return list(out)


def read_longmemeval(path: Path) -> tuple[list[str], list[str]]:
    """Distinct non-empty user-turn contents in file order, and the questions in file order."""
    with lzma.open(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    turns: dict[str, None] = {}
    questions: list[str] = []
    for item in data:
        questions.append(str(item["question"]))
        for session in item["haystack_sessions"]:
            for turn in session:
                content = str(turn["content"])
                if turn["role"] == "user" and content.strip():
                    turns.setdefault(content, None)
    return list(turns), questions


def load_corpus(source: Source, data: Path, needed: int, queries: int, seed: int) -> Corpus:
    """At least ``needed`` distinct texts, ``queries`` distinct questions to time and one more
    distinct question to ask first (it loads the vector index and is not timed with the rest,
    so no timed question can be answered from the engine's query-embedding memo)."""
    if source == "synthetic":
        asked = synthetic_questions(queries + 1, seed + 1)
        return Corpus(
            "synthetic",
            synthetic_sentences(needed, seed),
            asked[:queries],
            asked[queries],
            0,
            needed,
            "deterministic template sentences and questions (--source synthetic)",
        )
    turns, questions = read_longmemeval(data)
    top_up = max(0, needed - len(turns))
    texts = turns[:needed] + synthetic_sentences(top_up, seed, set(turns))
    asked = list(dict.fromkeys(questions))[: queries + 1]
    if len(asked) < queries + 1:
        extra = synthetic_questions(queries + 1, seed + 1)
        asked += [q for q in extra if q not in asked][: queries + 1 - len(asked)]
    return Corpus(
        "longmemeval",
        texts,
        asked[:queries],
        asked[queries],
        min(needed, len(turns)),
        top_up,
        f"distinct user turns of {data.name} in file order ({len(turns):,} available), "
        f"{top_up:,} synthetic sentences appended; questions: the first {queries + 1} distinct "
        "of the file (the last one asked first, untimed)",
    )


def embed_strings(text: str) -> list[str]:
    """What the engine embeds for an episode memorized with ``role="user"``: the whole text,
    then each of its sentences if it has several."""
    value = {"text": text, "role": ROLE}
    return [episode_embed_text("", value, None), *episode_embed_parts("", value, None)]


def items_for(texts: Sequence[str]) -> list[MemoryItem]:
    """One ``MemoryItem`` per text, a minute apart."""
    return [
        MemoryItem(text=text, role=ROLE, occurred_at=START + dt.timedelta(minutes=i))
        for i, text in enumerate(texts)
    ]


def loadavg() -> list[float]:
    """The 1/5/15-minute load averages (empty where the platform has none)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def cpu_model() -> str:
    """The CPU model name from /proc/cpuinfo, or the platform's processor string."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def version(package: str) -> str | None:
    """The installed version of ``package``, if any."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def code_version() -> dict[str, Any]:
    """The commit measured and the files of ``src/`` that differ from it, if any."""
    root = Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        try:
            done = subprocess.run(
                ["git", *args], cwd=root, capture_output=True, text=True, check=True
            )
        except (OSError, subprocess.CalledProcessError):
            return ""
        return done.stdout

    changed = [line[3:] for line in git("status", "--porcelain", "--", "src").splitlines()]
    return {"commit": git("rev-parse", "HEAD").strip() or None, "src_changed": changed}


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    return {
        "nproc": os.cpu_count(),
        "cpu": cpu_model(),
        "machine": platform.machine(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "sqlite": sqlite3.sqlite_version,
        "engramdb": engramdb.__version__,
        "onnxruntime": version("onnxruntime"),
        "hnswlib": version("hnswlib"),
        "date": dt.datetime.now(tz=dt.UTC).isoformat(timespec="seconds"),
        "code": code_version(),
    }


def by_tenth(batches: Sequence[tuple[int, float]]) -> list[float]:
    """Items/s of each tenth of a run, from its (items, seconds) batches."""
    step = max(1, len(batches) // 10)
    out = []
    for start in range(0, len(batches), step):
        chunk = batches[start : start + step]
        seconds = sum(t for _, t in chunk)
        if seconds > 0:
            out.append(sum(n for n, _ in chunk) / seconds)
    return out


def default_cache() -> Path:
    """The embedding cache file ``engram eval`` uses too (under the user cache dir)."""
    return Path(platformdirs.user_cache_dir("engram")) / "embeddings.sqlite"


def make_progress(console: Console) -> Progress:
    """The house progress display."""
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TaskProgressColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    )


@contextmanager
def phase(record: dict[str, Any], console: Console, title: str) -> Iterator[None]:
    """Note the load average and wall time around a phase in ``record``."""
    console.rule(title)
    record["loadavg_before"] = loadavg()
    started = time.perf_counter()
    try:
        yield
    finally:
        record["seconds"] = round(time.perf_counter() - started, 2)
        record["loadavg_after"] = loadavg()


class Bench:
    """Runs the phases and collects their figures into one JSON document."""

    def __init__(self, args: argparse.Namespace, console: Console, workdir: Path) -> None:
        self.args = args
        self.console = console
        self.workdir = workdir
        self.results: dict[str, Any] = {}
        self.document: dict[str, Any] = {}
        self.out: Path = args.out

    def save(self) -> None:
        """Write the JSON document as it stands."""
        self.document["results"] = self.results
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.out.write_text(json.dumps(self.document, indent=2) + "\n")

    def db(self, name: str) -> Path:
        """A fresh database path in the work directory (an old file of that name is removed)."""
        path = self.workdir / f"{name}.db"
        remove_db(path)
        return path

    # -- phase 1 ------------------------------------------------------------------------------

    async def model_alone(self, texts: Sequence[str], label: str) -> dict[str, Any]:
        """A fresh, uncached MiniLM embedding what the engine embeds for ``texts``, in the
        engine's calls: one per ``BATCH`` texts, holding their whole texts and sentences."""
        embedder = MiniLMEmbedder(threads=1)
        calls = [
            [string for text in texts[start : start + BATCH] for string in embed_strings(text)]
            for start in range(0, len(texts), BATCH)
        ]
        strings = [string for call in calls for string in call]
        try:
            t0 = time.perf_counter()
            await embedder.load()
            load_s = time.perf_counter() - t0
            with make_progress(self.console) as progress:
                task = progress.add_task(f"model alone ({label})", total=len(strings))
                started = time.perf_counter()
                for call in calls:
                    await embedder.embed(call)
                    progress.advance(task, len(call))
                seconds = time.perf_counter() - started
        finally:
            embedder.close()
        return {
            "texts": len(texts),
            "vectors": len(strings),
            "seconds": seconds,
            "texts_per_s": len(texts) / seconds,
            "vectors_per_s": len(strings) / seconds,
            "model_load_s": load_s,
        }

    async def ingest(
        self,
        texts: Sequence[str],
        embedder: Embedder | None,
        synchronous: Synchronous,
        label: str,
        path: Path | None = None,
    ) -> dict[str, Any]:
        """Memorize ``texts`` into one scope in batches of ``BATCH``; memories/s."""
        items = items_for(texts)
        db = path or self.db(f"ingest-{label}")
        config = EngineConfig(embedder=embedder)
        async with engramdb.open(db, config=config, synchronous=synchronous) as engine:
            with make_progress(self.console) as progress:
                task = progress.add_task(f"memorize_many ({label})", total=len(items))
                batches: list[tuple[int, float]] = []
                started = time.perf_counter()
                for number, start in enumerate(range(0, len(items), BATCH)):
                    batch = items[start : start + BATCH]
                    session = f"s{number * BATCH // TURNS_PER_SESSION:06d}"
                    t0 = time.perf_counter()
                    scope = engine.scope(tenant=TENANT, user=USER, session=session)
                    await scope.episodic.memorize_many(batch)
                    batches.append((len(batch), time.perf_counter() - t0))
                    progress.advance(task, len(batch))
                seconds = time.perf_counter() - started
            stats = await engine.stats()
        if path is None:
            remove_db(db)
        return {
            "memories": len(items),
            "synchronous": synchronous,
            "embedder": "none" if embedder is None else embedder.model_id,
            "seconds": seconds,
            "memories_per_s": len(items) / seconds,
            "memories_per_s_by_tenth": by_tenth(batches),
            "records": stats.records_by_namespace.get(NAMESPACE, 0),
        }

    async def phase_model(self, texts: Sequence[str]) -> None:
        """Phase 1 (a, b): model alone, ingest with a fresh model, model alone again."""
        record: dict[str, Any] = {}
        self.results["model_vs_ingest"] = record
        with phase(record, self.console, f"1. model alone vs ingest, N={len(texts):,}"):
            record["model_before"] = await self.model_alone(texts, "before ingest")
            embedder = MiniLMEmbedder(threads=1)
            try:
                t0 = time.perf_counter()
                await embedder.load()
                load_s = time.perf_counter() - t0
                record["ingest"] = await self.ingest(texts, embedder, "full", "embedded")
                record["ingest"]["model_load_s"] = load_s
            finally:
                embedder.close()
            record["model_after"] = await self.model_alone(texts, "after ingest")
            model = statistics.fmean(
                [record["model_before"]["texts_per_s"], record["model_after"]["texts_per_s"]]
            )
            record["model_texts_per_s_mean"] = model
            record["ingest_model_ratio"] = record["ingest"]["memories_per_s"] / model
        self.save()

    async def phase_write(self, texts: Sequence[str], write_texts: Sequence[str]) -> None:
        """Phase 1 (c): the write path without embedding, both durability settings."""
        passes: list[dict[str, Any]] = []
        record: dict[str, Any] = {"passes": passes}
        self.results["write_no_embedding"] = record
        title = f"1c. write path without embedding, N={len(texts):,} and W={len(write_texts):,}"
        with phase(record, self.console, title):
            for sample in (texts, write_texts):
                for mode in ("full", "normal"):
                    label = f"no embedder, {len(sample):,}, sync={mode}"
                    passes.append(await self.ingest(sample, None, mode, label))
                    self.save()

    # -- phase 2 ------------------------------------------------------------------------------

    async def build_store(self, texts: Sequence[str], path: Path, label: str) -> dict[str, Any]:
        """Memorize ``texts`` with vectors, through the persistent cache if there is one (or
        with stand-in vectors, see ``StandInEmbedder``)."""
        if self.args.stand_in_vectors:
            figures = await self.ingest(texts, StandInEmbedder(), "full", label, path)
            figures["embedding_cache"] = None
            figures["stand_in_vectors"] = True
            return figures
        model = MiniLMEmbedder(threads=1)
        cache = None if self.args.no_cache else PersistentEmbeddingCache(model, self.args.cache)
        try:
            figures = await self.ingest(texts, cache or model, "full", label, path)
        finally:
            if cache is not None:
                await cache.aclose()
            model.close()
        figures["embedding_cache"] = (
            None
            if cache is None
            else {"path": str(cache.path), "hits": cache.hits, "misses": cache.misses}
        )
        return figures

    async def time_queries(
        self, engine: Engine, warmup: str, questions: Sequence[str], label: str
    ) -> dict[str, Any]:
        """The first query (``warmup``: loads the vector index), then every question timed one
        by one; each is asked once, so none is answered from a memo of query embeddings."""
        mem = engine.scope(tenant=TENANT, user=USER, session="questions")
        t0 = time.perf_counter()
        first = await mem.episodic.remember(warmup, limit=10)
        first_s = time.perf_counter() - t0
        index = await engine.indexer.vector_index(NAMESPACE, mem.episodic.provider.partition)
        latencies: list[float] = []
        returned: list[int] = []
        with make_progress(self.console) as progress:
            task = progress.add_task(f"remember ({label})", total=len(questions))
            for question in questions:
                t0 = time.perf_counter()
                hits = await mem.episodic.remember(question, limit=10)
                latencies.append(time.perf_counter() - t0)
                returned.append(len(hits))
                progress.advance(task)
        return {
            "ann_threshold": engine.config.search.ann_threshold,
            "vectors_in_index": len(index),
            "uses_hnsw": index.uses_ann,
            "first_query_ms": first_s * 1e3,
            "first_query_hits": len(first),
            "queries": len(questions),
            "latency_ms": percentiles(latencies),
            "mean_hits": statistics.fmean(returned),
        }

    async def components(
        self, engine: Engine, embedder: MiniLMEmbedder, questions: Sequence[str]
    ) -> dict[str, Any]:
        """The parts of one ``remember``, each timed alone: query embedding, vector-index
        search, the BM25 candidate query (the words hybrid search asks for)."""
        mem = engine.scope(tenant=TENANT, user=USER, session="questions")
        partition: Scope = mem.episodic.provider.partition
        index = await engine.indexer.vector_index(NAMESPACE, partition)
        candidates = engine.config.search.candidates
        embed_s: list[float] = []
        vector_s: list[float] = []
        bm25_s: list[float] = []
        bm25_hits: list[int] = []
        for question in questions:
            t0 = time.perf_counter()
            vector = await embedder.embed_one(question)
            embed_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            index.search(vector, candidates)
            vector_s.append(time.perf_counter() - t0)
            match = await engine.indexer.full_text_match(question, NAMESPACE, partition)
            if match is None:
                continue
            base = RecordQuery(NAMESPACE, partition, alive_at=utc_now())
            t0 = time.perf_counter()
            found = await engine.backend.search.text(base, match, candidates)
            bm25_s.append(time.perf_counter() - t0)
            bm25_hits.append(len(found))
        return {
            "embed_query_ms": percentiles(embed_s),
            "vector_search_ms": percentiles(vector_s),
            "bm25_query_ms": percentiles(bm25_s) if len(bm25_s) > 1 else None,
            "bm25_mean_hits": statistics.fmean(bm25_hits) if bm25_hits else 0.0,
        }

    async def phase_recall(
        self, texts: Sequence[str], warmup: str, questions: Sequence[str]
    ) -> None:
        """Phase 2: store of M, remember latency with HNSW and exact; then rebuild at M."""
        record: dict[str, Any] = {}
        self.results["remember"] = record
        path = self.workdir / "recall.db"
        with phase(record, self.console, f"2. remember latency, M={len(texts):,}"):
            self.db("recall")
            record["store"] = await self.build_store(texts, path, f"store M={len(texts):,}")
            self.save()
            embedder = MiniLMEmbedder(threads=1)  # plain: every query is embedded by the model
            try:
                t0 = time.perf_counter()
                await embedder.load()
                record["query_model_load_s"] = time.perf_counter() - t0
                settings = {
                    "ann": SearchConfig(ann_threshold=self.args.ann_threshold),
                    "exact": SearchConfig(ann_threshold=len(texts) + 1),
                }
                for name, search in settings.items():
                    config = EngineConfig(embedder=embedder, search=search)
                    async with engramdb.open(path, config=config) as engine:
                        timed = await self.time_queries(engine, warmup, questions, name)
                        timed["components"] = await self.components(engine, embedder, questions)
                        record[name] = timed
                    self.save()
            finally:
                embedder.close()
        rebuild: dict[str, Any] = {}
        self.results["rebuild"] = rebuild
        with phase(rebuild, self.console, f"3b. engine.rebuild(), M={len(texts):,}"):
            rebuild |= await self.time_rebuild(path)
        self.save()

    async def time_rebuild(self, path: Path) -> dict[str, Any]:
        """``engine.rebuild()`` on the store at ``path``; checks that vectors survive."""
        async with engramdb.open(path, config=EngineConfig(embedder=None)) as engine:
            events = await engine.events.count()
            with make_progress(self.console) as progress:
                task = progress.add_task("rebuild (events)", total=events)
                report = await engine.rebuild(progress=lambda n: progress.advance(task, n))
                progress.update(task, completed=events)
        vectors = count_vectors(path)
        return {
            "events": report.events,
            "records": report.records,
            "rebuild_s": report.seconds,
            "events_per_s": report.events / report.seconds,
            "vectors_after": vectors,
        }

    # -- phase 3 ------------------------------------------------------------------------------

    async def phase_reindex(self, texts: Sequence[str], model_texts_per_s: float | None) -> None:
        """Phase 3a: ``engine.reindex()`` with the plain model on a store of R."""
        record: dict[str, Any] = {}
        self.results["reindex"] = record
        path = self.workdir / "reindex.db"
        with phase(record, self.console, f"3a. engine.reindex(), R={len(texts):,}"):
            self.db("reindex")
            record["store"] = await self.build_store(texts, path, f"store R={len(texts):,}")
            embedder = MiniLMEmbedder(threads=1)
            try:
                await embedder.load()
                async with engramdb.open(path, config=EngineConfig(embedder=embedder)) as engine:
                    with make_progress(self.console) as progress:
                        task = progress.add_task("reindex (records)", total=len(texts))
                        started = time.perf_counter()
                        done = await engine.reindex(progress=lambda n: progress.advance(task, n))
                        seconds = time.perf_counter() - started
            finally:
                embedder.close()
            record |= {
                "memories": done,
                "reindex_s": seconds,
                "memories_per_s": done / seconds,
                "vectors_after": count_vectors(path),
                "model_texts_per_s": model_texts_per_s,
                "reindex_model_ratio": None
                if model_texts_per_s is None
                else done / seconds / model_texts_per_s,
            }
        self.save()


class StandInEmbedder:
    """Seeded random unit vectors under MiniLM's model id, one per text.

    For timing queries only: a store of 100,000 LongMemEval turns needs about 330,000 vectors
    (the turns and their sentences), over an hour of the model on one thread when the
    embedding cache is cold. With these the store has the same texts, sentences, rows and
    index sizes in about two minutes; every query is still embedded by the real model. The
    rankings mean nothing, and HNSW has more work on random vectors than on real ones.
    """

    model_id = MiniLMEmbedder().model_id
    dimensions = MiniLMEmbedder().dimensions

    async def embed(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float32]]:
        rows = np.empty((len(texts), self.dimensions), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
            rows[row] = np.random.default_rng(seed).standard_normal(self.dimensions)
        return l2_normalize(rows)

    async def embed_one(self, text: str) -> np.ndarray[Any, np.dtype[np.float32]]:
        row: np.ndarray[Any, np.dtype[np.float32]] = (await self.embed([text]))[0]
        return row


def remove_db(path: Path) -> None:
    """Delete the database at ``path`` and its ``-wal`` / ``-shm`` files, if any."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def count_vectors(path: Path) -> int:
    """Stored vectors in the (closed) database at ``path``."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(conn.execute("SELECT count(*) FROM vectors").fetchone()[0])
    finally:
        conn.close()


def fmt_rate(value: float | None) -> str:
    """A rate with thousands separators."""
    return "-" if value is None else f"{value:,.0f}"


def verdict(ok: bool) -> str:
    """Target met or not."""
    return "[green]met[/]" if ok else "[red]missed[/]"


def table(results: dict[str, Any]) -> Table:
    """The human-readable summary."""
    out = Table(title="Engram recall, indexed tier (SQLite, MiniLM int8 on 1 thread)")
    out.add_column("phase")
    out.add_column("measure")
    out.add_column("value", justify="right")
    out.add_column("target")
    mi = results.get("model_vs_ingest")
    if mi:
        n = mi["ingest"]["memories"]
        before, after = mi["model_before"]["texts_per_s"], mi["model_after"]["texts_per_s"]
        out.add_row(
            "1a", f"model alone, N={n:,} (before / after ingest)", f"{before:.1f} / {after:.1f}"
        )
        out.add_row(
            "1b", "ingest with embedding, memories/s", f"{mi['ingest']['memories_per_s']:.1f}"
        )
        ratio = mi["ingest_model_ratio"]
        target = TARGETS["ingest_model_ratio"]
        out.add_row(
            "1b", "ingest / model", f"{ratio:.3f}", f"≥ {target} {verdict(ratio >= target)}"
        )
    wr = results.get("write_no_embedding")
    if wr:
        for p in wr["passes"]:
            rate = p["memories_per_s"]
            target = TARGETS["write_per_s"]
            out.add_row(
                "1c",
                f"write, no embedder, {p['memories']:,}, sync={p['synchronous']}",
                f"{rate:,.0f}/s",
                f"≥ {target:,.0f}/s {verdict(rate >= target)}",
            )
    rm = results.get("remember")
    if rm:
        store = rm["store"]
        cache = store.get("embedding_cache")
        cached = f", cache {cache['hits']:,} hits / {cache['misses']:,} computed" if cache else ""
        cached += ", stand-in vectors" if store.get("stand_in_vectors") else ""
        out.add_row(
            "2", f"store build, M={store['memories']:,}{cached}", f"{store['seconds']:.0f} s"
        )
        for name in ("ann", "exact"):
            r = rm.get(name)
            if not r:
                continue
            how = "HNSW" if r["uses_hnsw"] else "exact"
            lat = r["latency_ms"]
            target = TARGETS["remember_p95_ms"]
            out.add_row(
                "2",
                f"remember ({how}, threshold {r['ann_threshold']:,}) p50/p95/p99 ms",
                f"{lat['p50']:.1f} / {lat['p95']:.1f} / {lat['p99']:.1f}",
                f"p95 ≤ {target} {verdict(lat['p95'] <= target)}",
            )
            out.add_row(
                "2", f"first query ({how}, loads the index)", f"{r['first_query_ms']:,.0f} ms"
            )
            comp = r.get("components")
            if comp:
                bm25 = comp["bm25_query_ms"]
                out.add_row(
                    "2",
                    f"  parts p50 ({how}): embed / vector / bm25 ms",
                    f"{comp['embed_query_ms']['p50']:.1f} / {comp['vector_search_ms']['p50']:.2f}"
                    f" / {bm25['p50'] if bm25 else float('nan'):.1f}",
                )
    ri = results.get("reindex")
    if ri and "memories_per_s" in ri:
        ratio = ri["reindex_model_ratio"]
        out.add_row(
            "3a",
            f"reindex, R={ri['memories']:,}: memories/s (vs model alone)",
            f"{ri['memories_per_s']:.1f}" + ("" if ratio is None else f" ({ratio:.3f})"),
        )
    rb = results.get("rebuild")
    if rb and "rebuild_s" in rb:
        records = sum(rb["records"].values())
        out.add_row(
            "3b",
            f"rebuild, {records:,} records / {rb['events']:,} events",
            f"{rb['rebuild_s']:.1f} s",
        )
    return out


async def warm_up(texts: Sequence[str]) -> None:
    """One memorize and one remember in a throwaway in-memory database, so that lazy imports
    and loads done on first use by the engine itself are not timed in the first pass."""
    async with engramdb.open(":memory:", config=EngineConfig(embedder=None)) as engine:
        mem = engine.scope(tenant=TENANT, user=USER, session="warm-up")
        await mem.episodic.memorize_many(items_for(texts[:BATCH]))
        await mem.episodic.remember("warm up", limit=10)


async def main_async(bench: Bench, corpus: Corpus) -> None:
    """Every selected phase, in order."""
    args = bench.args
    texts = corpus.texts
    await warm_up(texts)
    if "model" in args.phases:
        await bench.phase_model(texts[: args.texts])
    if "write" in args.phases:
        await bench.phase_write(texts[: args.texts], texts[: args.write_texts])
    if "recall" in args.phases:
        await bench.phase_recall(texts[: args.memories], corpus.warmup, corpus.questions)
    if "reindex" in args.phases:
        mi = bench.results.get("model_vs_ingest")
        model = None if mi is None else float(mi["model_texts_per_s_mean"])
        await bench.phase_reindex(texts[: args.reindex_size], model)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--source", choices=("longmemeval", "synthetic"), default="longmemeval")
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=f"LongMemEval_S file (default {DEFAULT_DATA})",
    )
    parser.add_argument("--texts", type=int, help="N, phase 1 (default 5000)")
    parser.add_argument(
        "--write-texts", type=int, help="W, phase 1c's larger write pass (default 100000)"
    )
    parser.add_argument("--memories", type=int, help="M, the store of phase 2 (default 100000)")
    parser.add_argument("--queries", type=int, help="Q, questions timed (default 300)")
    parser.add_argument("--reindex-size", type=int, help="R, the store of phase 3a (default 10000)")
    parser.add_argument(
        "--ann-threshold",
        type=int,
        help="SearchConfig.ann_threshold of the HNSW pass "
        f"(default {SearchConfig().ann_threshold})",
    )
    parser.add_argument(
        "--cache",
        type=Path,
        default=None,
        help=f"embedding cache for building stores (default {default_cache()})",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="build stores without the embedding cache"
    )
    parser.add_argument(
        "--stand-in-vectors",
        action="store_true",
        help="build phase 2's store with seeded random vectors instead of the model's "
        "(queries are still embedded by the model; for latency only)",
    )
    parser.add_argument(
        "--phases", nargs="+", choices=PHASES, default=list(PHASES), help="phases to run"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="keep the databases here (default: a temporary directory, removed at the end)",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON result (default bench/results/recall-<utc>.json)",
    )
    args = parser.parse_args(argv)
    preset = QUICK if args.quick else {}
    sizes = DEFAULTS | {"ann_threshold": SearchConfig().ann_threshold}
    for name, default in sizes.items():
        if getattr(args, name) is None:
            setattr(args, name, preset.get(name, default))
    if min(args.texts, args.write_texts, args.memories, args.reindex_size) < 10:
        parser.error("sizes must be at least 10")
    if args.queries < 2:
        parser.error("--queries must be at least 2")
    if args.cache is None:
        args.cache = default_cache()
    if args.out is None:
        stamp = dt.datetime.now(tz=dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        args.out = RESULTS_DIR / f"recall-{stamp}.json"
    return args


def run(args: argparse.Namespace, console: Console, workdir: Path) -> dict[str, Any]:
    """Load the corpus, run the phases, print the table; returns the results."""
    info = machine()
    console.print(f"machine: {info}")
    console.print(f"load average at start: {loadavg()}")
    needed = max(args.texts, args.write_texts, args.memories, args.reindex_size)
    t0 = time.perf_counter()
    corpus = load_corpus(args.source, args.data, needed, args.queries, args.seed)
    console.print(
        f"corpus: {corpus.note}; {len(corpus.texts):,} texts, {len(corpus.questions)} questions,"
        f" read in {time.perf_counter() - t0:.1f} s"
    )
    cache_note = "none (--no-cache)" if args.no_cache else str(args.cache)
    if args.stand_in_vectors:
        cache_note += " (phase 2: stand-in vectors, --stand-in-vectors)"
    console.print(
        f"store building (phases 2 and 3) embeds through the persistent cache: {cache_note}; "
        "phase 1 and every query use plain MiniLMEmbedder(threads=1), no cache"
    )
    bench = Bench(args, console, workdir)
    bench.document = {
        "benchmark": "recall",
        "command": " ".join(["python", *sys.argv]),
        "machine": info,
        "options": {
            "source": args.source,
            "data": str(args.data) if args.source == "longmemeval" else None,
            "texts": args.texts,
            "write_texts": args.write_texts,
            "memories": args.memories,
            "queries": args.queries,
            "reindex_size": args.reindex_size,
            "ann_threshold": args.ann_threshold,
            "batch": BATCH,
            "cache": None if args.no_cache else str(args.cache),
            "phases": args.phases,
            "quick": args.quick,
            "seed": args.seed,
        },
        "corpus": {
            "note": corpus.note,
            "longmemeval_texts": corpus.longmemeval_texts,
            "synthetic_texts": corpus.synthetic_texts,
            "questions": len(corpus.questions),
        },
        "targets": TARGETS,
        "loadavg_start": loadavg(),
    }
    started = time.perf_counter()
    asyncio.run(main_async(bench, corpus))
    bench.document["loadavg_end"] = loadavg()
    bench.document["total_seconds"] = time.perf_counter() - started
    bench.save()
    console.print(table(bench.results))
    console.print(
        "rates are wall-clock over the timed loop (model loaded beforehand); latencies include "
        "query embedding by the uncached model; 'first query' includes loading the vector index"
    )
    console.print(f"load average at end: {loadavg()}")
    console.print(f"wrote {args.out}")
    return bench.results


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark, print the table and write the JSON result."""
    args = parse_args(argv)
    # Wide enough for the table when output is piped to a file.
    console = Console() if sys.stdout.isatty() else Console(width=140)
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
        run(args, console, args.workdir)
        return
    with tempfile.TemporaryDirectory(prefix="engram-bench-recall-") as tmp:
        run(args, console, Path(tmp))


if __name__ == "__main__":
    main()
