"""The ``engram`` commands of the memory types: memorize, remember, forget, summarize,
capacity, assemble, trace, export."""

from __future__ import annotations

import json
import sys
from contextlib import nullcontext
from dataclasses import asdict
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from engramdb.cli import render
from engramdb.cli.app import JsonFlag, RawFlag, run
from engramdb.cli.progress import bars
from engramdb.core.errors import UsageError

if TYPE_CHECKING:
    from engramdb.core.intent import MemoryItem
    from engramdb.engine import Engine, ScopedMemory
    from engramdb.orchestrator.plugin import MemoryPlugin
    from engramdb.orchestrator.trace import TurnTraced


def _builtin_type_names() -> list[str]:
    """The built-in memory types and file categories (cheap: no installed package is read)."""
    from engramdb.orchestrator.builtin_types import register_builtins
    from engramdb.orchestrator.memory_types import MemoryTypeRegistry

    registry = MemoryTypeRegistry()
    register_builtins(registry)
    return registry.names()


def _known_type(name: str) -> str:
    # Installed types are looked up only when a command runs, not for every start-up.
    from engramdb.orchestrator.memory_types import default_registry

    names = default_registry().names()
    if name not in names:
        raise typer.BadParameter(f"{name!r} is not one of {', '.join(names)}")
    return name


class ForgetMode(StrEnum):
    """``forget --mode`` values."""

    soft = "soft"
    hard = "hard"


TypeOption = Annotated[
    str,
    typer.Option(
        "--type",
        "-t",
        metavar="[" + "|".join(_builtin_type_names()) + "|…]",
        help="Memory type (file categories need --files; installed types are accepted too).",
        callback=_known_type,
    ),
]


def _plugin(memory: ScopedMemory, name: str) -> MemoryPlugin:
    return memory.memory_type(name)


def _items_table(items: list[MemoryItem], title: str) -> Table:
    table = Table(title=title)
    for column in ("#", "score", "id", "text"):
        table.add_column(column)
    for n, item in enumerate(items, 1):
        score = "" if item.score is None else f"{item.score:.3f}"
        table.add_row(str(n), score, item.id or "", render.short(item.text, 90))
    return table


def trace_table(trace: TurnTraced) -> Table:
    """One turn's trace as a table: every operation with its timing and budget use."""
    table = Table(title=f"turn {trace.trace_id[:8]}: {render.short(trace.prompt, 60)}")
    for column in (
        "memory type",
        "operation",
        "status",
        "found",
        "items used",
        "tokens used",
        "ms",
    ):
        table.add_column(column)
    for op in trace.operations:
        table.add_row(
            op.memory_type,
            op.operation,
            op.status,
            str(len(op.outputs)),
            str(op.items_used),
            str(op.tokens_used),
            f"{op.ms:.1f}",
        )
    table.caption = (
        f"{trace.tokens_used}/{trace.token_limit} tokens, "
        f"{trace.items_used} items, {trace.ms:.1f} ms; redacted: "
        + (", ".join(f"{k} {v}" for k, v in trace.redactions.items()) or "nothing")
    )
    return table


