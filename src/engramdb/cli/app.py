"""The ``engram`` command line: add, get, recall, delete, list, events, rebuild, reindex, stats,
sweep.

Every command opens the database given by ``--db`` (or ``ENGRAM_DB``, or a file in the user's
data directory), works in the scope given by ``--tenant``/``--user``/``--agent``/``--session``,
and prints a table, or JSON with ``--json``. Errors are one line on stderr with exit code 2 for
a bad request and 1 for a failure of the system.

The engine and its models are imported when a command runs, not when the command line is
parsed, so ``engram --help`` starts at once.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from rich.markup import escape

import engramdb
from engramdb.cli import render
from engramdb.cli.progress import bars
from engramdb.cli.target import resolve_target
from engramdb.core.errors import (
    EngramError,
    PartialRecallWarning,
    StaleVectorsWarning,
    UsageError,
    ValidationError,
)

if TYPE_CHECKING:
    from engramdb.engine import Engine, ScopedMemory

T = TypeVar("T")
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")]
RawFlag = Annotated[bool, typer.Option("--raw", help="Show memories as stored, without redaction.")]
#: The content types of rfc-2001; others may be used as well.
CONTENT_TYPES = "activity, profile, event, fact, conversation, reasoning, research, entity"
#: The event types of the log (checked against the domain events by a test).
EVENT_TYPES = (
    "memory.written, memory.deleted, memory.restored, memory.linked, memory.invalidated, "
    "memory.indexed, memory.expired, memory.provider.registered, turn.traced"
)
ContentTypes = Annotated[
    list[str] | None,
    typer.Option(
        "--type", "-t", help=f"Only this content type ({CONTENT_TYPES}, or your own); repeatable."
    ),
]
app = typer.Typer(
    help="Engram: long-term memory for LLM agents.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


@dataclass(frozen=True)
class Settings:
    """The global options of one invocation (``db`` is ``None`` for the default file)."""

    db: str | None
    as_json: bool
    tenant: str
    user: str | None
    agent: str | None
    session: str | None
    files: str | None = None

    def target(self) -> str:
        """The database to open (see :func:`engramdb.cli.target.resolve_target`)."""
        return resolve_target(self.db)


def show_version(value: bool) -> None:
    """``--version``: print the version and stop."""
    if value:
        print(f"engram {engramdb.__version__}")
        raise typer.Exit


@app.callback()
def main_options(
    ctx: typer.Context,
    db: Annotated[
        str | None,
        typer.Option(
            envvar="ENGRAM_DB",
            help="Database: a SQLite file (its folder must exist) or a postgresql:// URL "
            "(default: engram.db in the user data folder).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of tables.")] = False,
    tenant: Annotated[str, typer.Option(envvar="ENGRAM_TENANT")] = "default",
    user: Annotated[str | None, typer.Option(envvar="ENGRAM_USER")] = None,
    agent: Annotated[str | None, typer.Option(envvar="ENGRAM_AGENT")] = None,
    session: Annotated[str | None, typer.Option(envvar="ENGRAM_SESSION")] = None,
    files: Annotated[
        str | None,
        typer.Option(
            envvar="ENGRAM_FILES",
            help="Folder of the memory files a person can read and edit (one markdown file "
            "per category: activity, profile, event, …); off unless given.",
        ),
    ] = None,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=show_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Engram: long-term memory for LLM agents."""
    ctx.obj = Settings(db, as_json, tenant, user, agent, session, files)


def run(
    ctx: typer.Context, work: Callable[[Engine, ScopedMemory], Awaitable[T]], as_json: bool = False
) -> T:
    """Open the database, run ``work`` in the chosen scope, close; errors become one line.

    ``--json`` may stand before the command or after it.
    """
    settings = settings_of(ctx, as_json)

    async def main() -> T:
        from engramdb.engine import EngineConfig
        from engramdb.engine import open as open_engine

        config = EngineConfig(files=settings.files) if settings.files else None
        async with open_engine(settings.target(), config=config) as engine:
            memory = engine.scope(
                tenant=settings.tenant,
                user=settings.user,
                agent=settings.agent,
                session=settings.session,
            )
            return await work(engine, memory)

    return run_unopened(main)


def settings_of(ctx: typer.Context, as_json: bool) -> Settings:
    """The command's settings, with ``--json`` given after the command taken in."""
    settings: Settings = ctx.obj
    if as_json:
        settings = ctx.obj = replace(settings, as_json=True)
    return settings


