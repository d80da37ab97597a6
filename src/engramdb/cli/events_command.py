"""``engram events``: the event log — a page of it (``engram events``), or its newest events and
then every new one as it is committed (``engram events tail --follow``).

Following reads the log itself (every backend, no other service needed), polling after the
last position shown: positions are handed out in commit order, so nothing committed is
skipped. With ``--json`` each event is one line of JSON, for other programs to read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated

import typer

from engramdb.cli import render
from engramdb.cli.app import EVENT_TYPES, JsonFlag, run

if TYPE_CHECKING:
    from engramdb.core.events import EventEnvelope
    from engramdb.engine import Engine, ScopedMemory

EventTypes = Annotated[
    list[str] | None,
    typer.Option("--type", "-t", help=f"Only events of this type ({EVENT_TYPES}); repeatable."),
]


def show(events: Sequence[EventEnvelope], as_json: bool) -> None:
    """Print ``events``: a table, or one JSON line each."""
    if as_json:
        for event in events:
            render.out.print(event.model_dump_json(), markup=False, highlight=False, soft_wrap=True)
    elif events:
        render.table(render.event_table(events))


def register(app: typer.Typer) -> None:
    """Add ``events`` (and ``events tail``) to ``app``."""
    events_app = typer.Typer(
        help="Show the event log (oldest first), or follow it (events tail --follow).",
        no_args_is_help=False,
    )

    @events_app.callback(invoke_without_command=True)
    def events(
        ctx: typer.Context,
        event_type: EventTypes = None,
        after: Annotated[int, typer.Option(min=0, help="Only events after this position.")] = 0,
        limit: Annotated[int, typer.Option("--limit", "-n", min=1)] = 50,
        as_json: JsonFlag = False,
    ) -> None:
        """Show the event log (oldest first)."""
        if ctx.invoked_subcommand is not None:
            return

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            from engramdb.storage.backend import EventQuery

            found = await engine.events.read(
                EventQuery(
                    event_types=tuple(event_type) if event_type else None,
                    after=after,
                    limit=limit,
                )
            )
            if ctx.obj.as_json:
                render.emit_json([e.model_dump(mode="json") for e in found])
            else:
                render.table(render.event_table(found))

        run(ctx, work, as_json)

    @events_app.command()
    def tail(
        ctx: typer.Context,
        event_type: EventTypes = None,
        lines: Annotated[
            int, typer.Option("--lines", "-n", min=0, help="How many of the newest to show.")
        ] = 10,
        follow: Annotated[
            bool, typer.Option("--follow", "-f", help="Keep showing new events as they come.")
        ] = False,
        interval: Annotated[
            float, typer.Option(min=0.01, max=60, help="Seconds between looks at the log.")
        ] = 0.2,
        as_json: JsonFlag = False,
    ) -> None:
        """The newest events; with --follow, every new one as it is committed (Ctrl-C
        stops)."""

        async def work(engine: Engine, memory: ScopedMemory) -> None:
            from engramdb.storage.backend import EventQuery

            types = tuple(event_type) if event_type else None
            newest = (
                await engine.events.read(
                    EventQuery(event_types=types, newest_first=True, limit=lines)
                )
                if lines
                else []
            )
            newest.reverse()
            show(newest, ctx.obj.as_json)
            position = newest[-1].position if newest else await engine.events.last_position()
            while follow:
                found = await engine.events.read(
                    EventQuery(event_types=types, after=position or 0, limit=500)
                )
                if found:
                    show(found, ctx.obj.as_json)
                    position = found[-1].position
                else:
                    await asyncio.sleep(interval)

        try:
            run(ctx, work, as_json)
        except KeyboardInterrupt:
            raise typer.Exit(0) from None

    app.add_typer(events_app, name="events")
