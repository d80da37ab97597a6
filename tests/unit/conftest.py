"""Fixtures of the unit tests: the ``engram`` command through typer's runner."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    """A runner of the ``engram`` command on a fresh database file, 200 columns wide."""
    return CliRunner(env={"ENGRAM_DB": str(tmp_path / "cli.db"), "COLUMNS": "200"})
