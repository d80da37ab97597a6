"""Fixtures of the graph memory tests: an engine on a fresh SQLite file (without an embedder,
unless a test asks for the one with it) and the graph memory of one scope."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import engramdb
from engramdb.engine import Engine, EngineConfig
from engramdb.providers.graph import GraphEntity, GraphMemoryProvider


@pytest.fixture
async def plain_engine(db_path: Path) -> AsyncIterator[Engine]:
    """An engine without an embedder (full-text search only): fast to write to."""
    async with engramdb.open(db_path, config=EngineConfig(embedder=None)) as opened:
        yield opened


@pytest.fixture
def graph(plain_engine: Engine) -> GraphMemoryProvider:
    """The graph memory of tenant ``acme``, user ``alice``."""
    return plain_engine.scope(tenant="acme", user="alice", session="s-1").graph


async def entity(graph: GraphMemoryProvider, entity_id: str, entity_type: str = "person") -> str:
    """Add an entity named like its id; returns the id."""
    entry = await graph.add_entity(
        GraphEntity(entity_id=entity_id, name=entity_id, entity_type=entity_type), resolve=False
    )
    return entry.key
