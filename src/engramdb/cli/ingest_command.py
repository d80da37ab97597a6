"""``engram ingest FILE``: form memories from a conversation file (see
``engramdb.formation.sources`` for the forms read) and print what changed per category, or
JSON with ``--json``. The file is read and checked before the database is opened, so a bad
file changes nothing. ``register(app)`` adds the command to the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table

from engramdb.cli import render
from engramdb.cli.app import JsonFlag, fail, run, settings_of
from engramdb.cli.progress import bars
from engramdb.core.errors import EngramError

if TYPE_CHECKING:
    from engramdb.engine import Engine, ScopedMemory
    from engramdb.formation.ingest import IngestReport

_SOURCE_HELP = "JSON or JSON lines of messages, or a LongMemEval / LoCoMo file."
_UNITS = {"store": "turns", "extract": "turns", "form": "items"}
_COLUMNS = ("added", "updated", "superseded", "unchanged", "ended", "contradicted")


def report_table(report: IngestReport) -> Table:
    """The outcome counts per category."""
    found = Table(title=f"formed by {report.extractor} from {report.turns} turns")
    found.add_column("category")
    for name in _COLUMNS:
        found.add_column(name, justify="right")
    for category, counts in report.categories.items():
        found.add_row(category, *(str(getattr(counts, name)) for name in _COLUMNS))
    return found


def items_table(report: IngestReport, limit: int) -> Table:
    """The items that changed something, with their source turns (the first ``limit``)."""
    changed = [o for o in report.outcomes if o.decision != "unchanged"]
    shown = Table(title=f"changes ({len(changed)})")
    for name in ("decision", "key", "fact", "sources"):
        shown.add_column(name)
    for outcome in changed[:limit]:
        shown.add_row(
            outcome.decision,
            escape(outcome.key),
            escape(render.short(outcome.item.text, 70)),
            escape(", ".join(outcome.item.sources)),
        )
    return shown


def register(app: typer.Typer) -> None:
    """Add ``ingest`` to ``app``."""

    @app.command()
    def ingest(
        ctx: typer.Context,
        source: Annotated[Path, typer.Argument(help=_SOURCE_HELP)],
        haystack: Annotated[
            str | None,
            typer.Option(help="The haystack of a benchmark file to ingest (its question id)."),
        ] = None,
        show: Annotated[int, typer.Option(help="Changed items to list.", min=0)] = 20,
        as_json: JsonFlag = False,
    ) -> None:
        """Store a conversation as episodes and form profile facts, events, activities and
        graph facts from it; print what was added, updated, superseded or left unchanged."""
        settings = settings_of(ctx, as_json)
        try:
            from engramdb.formation.sources import read_messages

            messages = read_messages(source, haystack=haystack)
        except EngramError as exc:
            raise fail(exc) from None

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            with bars(hidden=settings.as_json or len(messages) < 50) as shown:
                report = await memory.ingest(
                    messages,
                    progress=shown.advance,
                    totals=lambda phase, total: shown.begin(phase, total, _UNITS[phase]),
                )
            if settings.as_json:
                render.emit_json(report.to_dict())
                return
            render.out.print(
                f"stored {report.episodes} episodes; extracted {report.extracted} items, "
                f"{report.entities} entity and {report.relations} relation writes to the "
                f"graph in {report.seconds:.2f}s",
                highlight=False,
            )
            render.table(report_table(report))
            if not report.extracted:
                render.out.print("nothing extracted", highlight=False)
            elif any(o.decision != "unchanged" for o in report.outcomes):
                render.table(items_table(report, show))
            for note in [*report.notes, report.theory_of_mind]:
                if note:
                    render.out.print(f"note: {escape(note)}", highlight=False)

        run(ctx, work, as_json)
