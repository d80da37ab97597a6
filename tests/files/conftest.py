"""A file provider over a fresh backend (SQLite file and PostgreSQL) and its root folder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from engramdb.core.scope import Scope
from engramdb.providers.files import FileMemoryProvider, FileStore
from engramdb.providers.indexing import Indexer
from engramdb.storage.backend import Backend, EventQuery
from tests.conformance.conftest import BACKENDS

ALICE = Scope(tenant="acme", user="alice", agent="helper", session="s-1")


@dataclass
class Files:
    """A provider of Alice's memory files, its store and its backend."""

    provider: FileMemoryProvider
    store: FileStore
    backend: Backend

    @property
    def folder(self) -> Path:
        """Alice's folder."""
        return self.store.path(ALICE)

    def make(self, scope: Scope) -> FileMemoryProvider:
        """Another scope's provider over the same root and backend."""
        return FileMemoryProvider(self.backend, scope, self.store, indexer=self.provider.indexer)

    async def events(self, after: int = 0) -> list[tuple[str, str]]:
        """(event type, key) of the file provider's events after ``after``."""
        found = await self.backend.events.read(EventQuery(provider_id="files", after=after))
        return [(e.event_type, str(e.payload.get("key"))) for e in found]

    async def position(self) -> int:
        """The log's last position."""
        newest = await self.backend.events.read(EventQuery(newest_first=True, limit=1))
        return newest[0].position or 0 if newest else 0


@pytest.fixture(params=["sqlite-file", "postgresql"])
async def files(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Files]:
    """Alice's file provider over a fresh backend."""
    backend = await BACKENDS[request.param](tmp_path)
    store = FileStore(tmp_path / "memory", categories=("activity", "profile", "event", "goal"))
    try:
        yield Files(
            FileMemoryProvider(backend, ALICE, store, indexer=Indexer(backend)), store, backend
        )
    finally:
        await backend.close()
