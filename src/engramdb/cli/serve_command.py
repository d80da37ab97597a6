"""``engram serve``: the REST service on the chosen database (uvicorn)."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer

from engramdb.cli import render
from engramdb.cli.app import fail, settings_of
from engramdb.cli.target import describe_target, resolve_target
from engramdb.core.errors import UsageError

#: ``--db`` of ``serve`` and ``inspect``: the same as the global option, given after the command.
DbOption = Annotated[
    str | None,
    typer.Option(help="Database path or postgresql:// URL (default: the global --db)."),
]

#: A request's line and headers may be this long: a long query reaches the service, which
#: answers it in JSON (the HTTP parser's own 16 KiB limit answers in plain text).
MAX_REQUEST_HEAD = 1_048_576


class AuthChoice(StrEnum):
    """``serve --auth`` values."""

    local = "local"
    production = "production"


AUTH_NOTES = {
    AuthChoice.local: "local (one tenant, no credentials)",
    AuthChoice.production: "production (API keys and HS256 JWTs)",
}


def served_target(ctx: typer.Context, db: str | None) -> str:
    """The database a server opens: its own ``--db``, else the global one; a mistyped
    SQLite path ends the command with an ``error:`` line."""
    try:
        return resolve_target(db or settings_of(ctx, False).db)
    except UsageError as exc:
        raise fail(exc) from None


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""

    @app.command()
    def serve(
        ctx: typer.Context,
        host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
        db: DbOption = None,
        auth: Annotated[
            AuthChoice,
            typer.Option(envvar="ENGRAM_AUTH", help="local (no credentials) or production."),
        ] = AuthChoice.local,
        jwt_secret: Annotated[
            str | None, typer.Option(envvar="ENGRAM_JWT_SECRET", help="HS256 secret of JWTs.")
        ] = None,
        jwt_audience: Annotated[str | None, typer.Option(envvar="ENGRAM_JWT_AUDIENCE")] = None,
        max_body_bytes: Annotated[int, typer.Option(min=1024)] = 2 * 1024 * 1024,
        vectors: Annotated[
            bool, typer.Option(help="Embed memories for vector search (the local model).")
        ] = True,
        nats: Annotated[
            str | None,
            typer.Option(
                envvar="ENGRAM_NATS_URL",
                help="Publish the event log to NATS JetStream at this URL (nats://host:4222).",
            ),
        ] = None,
        auto_formation: Annotated[
            bool,
            typer.Option(
                envvar="ENGRAM_AUTO_FORMATION",
                help="Form memories from every episode and turn stored, in the background.",
            ),
        ] = False,
        workers: Annotated[
            int,
            typer.Option(
                min=1,
                envvar="ENGRAM_WORKERS",
                help="Server processes, each with its own engine and model (PostgreSQL only "
                "above 1).",
            ),
        ] = 1,
    ) -> None:
        """Serve the REST API (OpenAPI at /docs); stateless, so several instances may
        share one PostgreSQL database."""
        import uvicorn

        from engramdb.providers.files import files_root
        from engramdb.service.app import create_app
        from engramdb.service.settings import AuthMode, ServiceSettings
        from engramdb.service.workers import (
            FACTORY,
            SPEC_VARIABLE,
            check_workers,
            engine_config,
            worker_environment,
        )

        mode: AuthMode = "local" if auth is AuthChoice.local else "production"
        target = served_target(ctx, db)
        files = settings_of(ctx, False).files or None  # as every other command: "" keeps none
        try:
            if files is not None:
                files_root(files)  # a folder no file could be written under: refused here
            settings = ServiceSettings(
                auth=mode,
                jwt_secret=jwt_secret,
                jwt_audience=jwt_audience,
                max_body_bytes=max_body_bytes,
                nats_url=nats,
            )
            check_workers(target, workers)
        except UsageError as exc:
            raise fail(exc) from None
        render.err.print(
            f"Engram REST service on http://{host}:{port}/ (API docs at /docs, MCP at /mcp; "
            f"Ctrl-C stops it)\nauth   {AUTH_NOTES[auth]}\nstore  {describe_target(target)}"
            + (f"\nevents published to {nats}" if nats else "")
            + (f"\nworkers {workers} processes" if workers > 1 else "")
            + (f"\nfiles  {files}" if files else ""),
            markup=False,
            highlight=False,
        )
        if workers > 1:
            # Each worker process builds its own application (and engine) from the spec.
            os.environ[SPEC_VARIABLE] = worker_environment(
                settings, target, vectors=vectors, auto_formation=auto_formation, files=files
            )
            uvicorn.run(
                FACTORY,
                factory=True,
                workers=workers,
                host=host,
                port=port,
                log_level="warning",
                h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
            )
            return
        config = engine_config(vectors=vectors, auto_formation=auto_formation, files=files)
        application = create_app(settings, db=target, config=config)
        uvicorn.run(
            application,
            host=host,
            port=port,
            log_level="warning",
            h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
        )
