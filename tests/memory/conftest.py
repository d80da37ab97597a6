"""Fixtures of the memory tests: an empty store of each backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """An empty store of each backend, by the path or URL it is opened with."""
    if request.param == "sqlite":
        yield str(tmp_path / "engram.db")
    else:
        from tests.postgres.database import empty_database

        yield empty_database()