#: Warnings a command prints as a ``warning:`` line of its own.
_SHOWN_WARNINGS = (StaleVectorsWarning, PartialRecallWarning)


def fail(exc: EngramError) -> typer.Exit:
    """Print ``exc`` as one ``error:`` line; the exit to raise (2: the caller's mistake)."""
    # The message is text, not markup: "engramdb[mcp]" must print as written.
    render.err.print(f"[red]error:[/red] {escape(exc.message)}", markup=True, highlight=False)
    return typer.Exit(2 if isinstance(exc, UsageError) else 1)


def run_unopened(main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run ``main`` (which opens what it needs itself); errors become one line."""
    try:
        with warnings.catch_warnings(record=True) as caught:
            for category in _SHOWN_WARNINGS:
                warnings.simplefilter("always", category)
            try:
                return asyncio.run(main())
            finally:
                for each in caught:
                    if issubclass(each.category, _SHOWN_WARNINGS):
                        render.err.print(
                            f"[yellow]warning:[/yellow] {escape(str(each.message))}",
                            markup=True,
                            highlight=False,
                        )
                    else:
                        warnings.showwarning(
                            each.message, each.category, each.filename, each.lineno
                        )
    except EngramError as exc:
        raise fail(exc) from None


def parse_meta(pairs: list[str]) -> dict[str, Any]:
    """``k=v`` pairs; a value that parses as JSON is taken as JSON, else as a string."""
    meta: dict[str, Any] = {}
    for pair in pairs:
        name, sep, raw = pair.partition("=")
        if not sep or not name:
            raise ValidationError(f"metadata must be key=value, got {pair!r}")
        try:
            meta[name] = json.loads(raw)
        except json.JSONDecodeError:
            meta[name] = raw
        except RecursionError:
            raise ValidationError(f"metadata {name!r} is nested too deep") from None
    return meta


@app.command()
def add(
    ctx: typer.Context,
    key: str,
    value: str,
    content_type: Annotated[
        str, typer.Option("--type", "-t", help=f"Content type: {CONTENT_TYPES}, or your own.")
    ] = "fact",
    meta: Annotated[list[str] | None, typer.Option("--meta", "-m", help="key=value")] = None,
    ttl: Annotated[float | None, typer.Option(help="Expire after this many seconds.")] = None,
    json_value: Annotated[bool, typer.Option("--json-value", help="Parse VALUE as JSON.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Store VALUE under KEY in persistent memory."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        from engramdb.core.types import MemoryTier
        from engramdb.core.validation import parse_json

        parsed: Any = parse_json(value, what="VALUE") if json_value else value
        if ttl is not None and not (math.isfinite(ttl) and ttl > 0):
            raise ValidationError("--ttl must be a positive number of seconds")
        ttl_ms = None if ttl is None else max(1, round(ttl * 1000))
        entry = await memory.manager.store(
            key,
            parsed,
            content_type=content_type,
            tier=MemoryTier.PERSISTENT,
            metadata=parse_meta(meta or []),
            ttl_ms=ttl_ms,
        )
        if ctx.obj.as_json:
            render.emit_json(entry.model_dump(mode="json"))
        else:
            render.out.print(f"stored [bold]{entry.key}[/bold] ({entry.content_type})")

    run(ctx, work, as_json)


@app.command()
def get(ctx: typer.Context, key: str, as_json: JsonFlag = False) -> None:
    """Show the entry stored under KEY."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        entry = await memory.manager.read(key)
        if entry is None:
            raise UsageError(f"no entry {key!r} in this scope")
        if ctx.obj.as_json:
            render.emit_json(entry.model_dump(mode="json"))
        else:
            render.table(render.entry_table([entry], key))

    run(ctx, work, as_json)


@app.command()
def recall(
    ctx: typer.Context,
    query: str,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, max=1000)] = 10,
    content_type: ContentTypes = None,
    as_json: JsonFlag = False,
) -> None:
    """Find the memories that best match QUERY across all tiers."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        from engramdb.core.types import RecallQuery

        results = await memory.manager.recall(
            RecallQuery(query=query, limit=limit, content_types=content_type)
        )
        if ctx.obj.as_json:
            render.emit_json([r.model_dump(mode="json") for r in results])
        else:
            render.table(render.recall_table(results, query))

    run(ctx, work, as_json)


@app.command()
def delete(ctx: typer.Context, key: str, as_json: JsonFlag = False) -> None:
    """Delete KEY (its history stays in the event log)."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        removed = await memory.manager.delete(key)
        if not removed:
            raise UsageError(f"no entry {key!r} in this scope")
        if ctx.obj.as_json:
            render.emit_json({"key": key, "deleted_from": removed})
        else:
            render.out.print(f"deleted [bold]{key}[/bold]")

    run(ctx, work, as_json)


