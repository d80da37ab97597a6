"""Running the ``engram`` command in process, through typer's runner."""

from __future__ import annotations

from typer.testing import CliRunner

from engramdb.cli.app import app


def run(cli: CliRunner, *args: str) -> tuple[int, str, str]:
    """Run ``engram ARGS``: exit code, standard output, standard error."""
    result = cli.invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr
