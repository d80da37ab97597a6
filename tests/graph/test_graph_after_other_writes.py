"""A graph write while other processes keep writing to the database (so the graph cache loads
a newer copy whenever it looks) answers with what it wrote, on both backends."""

from __future__ import annotations

import itertools

import pytest

from engramdb.engine import Engine
from engramdb.providers.graph import GraphEntity, working


async def test_an_entity_added_while_others_write_is_answered(
    any_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = any_engine.scope(tenant="acme", user="alice")
    # Every look at the store finds that another process committed since the last one.
    versions = itertools.count()

    async def always_newer() -> int:
        return next(versions)

    monkeypatch.setattr(working, "STALE_AFTER_S", 0.0)
    monkeypatch.setattr(any_engine.backend.search, "data_version", always_newer)
    for n in range(3):
        entry = await memory.graph.add_entity(GraphEntity(name=f"Person{n}", entity_type="person"))
        assert entry.value["name"] == f"Person{n}"
        assert await memory.graph.get_entity(entry.key) is not None