@app.command("list")
def list_entries(
    ctx: typer.Context,
    prefix: Annotated[str | None, typer.Option(help="Only keys starting with this.")] = None,
    content_type: ContentTypes = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1)] = 100,
    as_json: JsonFlag = False,
) -> None:
    """List stored entries of this scope, by key."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        keys = await memory.persistent.list_keys(content_types=content_type, prefix=prefix)
        entries = [e for k in keys[:limit] if (e := await memory.persistent.read(k)) is not None]
        if ctx.obj.as_json:
            render.emit_json([e.model_dump(mode="json") for e in entries])
        else:
            render.table(render.entry_table(entries, f"{len(keys)} entries"))

    run(ctx, work, as_json)


@app.command()
def rebuild(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Recompute every projection from the event log."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        with bars(hidden=ctx.obj.as_json) as shown:
            shown.begin("rebuild", await engine.events.count(), "events")
            report = await engine.rebuild(progress=shown.advancer("rebuild"))
        if ctx.obj.as_json:
            render.emit_json(asdict(report))
        else:
            counts = ", ".join(f"{ns}: {n}" for ns, n in report.records.items())
            render.out.print(
                f"rebuilt from {report.events} events in {report.seconds:.2f}s ({counts})"
            )

    run(ctx, work, as_json)


@app.command()
def reindex(
    ctx: typer.Context,
    stale: Annotated[
        bool,
        typer.Option(
            "--stale",
            help="Only memories without a vector of the current model (resumable).",
        ),
    ] = False,
    as_json: JsonFlag = False,
) -> None:
    """Recompute every embedding vector with the current model (after a model change)."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        model = engine.indexer.model
        with bars(hidden=ctx.obj.as_json) as shown:
            shown.begin("reindex", await engine.reindex_total(stale_only=stale), "memories")
            started = time.perf_counter()
            done = await engine.reindex(progress=shown.advancer("reindex"), stale_only=stale)
            seconds = time.perf_counter() - started
        if ctx.obj.as_json:
            render.emit_json({"vectors": done, "model": model, "seconds": seconds})
        elif not model:
            render.out.print("no embedding model is configured: nothing to reindex")
        else:
            render.out.print(f"embedded {done} memories with {model} in {seconds:.2f}s")

    run(ctx, work, as_json)


@app.command()
def stats(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Show record and event counts and the database size."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        result = await engine.stats()
        vectors = await engine.vector_counts()
        model = engine.indexer.model
        if ctx.obj.as_json:
            render.emit_json({**asdict(result), "vectors": vectors, "model": model})
            return
        render.out.print(
            f"database  {result.url}\nrecords   {result.records}\n"
            f"events    {result.events}\nsize      {render.size(result.size_bytes)}",
            highlight=False,
        )
        for name, count in vectors.items():
            note = "" if name == model else "  (not the current model: engram reindex --stale)"
            render.out.print(f"vectors   {count} of {name}{note}", highlight=False)

    run(ctx, work, as_json)


@app.command()
def sweep(ctx: typer.Context, as_json: JsonFlag = False) -> None:
    """Remove expired entries (each leaves a memory.expired event)."""

    async def work(engine: Engine, memory: ScopedMemory) -> None:
        count = await engine.sweep_expired()
        if ctx.obj.as_json:
            render.emit_json({"expired": count})
        else:
            render.out.print(f"expired {count} entries")

    run(ctx, work, as_json)


from engramdb.cli.admin_commands import register as register_admin  # noqa: E402
from engramdb.cli.eval_command import register as register_eval  # noqa: E402
from engramdb.cli.events_command import register as register_events  # noqa: E402
from engramdb.cli.ingest_command import register as register_ingest  # noqa: E402
from engramdb.cli.inspect_command import register as register_inspect  # noqa: E402
from engramdb.cli.mcp_command import register as register_mcp  # noqa: E402
from engramdb.cli.memory_commands import register as register_memory  # noqa: E402
from engramdb.cli.serve_command import register as register_serve  # noqa: E402

register_events(app)
register_eval(app)
register_memory(app)
register_serve(app)
register_inspect(app)
register_admin(app)
register_ingest(app)
register_mcp(app)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="engram")
    sys.exit(0)
