"""``engram eval``: run a retrieval benchmark (LongMemEval or LoCoMo) through the public API.

Each run opens a fresh engine in a temporary folder, ingests the benchmark's conversations,
asks its questions and prints LongMemEval's metrics per question category; ``--out`` and
``--plot`` write a JSON report and a PNG chart. ``register(app)`` adds the command to the CLI.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import platformdirs
import typer

from engramdb.cli import render
from engramdb.cli.app import fail
from engramdb.cli.progress import bars
from engramdb.core.errors import EngramError, InvalidValueError, UsageError, ValidationError

if TYPE_CHECKING:
    from engramdb.evaluation.datasets import Dataset
    from engramdb.evaluation.harness import EvalSettings, RunResult
    from engramdb.index.embedder import Embedder
    from engramdb.index.search_config import SearchMode


class ModeChoice(StrEnum):
    """``--mode`` values."""

    hybrid = "hybrid"
    bm25 = "bm25"
    vector = "vector"


class GranularityChoice(StrEnum):
    """``--granularity`` values."""

    turn = "turn"
    session = "session"


def default_embedding_cache() -> Path:
    """Where embeddings are cached between runs unless told otherwise."""
    return Path(platformdirs.user_cache_dir("engram")) / "embeddings.sqlite"


def parse_ks(values: list[str] | None) -> tuple[int, ...]:
    """``--k 5 --k 10`` or ``--k 5,10``: distinct cut-offs, ascending."""
    ks: set[int] = set()
    for value in values or ["5", "10"]:
        for part in value.split(","):
            try:
                k = int(part)
            except ValueError:
                raise ValidationError(f"--k takes whole numbers, got {part!r}") from None
            if k < 1:
                raise ValidationError(f"--k must be at least 1, got {k}")
            ks.add(k)
    return tuple(sorted(ks))


def _embedder_info(embedder: Embedder) -> dict[str, Any]:
    from engramdb.index.embedding_cache import PersistentEmbeddingCache

    info: dict[str, Any] = {"model_id": embedder.model_id, "dimensions": embedder.dimensions}
    if isinstance(embedder, PersistentEmbeddingCache):
        info["cache"] = {"path": str(embedder.path), "hits": embedder.hits}
        info["cache"]["misses"] = embedder.misses
    else:
        info["cache"] = None
    return info


def _print_header(dataset: Dataset, settings: EvalSettings, selection: dict[str, Any]) -> None:
    from engramdb.evaluation.report import protocol_notes

    skipped = ", ".join(f"{n} {reason}" for reason, n in sorted(dataset.skipped.items()))
    render.out.print(
        f"[bold]{dataset.path.name}[/bold] ({dataset.format}): "
        f"{len(dataset.questions)} questions evaluated over {len(dataset.haystacks)} "
        f"haystacks; skipped: {skipped or 'none'}"
        + (f"; selection: {selection}" if selection else ""),
        highlight=False,
    )
    for note in (*dataset.notes, *protocol_notes(settings)):
        render.out.print(f"  · {note}", highlight=False, markup=False)


def eval_command(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            exists=True, dir_okay=False, help="LongMemEval or LoCoMo file (.json or .json.xz)."
        ),
    ],
    limit_questions: Annotated[
        int | None,
        typer.Option("--limit-questions", min=1, help="Only the first N questions evaluated."),
    ] = None,
    sample: Annotated[
        int | None, typer.Option(min=1, help="A random sample of N questions (see --seed).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed of --sample.")] = 0,
    mode: Annotated[ModeChoice, typer.Option(help="Search mode.")] = ModeChoice.hybrid,
    compare: Annotated[
        bool, typer.Option("--compare", help="Run bm25, vector and hybrid; one table.")
    ] = False,
    k: Annotated[
        list[str] | None, typer.Option("--k", help="Cut-offs: --k 5 --k 10 or --k 5,10.")
    ] = None,
    depth: Annotated[
        int, typer.Option(min=1, help="Hits asked per question (session metrics dedupe them).")
    ] = 50,
    granularity: Annotated[
        GranularityChoice, typer.Option(help="Index each turn, or each session as one text.")
    ] = GranularityChoice.turn,
    out: Annotated[Path | None, typer.Option(help="Write the JSON report here.")] = None,
    plot: Annotated[Path | None, typer.Option(help="Write a PNG chart here.")] = None,
    embedding_cache: Annotated[
        Path | None,
        typer.Option(
            help="SQLite file caching embeddings across runs (default: in the user cache)."
        ),
    ] = None,
    no_embedding_cache: Annotated[
        bool, typer.Option("--no-embedding-cache", help="Embed everything afresh.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the JSON report.")] = False,
    set_search: Annotated[
        list[str] | None,
        typer.Option("--set", help="A search setting, e.g. --set rrf_k=30 (repeatable)."),
    ] = None,
    fact_keys: Annotated[
        bool,
        typer.Option(
            "--fact-keys",
            help="Store the facts the rules extract as extra keys of their source turns.",
        ),
    ] = False,
    rerank_url: Annotated[
        str | None,
        typer.Option(
            help="A /rerank endpoint's API root for the hybrid run (key: $ENGRAM_RERANK_API_KEY)."
        ),
    ] = None,
    rerank_model: Annotated[
        str | None, typer.Option(help="The reranking model that endpoint serves.")
    ] = None,
) -> None:
    """Measure retrieval on a LongMemEval or LoCoMo file: recall and NDCG per category."""
    from rich.console import Console
    from rich.measure import Measurement

    from engramdb.evaluation.datasets import load_dataset, select_questions
    from engramdb.evaluation.harness import MODES, EvalSettings
    from engramdb.evaluation.report import (
        build_report,
        results_table,
        summary_lines,
        write_json,
        write_plot,
    )

    as_json = as_json or bool(getattr(ctx.obj, "as_json", False))
    try:
        settings = EvalSettings(
            mode=mode.value,
            ks=parse_ks(k),
            granularity=granularity.value,
            depth=depth,
            search=parse_search_settings(set_search or []),
            fact_keys=fact_keys,
        )
        dataset = select_questions(
            load_dataset(path), limit=limit_questions, sample=sample, seed=seed
        )
        if not dataset.questions:
            raise UsageError(f"{path} holds no question to evaluate")
        selection = {
            name: value
            for name, value in (("limit", limit_questions), ("sample", sample))
            if value is not None
        }
        if sample is not None:
            selection["seed"] = seed
        if (rerank_url is None) != (rerank_model is None):
            raise UsageError("--rerank-url and --rerank-model go together")
        reranker = (
            None
            if rerank_url is None or rerank_model is None
            else {"url": rerank_url, "model": rerank_model}
        )
        if not as_json:
            _print_header(dataset, settings, selection)
        modes: tuple[SearchMode, ...] = MODES if compare else (settings.mode,)
        cache = None if no_embedding_cache else embedding_cache or default_embedding_cache()
        runs, embedder = asyncio.run(_run(dataset, settings, modes, cache, reranker, quiet=as_json))
        report = build_report(
            dataset,
            runs,
            selection=selection,
            embedder=embedder,
            command=sys.argv,
            reranker=reranker,
        )
        title = f"{dataset.path.name}: retrieval, R@k = recall_all@k"
        if out is not None:
            write_json(report, out)
        if plot is not None:
            write_plot(runs, plot, title)
    except EngramError as exc:
        raise fail(exc) from None
    if as_json:
        render.emit_json(report)
        return
    table = results_table(runs, title)
    # Wider than the terminal rather than cut: the figures must stay whole.
    needed = Measurement.get(render.out, render.out.options.update_width(1000), table).maximum
    Console(soft_wrap=True, width=max(render.out.width, needed)).print(table)
    for line in summary_lines(runs):
        render.out.print(line, highlight=False)
    for written in (out, plot):
        if written is not None:
            render.out.print(f"wrote {written}", highlight=False)


async def _run(
    dataset: Dataset,
    settings: EvalSettings,
    modes: tuple[SearchMode, ...],
    cache: Path | None,
    rerank: dict[str, str] | None,
    *,
    quiet: bool,
) -> tuple[list[RunResult], dict[str, Any]]:
    from engramdb.evaluation.harness import eval_embedder, evaluate_modes
    from engramdb.index.http_reranker import HttpReranker

    with bars(hidden=quiet, label_width=14) as shown:
        reranker = (
            None
            if rerank is None
            else HttpReranker(
                rerank["model"],
                base_url=rerank["url"],
                api_key=os.environ.get("ENGRAM_RERANK_API_KEY"),
            )
        )
        try:
            async with eval_embedder(cache) as embedder:
                runs = await evaluate_modes(
                    dataset,
                    settings,
                    modes,
                    embedder=embedder,
                    progress=shown,
                    reranker=reranker,
                )
                return runs, _embedder_info(embedder)
        finally:
            if reranker is not None:
                await reranker.aclose()


def _flag(raw: str) -> bool:
    # bool("false") is True: the words are read, not the string's emptiness.
    words = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}
    if raw.lower() not in words:
        raise ValueError(raw)
    return words[raw.lower()]


def parse_search_settings(pairs: list[str]) -> dict[str, Any]:
    """``field=value`` pairs as ``SearchConfig`` fields, each value of the field's type."""
    from engramdb.index.search_config import SearchConfig

    fields = {f.name: f for f in dataclasses.fields(SearchConfig)}
    settings: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or name not in fields or name == "mode":
            known = ", ".join(sorted(set(fields) - {"mode"}))
            raise UsageError(f"--set takes field=value with a field of: {known}; got {pair!r}")
        kind = type(getattr(SearchConfig(), name))
        try:
            settings[name] = _flag(raw) if kind is bool else kind(raw)
        except ValueError as exc:
            raise UsageError(f"--set {name} needs a {kind.__name__}, got {raw!r}") from exc
    try:
        SearchConfig(**settings)
    except InvalidValueError as exc:
        raise UsageError(f"--set: {exc}") from exc
    return settings


def register(app: typer.Typer) -> None:
    """Add ``engram eval`` to ``app``."""
    app.command("eval")(eval_command)
