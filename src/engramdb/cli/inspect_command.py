"""``engram inspect``: the web inspector on the chosen database (uvicorn)."""

from __future__ import annotations

from typing import Annotated

import typer

from engramdb.cli import render
from engramdb.cli.serve_command import DbOption, served_target
from engramdb.cli.target import describe_target


def register(app: typer.Typer) -> None:
    """Add ``inspect`` to ``app``."""

    @app.command()
    def inspect(
        ctx: typer.Context,
        host: Annotated[
            str, typer.Option(help="Interface to listen on (it shows every tenant).")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8765,
        db: DbOption = None,
        vectors: Annotated[
            bool, typer.Option(help="Recall with vectors too (loads the local model).")
        ] = True,
    ) -> None:
        """Browse the database in a web page: scopes, memories, recall with score parts,
        graphs, traces and the event log. Read-only."""
        import uvicorn

        from engramdb.engine import EngineConfig
        from engramdb.inspector import create_inspector

        target = served_target(ctx, db)
        config = EngineConfig() if vectors else EngineConfig(embedder=None)
        render.err.print(
            f"Engram inspector on http://{host}:{port}/ (Ctrl-C stops it)\n"
            f"store  {describe_target(target)}",
            markup=False,
            highlight=False,
        )
        uvicorn.run(
            create_inspector(db=target, config=config),
            host=host,
            port=port,
            log_level="warning",
        )
