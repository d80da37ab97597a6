"""``engram serve``: the REST service on the chosen database (uvicorn)."""

from __future__ import annotations

from typing import Annotated

import typer

from engramdb.cli import render
from engramdb.core.errors import UsageError
from engramdb.engine import EngineConfig
from engramdb.service.settings import AuthMode, ServiceSettings


def register(app: typer.Typer) -> None:
    """Add ``serve`` to ``app``."""

    @app.command()
    def serve(
        ctx: typer.Context,
        host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(min=0, max=65535, help="Port to listen on.")] = 8000,
        db: Annotated[
            str | None, typer.Option(help="Database path or postgresql:// URL (default: --db).")
        ] = None,
        auth: Annotated[
            str, typer.Option(envvar="ENGRAM_AUTH", help="local (no credentials) or production.")
        ] = "local",
        jwt_secret: Annotated[
            str | None, typer.Option(envvar="ENGRAM_JWT_SECRET", help="HS256 secret of JWTs.")
        ] = None,
        jwt_audience: Annotated[str | None, typer.Option(envvar="ENGRAM_JWT_AUDIENCE")] = None,
        max_body_bytes: Annotated[int, typer.Option(min=1024)] = 2 * 1024 * 1024,
        vectors: Annotated[
            bool, typer.Option(help="Embed memories for vector search (the local model).")
        ] = True,
    ) -> None:
        """Serve the REST API (OpenAPI at /docs); stateless, so several instances may
        share one PostgreSQL database."""
        import uvicorn

        from engramdb.service.app import create_app

        if auth not in ("local", "production"):
            render.err.print("error: --auth must be 'local' or 'production'")
            raise typer.Exit(2)
        mode: AuthMode = "local" if auth == "local" else "production"
        try:
            settings = ServiceSettings(
                auth=mode,
                jwt_secret=jwt_secret,
                jwt_audience=jwt_audience,
                max_body_bytes=max_body_bytes,
            )
        except UsageError as exc:
            render.err.print(f"error: {exc.message}")
            raise typer.Exit(2) from None
        config = EngineConfig() if vectors else EngineConfig(embedder=None)
        application = create_app(settings, db=db or ctx.obj.db, config=config)
        uvicorn.run(application, host=host, port=port, log_level="warning")
