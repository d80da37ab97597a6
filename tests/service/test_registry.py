"""The memory-type registry through ``MemoryClient`` against the app in process, on both
backends: a type registered at run time (not installed) is listed and reached by name at
once, and an engine without memory files lists their categories as not offered."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.client import MemoryClient
from engramdb.core.errors import NotFoundError
from engramdb.engine import EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.orchestrator.builtin_types import register_builtins
from engramdb.orchestrator.memory_types import MemoryType, MemoryTypeRegistry
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.helpers.notes_type import NOTES_SPEC, notes


@pytest.fixture(params=["sqlite", "postgresql"])
async def client(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: MiniLMEmbedder
) -> AsyncIterator[tuple[MemoryClient, MemoryTypeRegistry]]:
    """A local-mode client of an engine with a registry of its own and no memory files."""
    from tests.postgres.database import empty_database

    registry = MemoryTypeRegistry()
    register_builtins(registry)
    config = EngineConfig(embedder=embedder, memory_types=registry)
    target = str(tmp_path / "engram.db") if request.param == "sqlite" else empty_database()
    async with engramdb.open(target, config=config) as engine:
        app = create_app(ServiceSettings(), engine=engine)
        transport = httpx.ASGITransport(app=app)
        async with MemoryClient("http://service", transport=transport) as made:
            yield made, registry


async def test_a_type_registered_at_run_time_is_served_at_once(
    client: tuple[MemoryClient, MemoryTypeRegistry],
) -> None:
    memory, registry = client
    listed = {t.name: t.offered for t in await memory.list_memory_types()}
    assert listed == {
        "working": True,
        "episodic": True,
        "semantic": True,
        "procedural": True,
        "conversation": True,
        "activity": False,  # no memory files here
        "profile": False,
        "event": False,
    }
    with pytest.raises(NotFoundError) as refused:
        await memory.memorize("profile", "Lives in Lisbon")
    assert "--files" in str(refused.value)
    with pytest.raises(NotFoundError):
        await memory.memorize("notes", "not yet a type")
    registry.register(MemoryType("notes", notes, heading="Notes", spec=NOTES_SPEC))
    assert (await memory.list_memory_types())[-1].name == "notes"
    stored = await memory.memorize("notes", "The flowerpot key is under the mat")
    assert [i.id for i in await memory.remember("notes", "flowerpot")] == [stored.id]
    assert (await memory.get_capacity_info("notes")).item_count == 1
    assert (await memory.forget("notes", "all", mode="hard")).forgotten == [stored.id]
    registry.unregister("notes")
    with pytest.raises(NotFoundError):
        await memory.remember("notes", "flowerpot")
