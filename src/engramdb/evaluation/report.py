"""Reports of benchmark runs: a rich table, a JSON document and a PNG plot.

``build_report`` gathers every figure with the settings, the dataset (path and sha256), the
machine and the protocol followed; ``results_table`` and ``summary_lines`` are what the CLI
prints; ``write_plot`` draws grouped bars of R@k and NDCG@k per category with matplotlib
(the ``eval`` extra), imported only when a plot is asked for.
"""

from __future__ import annotations

import importlib.metadata
import json
import math
import os
import platform
from collections.abc import Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.table import Table

from engramdb.core.errors import UsageError
from engramdb.evaluation.datasets import Dataset
from engramdb.evaluation.harness import OVERALL, EvalSettings, RunResult
from engramdb.index.search_config import SearchConfig

PLOT_INSTALL = "pip install 'engramdb[eval]'"
METRIC_NOTES = (
    "Metrics are LongMemEval's (src/retrieval/eval_utils.py): R@k is recall_all@k, 1 when "
    "every evidence item is in the top k (LongMemEval's headline); recall_any@k is 1 when at "
    "least one is; NDCG@k is ndcg_any@k with LongMemEval's DCG, rel_1 + sum_{i>=2} rel_i/log2(i).",
    "Session level: a session's rank is the rank of its first retrieved turn (sessions deduped "
    "in rank order). Session recall equals LongMemEval's turn-to-session recall; their session "
    "NDCG scores the undeduplicated turn list, so session NDCG here is not comparable to theirs.",
    "Scores are means over questions, per category and overall.",
)


class MissingExtraError(UsageError):
    """An optional dependency is not installed; ``details["install"]`` says how to add it."""


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _figures(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float | None]]:
    return {level: {k: _finite(v) for k, v in row.items()} for level, row in scores.items()}


def machine_info() -> dict[str, Any]:
    """Platform, Python, CPU count, memory and versions of the libraries that set speed."""
    versions: dict[str, str | None] = {}
    for package in ("engramdb", "numpy", "onnxruntime", "tokenizers"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            versions[package] = None
    try:
        memory: int | None = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        memory = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "memory_bytes": memory,
        "versions": versions,
    }


def run_figures(run: RunResult) -> dict[str, Any]:
    """One run as plain data: settings, ingest, latency, category means and every question."""
    return {
        "mode": run.mode,
        "search_config": asdict(SearchConfig(mode=run.mode)),
        "ingest": {
            **asdict(run.ingest),
            "turns_per_s": _finite(run.ingest.turns_per_s),
        },
        "remember_latency_ms": {k: _finite(v) for k, v in run.latency_ms().items()},
        "query_seconds": run.query_seconds,
        "embedding_cache": run.embedding_cache,
        "categories": {
            row.category: {"n": row.n, **_figures(row.scores)}
            for row in run.categories
            if row.category != OVERALL
        },
        "overall": {"n": run.overall.n, **_figures(run.overall.scores)},
        "questions": [
            {
                "question_id": q.question_id,
                "category": q.category,
                "latency_ms": q.latency_s * 1000.0,
                **q.scores,
                "retrieved": list(q.retrieved),
            }
            for q in run.questions
        ],
    }