def register(app: typer.Typer) -> None:
    """Add the memory-type commands to ``app``."""

    @app.command()
    def memorize(
        ctx: typer.Context,
        text: str,
        memory_type: TypeOption = "episodic",
        role: Annotated[str | None, typer.Option(help="Who said it (user, assistant).")] = None,
        key: Annotated[
            str | None, typer.Option(help="Semantic key (semantic, procedural).")
        ] = None,
        importance: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.5,
        trigger: Annotated[str | None, typer.Option(help="Procedural trigger.")] = None,
        as_json: JsonFlag = False,
    ) -> None:
        """Store TEXT in a memory type."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            from engramdb.core.intent import MemoryItem

            metadata: dict[str, Any] = {"trigger": trigger} if trigger else {}
            item = MemoryItem(
                text=text, role=role, key=key, importance=importance, metadata=metadata
            )
            result = await _plugin(memory, memory_type).memorize(item)
            if ctx.obj.as_json:
                render.emit_json(result.model_dump(mode="json"))
            else:
                render.out.print(f"{result.status} [bold]{result.id}[/bold] in {memory_type}")

        run(ctx, work, as_json)

    @app.command()
    def remember(
        ctx: typer.Context,
        prompt: str,
        memory_type: TypeOption = "episodic",
        limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 10,
        raw: RawFlag = False,
        as_json: JsonFlag = False,
    ) -> None:
        """Items of a memory type relevant to PROMPT (redacted unless --raw)."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            items = await _plugin(memory, memory_type).remember(prompt, limit=limit, raw=raw)
            if ctx.obj.as_json:
                render.emit_json([i.model_dump(mode="json") for i in items])
            else:
                render.table(_items_table(items, f"{memory_type}: {prompt}"))

        run(ctx, work, as_json)

    @app.command()
    def forget(
        ctx: typer.Context,
        instruction: str,
        memory_type: TypeOption = "episodic",
        mode: Annotated[
            ForgetMode, typer.Option(help="soft (hidden, restorable) or hard (removed).")
        ] = ForgetMode.soft,
        as_json: JsonFlag = False,
    ) -> None:
        """Forget what INSTRUCTION selects: id:<id>, key:<key>, oldest, least important,
        before <date>, before turn <N>, older than <N> days, matching "<text>",
        fade "<text>", all; or the same in words ("memory id 5", "delete the oldest 3
        items", "forget what I said about my job", "slightly fade the memory about …")."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            result = await _plugin(memory, memory_type).forget(instruction, mode.value)
            if ctx.obj.as_json:
                render.emit_json(result.model_dump(mode="json"))
            else:
                done = result.forgotten or result.faded
                verb = "faded" if result.faded else f"forgot ({result.mode})"
                render.out.print(f"{verb} {len(done)}: {', '.join(done) or 'nothing'}")

        run(ctx, work, as_json)

    @app.command()
    def summarize(
        ctx: typer.Context,
        memory_type: TypeOption = "episodic",
        scope: Annotated[str, typer.Option(help="all, recent, important, by_tag:<tag>.")] = "all",
        tokens: Annotated[int, typer.Option(min=1, help="Token limit.")] = 300,
        raw: RawFlag = False,
        as_json: JsonFlag = False,
    ) -> None:
        """A summary of a memory type within a token limit (redacted unless --raw)."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            result = await _plugin(memory, memory_type).summarize(scope, tokens, raw=raw)
            if ctx.obj.as_json:
                render.emit_json(result.model_dump(mode="json"))
            else:
                render.out.print(result.text or "(nothing to summarize)")
                render.err.print(
                    f"{result.tokens}/{tokens} tokens from {len(result.source_ids)} items"
                )

        run(ctx, work, as_json)

    @app.command()
    def rescan(ctx: typer.Context, as_json: JsonFlag = False) -> None:
        """Turn the edits a person made to the scope's memory files into events (--files)."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            if memory.files is None:
                raise UsageError("rescan needs the memory files: give --files FOLDER")
            report = await memory.files.rescan()
            if ctx.obj.as_json:
                render.emit_json(asdict(report))
                return
            for change in ("added", "changed", "removed"):
                keys = getattr(report, change)
                render.out.print(f"{change:8} {len(keys)}  {', '.join(keys)}".rstrip())
            if report.ignored:
                render.out.print(f"ignored  {', '.join(report.ignored)} (not a category name)")

        run(ctx, work, as_json)

    @app.command()
    def capacity(
        ctx: typer.Context,
        memory_type: TypeOption = "episodic",
        as_json: JsonFlag = False,
    ) -> None:
        """Items, tokens, limits and eviction policy of a memory type."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            info = await _plugin(memory, memory_type).get_capacity_info()
            if ctx.obj.as_json:
                render.emit_json(info.model_dump(mode="json"))
            else:
                for name, value in info.model_dump().items():
                    render.out.print(f"{name:16} {value}")

        run(ctx, work, as_json)

    @app.command("assemble")
    def assemble_command(
        ctx: typer.Context,
        prompt: str,
        tokens: Annotated[int, typer.Option(min=1, help="Token limit.")] = 1000,
        as_json: JsonFlag = False,
    ) -> None:
        """The context for PROMPT from every memory type, redacted and traced."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            context = await memory.assemble(prompt, tokens)
            if ctx.obj.as_json:
                render.emit_json(
                    {
                        "text": context.text,
                        "tokens": context.tokens,
                        "trace_id": context.trace.trace_id if context.trace else None,
                    }
                )
            else:
                render.out.print(context.text or "(no memories for this prompt)", markup=False)
                render.err.print(f"{context.tokens}/{tokens} tokens")

        run(ctx, work, as_json)

    @app.command()
    def trace(
        ctx: typer.Context,
        last: Annotated[int, typer.Option(min=1, help="How many recent turns.")] = 1,
        as_json: JsonFlag = False,
    ) -> None:
        """Show the trace of the latest turn(s) assembled in this scope."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            from engramdb.orchestrator.trace import last_traces

            traces = await last_traces(engine.events, memory.scope, last)
            if not traces:
                raise UsageError("no turn has been assembled in this scope yet")
            if ctx.obj.as_json:
                render.emit_json([t.model_dump(mode="json") for t in traces])
            else:
                for found in traces:
                    render.out.print(trace_table(found))

        run(ctx, work, as_json)

    @app.command("import")
    def import_(
        ctx: typer.Context,
        source: Annotated[Path, typer.Argument(help="An export (engram export --out FILE).")],
        as_json: JsonFlag = False,
    ) -> None:
        """Restore an export into this empty database: its events as they were, every
        projection rebuilt from them, vectors computed again."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            units = {"append": "events", "rebuild": "events", "embed": "memories"}
            with bars(hidden=ctx.obj.as_json) as shown:
                report = await engine.restore(
                    source,
                    progress=shown.advance,
                    totals=lambda phase, total: shown.begin(phase, total, units[phase]),
                )
            if ctx.obj.as_json:
                render.emit_json(asdict(report))
                return
            render.out.print(
                f"restored {report.events} events: {report.records} records "
                f"(the export listed {report.records_expected}), {report.vectors} vectors, "
                f"in {report.seconds:.1f}s"
            )
            if report.records != report.records_expected:
                render.err.print("[yellow]warning: the record counts differ[/yellow]")

        run(ctx, work, as_json)

    @app.command()
    def export(
        ctx: typer.Context,
        out: Annotated[
            Path | None, typer.Option(help="Write JSON lines here (default: stdout).")
        ] = None,
    ) -> None:
        """Every record and event, as JSON lines."""

        async def work(engine: Engine, memory: ScopedMemory) -> int:
            # A line at a time: an export may be larger than memory.
            with (
                out.open("w", encoding="utf-8")
                if out is not None
                else nullcontext(sys.stdout) as sink
            ):
                count = 0
                async for row in engine.export():
                    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                    count += 1
            return count

        count = run(ctx, work)
        if out is not None:
            render.err.print(f"exported {count} rows to {out}")
