"""Fixtures of the reliability tests: a store of each backend that other processes open."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.postgres.database import scratch_database


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each backend, by the path or URL a process opens it with."""
    if request.param == "sqlite":
        yield str(tmp_path / "engram.db")
    else:
        with scratch_database("reliability") as url:
            yield url