def build_report(
    dataset: Dataset,
    runs: Sequence[RunResult],
    *,
    selection: dict[str, Any],
    embedder: dict[str, Any],
    command: Sequence[str] = (),
    reranker: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Everything about ``runs`` as JSON-ready data (non-finite numbers become ``null``)."""
    settings = runs[0].settings
    return {
        "engramdb_version": importlib.metadata.version("engramdb"),
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": list(command),
        "dataset": {
            "path": str(dataset.path.resolve()),
            "sha256": dataset.sha256,
            "format": dataset.format,
            "haystacks": len(dataset.haystacks),
            "questions_evaluated": len(dataset.questions),
            "questions_skipped": dataset.skipped,
            "selection": selection,
        },
        "protocol": [*dataset.notes, *protocol_notes(settings)],
        "config": {
            "modes": [run.mode for run in runs],
            "ks": list(settings.ks),
            "granularity": settings.granularity,
            "remember_limit": settings.limit,
            "tenant": settings.tenant,
            "fact_keys": settings.fact_keys,
            "embedder": embedder,
            "reranker": reranker,
        },
        "machine": machine_info(),
        "runs": [run_figures(run) for run in runs],
    }


def protocol_notes(settings: EvalSettings) -> list[str]:
    """How the metrics were computed, for the printed output and the JSON report."""
    return [
        *METRIC_NOTES,
        f"Each question asks remember(limit={settings.limit}) with the question's date as now; "
        "turn metrics read the top k hits.",
        "Ingest time is the wall time of the memorize_many calls, the embedding model loaded "
        "before; bm25 runs have no embedder, as BM25 alone needs no vectors.",
        *(
            [
                "Fact keys: each fact the rules extract from a session is stored as an extra "
                "record carrying its source turn's metadata, so a hit on it counts for that turn."
            ]
            if settings.fact_keys
            else []
        ),
    ]


def write_json(report: dict[str, Any], path: Path) -> None:
    """Write ``report`` as indented JSON (strictly valid: no NaN)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8")


def _cell(value: float) -> str:
    return f"{value:.3f}" if math.isfinite(value) else "–"


def results_table(runs: Sequence[RunResult], title: str) -> Table:
    """Rows: each category and overall (one row per mode); columns: R@k and NDCG@k per level."""
    settings = runs[0].settings
    top = max(settings.ks)
    several = len(runs) > 1
    table = Table(title=title if several else f"{title} ({runs[0].mode})")
    table.add_column("category", no_wrap=True)
    if several:
        table.add_column("mode", no_wrap=True)
    for level in settings.levels:
        for k in settings.ks:
            table.add_column(f"{level}\nR@{k}", justify="right", no_wrap=True)
        table.add_column(f"{level}\nNDCG@{top}", justify="right", no_wrap=True)
    table.add_column("n", justify="right")
    names = [row.category for row in runs[0].categories]
    for position, name in enumerate(names):
        for index, run in enumerate(runs):
            row = run.categories[position]
            cells = []
            for level in settings.levels:
                cells += [_cell(row.scores[level][f"recall_all@{k}"]) for k in settings.ks]
                cells.append(_cell(row.scores[level][f"ndcg_any@{top}"]))
            style = "bold" if name == OVERALL else None
            table.add_row(
                name if index == 0 else "",
                *([run.mode] if several else []),
                *cells,
                str(row.n),
                style=style,
                end_section=index == len(runs) - 1,
            )
    return table


def summary_lines(runs: Sequence[RunResult]) -> list[str]:
    """Per run: ingest throughput, remember latency and overall recall_any."""
    lines = []
    for run in runs:
        latency = run.latency_ms()
        anys = ", ".join(
            f"{level} "
            + "/".join(_cell(run.overall.scores[level][f"recall_any@{k}"]) for k in run.settings.ks)
            for level in run.settings.levels
        )
        ks = "/".join(f"@{k}" for k in run.settings.ks)
        cache = run.embedding_cache
        cached = (
            f", {cache['hits']} embeddings from the cache, {cache['misses']} computed"
            if cache is not None
            else ""
        )
        keys = f" and {run.ingest.fact_keys} fact keys" if run.settings.fact_keys else ""
        lines.append(
            f"{run.mode}: ingest {run.ingest.turns} turns{keys} in {run.ingest.seconds:.1f}s "
            f"({run.ingest.turns_per_s:.0f} turns/s{cached}); remember p50 {latency['p50']:.1f} "
            f"ms, p95 {latency['p95']:.1f} ms; recall_any{ks} {anys}"
        )
    return lines


def write_plot(runs: Sequence[RunResult], path: Path, title: str) -> None:
    """Grouped bars of R@k and NDCG@k (largest k) per category, one panel per level.

    Raises:
        MissingExtraError: matplotlib is not installed.
    """
    try:
        import matplotlib
    except ImportError as exc:
        raise MissingExtraError(
            f"--plot needs matplotlib: {PLOT_INSTALL}", install=PLOT_INSTALL
        ) from exc
    matplotlib.use("Agg", force=True)  # files only: never open a window
    from matplotlib import pyplot

    settings = runs[0].settings
    top = max(settings.ks)
    rows = runs[0].categories
    labels = [f"{row.category}\n(n={row.n})" for row in rows]
    series = [
        (index, run, metric)
        for index, run in enumerate(runs)
        for metric in ("recall_all", "ndcg_any")
    ]
    width = 0.8 / len(series)
    colors = matplotlib.color_sequences["tab10"]
    figure, axes = pyplot.subplots(
        len(settings.levels),
        1,
        figsize=(max(8.0, 2.0 + 0.3 * len(rows) * len(series)), 4.2 * len(settings.levels)),
        squeeze=False,
    )
    for axis, level in zip(axes[:, 0], settings.levels, strict=True):
        for position, (index, run, metric) in enumerate(series):
            values = [row.scores[level][f"{metric}@{top}"] for row in run.categories]
            offsets = [i - 0.4 + width * (position + 0.5) for i in range(len(rows))]
            name = "R" if metric == "recall_all" else "NDCG"
            # One run: a colour per metric; several: a colour per mode, NDCG hatched.
            color = colors[(position if len(runs) == 1 else index) % len(colors)]
            bars = axis.bar(
                offsets,
                [v if math.isfinite(v) else 0.0 for v in values],
                width,
                label=f"{run.mode} {name}@{top}",
                color=color,
                hatch="//" if metric == "ndcg_any" and len(runs) > 1 else None,
                edgecolor="white",
            )
            axis.bar_label(
                bars, labels=[f"{v:.2f}" if math.isfinite(v) else "" for v in values], fontsize=6
            )
        axis.set_xticks(range(len(rows)), labels, fontsize=8)
        axis.set_ylim(0, 1.05)
        axis.set_ylabel(f"{level} level")
        axis.grid(axis="y", alpha=0.3)
        axis.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[0, 0].set_title(title, fontsize=10)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    pyplot.close(figure)
