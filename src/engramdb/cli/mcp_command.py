"""``engram mcp``: the MCP server over stdio, for desktop agents (the ``mcp`` extra)."""

from __future__ import annotations

from typing import Annotated

import typer

from engramdb.cli.app import run_unopened, settings_of
from engramdb.cli.serve_command import DbOption, served_target
from engramdb.core.errors import UsageError
from engramdb.mcp import INSTALL, sdk_missing


def register(app: typer.Typer) -> None:
    """Add ``mcp`` to ``app``."""

    @app.command()
    def mcp(
        ctx: typer.Context,
        tenant: Annotated[
            str | None, typer.Option(help="Tenant (default: the global --tenant).")
        ] = None,
        user: Annotated[str | None, typer.Option(help="User (default: the global --user).")] = None,
        agent: Annotated[
            str | None, typer.Option(help="Agent acting (default: the global --agent).")
        ] = None,
        session: Annotated[
            str | None, typer.Option(help="Session (default: the global --session).")
        ] = None,
        db: DbOption = None,
        vectors: Annotated[
            bool, typer.Option(help="Embed memories for vector search (the local model).")
        ] = True,
    ) -> None:
        """Serve memory to an MCP client (Claude Desktop, an IDE, an agent) over stdio, in
        one tenant and user's scope."""
        settings = settings_of(ctx, False)
        target = served_target(ctx, db)

        async def main() -> None:
            try:
                from engramdb.mcp.stdio import serve_stdio
            except ModuleNotFoundError as exc:
                if not sdk_missing(exc):
                    raise
                raise UsageError(f"the MCP server needs the mcp extra: {INSTALL}") from exc
            from engramdb.core.scope import Scope
            from engramdb.engine import EngineConfig

            scope = Scope(
                tenant=tenant or settings.tenant,
                user=user or settings.user,
                agent=agent or settings.agent,
                session=session or settings.session,
            )
            await serve_stdio(
                target, scope, EngineConfig() if vectors else EngineConfig(embedder=None)
            )

        run_unopened(main)
