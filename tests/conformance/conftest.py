"""Factories the conformance suite runs every test against.

A storage backend joins the suite by adding one entry to ``BACKENDS``; a provider by adding one
to ``PROVIDERS``. Optional behaviour is a declared capability and is skipped visibly, never
passed silently.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engramdb.core.scope import Scope
from engramdb.core.types import MemoryTier
from engramdb.index.embedder import Embedder
from engramdb.index.sentences import sentence_keys
from engramdb.providers.base import MemoryProvider
from engramdb.providers.event_sourced import EventSourcedProvider
from engramdb.providers.files import FileMemoryProvider, FileStore
from engramdb.providers.graph import GraphCache, GraphMemoryProvider
from engramdb.providers.indexing import Indexer
from engramdb.providers.projection import ProjectionSpec
from engramdb.providers.text_match import flatten_text
from engramdb.providers.working import WorkingMemoryProvider, WorkingStore
from engramdb.storage.backend import Backend
from engramdb.storage.registry import open_backend
from tests.postgres.database import empty_database

BackendFactory = Callable[[Path], Awaitable[Backend]]


async def _sqlite_file(tmp: Path) -> Backend:
    return await open_backend(tmp / "conformance.db")


async def _sqlite_memory(tmp: Path) -> Backend:
    return await open_backend(":memory:")


async def _postgresql(tmp: Path) -> Backend:
    return await open_backend(empty_database())


BACKENDS: dict[str, BackendFactory] = {
    "sqlite-file": _sqlite_file,
    "sqlite-memory": _sqlite_memory,
    "postgresql": _postgresql,
}


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty database of each backend as ``engramdb.open`` takes it: a SQLite file
    (which several engines and connections can share) or a PostgreSQL URL."""
    return str(tmp_path / "engram.db") if request.param == "sqlite" else empty_database()


@pytest.fixture(params=sorted(BACKENDS))
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    """Every storage backend, fresh."""
    opened = await BACKENDS[request.param](tmp_path)
    try:
        yield opened
    finally:
        await opened.close()


@dataclass
class ProviderKit:
    """A provider under test plus a way to get another one over the same storage."""

    name: str
    provider: MemoryProvider
    persistent: bool
    make: Callable[[Scope], MemoryProvider]


SCOPE = Scope(tenant="acme", user="alice", agent="helper", session="s-1")


def value_sentences(key: str, value: Any, occurred_at: datetime | None) -> list[str]:
    """The indexed kit's part texts: the sentences of the value's words."""
    return sentence_keys(flatten_text(value))


KITS = (
    "working",
    *(f"event_sourced-{name}" for name in sorted(BACKENDS)),
    *(f"indexed-{name}" for name in sorted(BACKENDS)),
    *(f"graph-{name}" for name in sorted(BACKENDS)),
    *(f"files-{name}" for name in sorted(BACKENDS)),
)


@pytest.fixture(params=KITS)
async def kit(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: Embedder
) -> AsyncIterator[ProviderKit]:
    """Every provider, over every backend where it uses one."""
    if request.param == "working":
        store = WorkingStore()

        def working(scope: Scope) -> MemoryProvider:
            return WorkingMemoryProvider(store, scope)

        yield ProviderKit("working", working(SCOPE), False, working)
        return
    name, backend_name = request.param.split("-", 1)
    opened = await BACKENDS[backend_name](tmp_path)
    if name == "graph":
        # Graph memory is also a key/value provider; entities are its own content type.
        graphs = GraphCache(opened)

        def graph(scope: Scope) -> MemoryProvider:
            return GraphMemoryProvider(opened, scope, graphs=graphs)

        try:
            yield ProviderKit(name, graph(SCOPE), True, graph)
        finally:
            await opened.close()
        return
    if name == "files":
        # Markdown files a person can edit, projected from the same log.
        files = FileStore(tmp_path / "memory-files")
        plain = Indexer(opened)

        def file_provider(scope: Scope) -> MemoryProvider:
            return FileMemoryProvider(opened, scope, files, indexer=plain)

        try:
            yield ProviderKit(name, file_provider(SCOPE), True, file_provider)
        finally:
            await opened.close()
        return
    # The indexed provider embeds every write (its sentences too) and searches BM25 and
    # vectors together.
    indexer = Indexer(opened, embedder if name == "indexed" else None)
    spec = (
        ProjectionSpec(name, vectors=True, embed_parts=value_sentences)
        if name == "indexed"
        else ProjectionSpec(name)
    )
    tier = MemoryTier.INDEXED if name == "indexed" else MemoryTier.PERSISTENT

    def make(scope: Scope) -> MemoryProvider:
        return EventSourcedProvider(
            opened, scope, provider_id=name, spec=spec, indexer=indexer, tier=tier
        )

    try:
        yield ProviderKit(name, make(SCOPE), True, make)
    finally:
        await opened.close()
