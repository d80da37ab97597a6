"""``manager.store`` routes by content type: an ``entity`` reaches the graph, which declares
it, and not the catch-all event-sourced store registered before it; on both backends."""

from __future__ import annotations

import pytest

from engramdb.core.errors import NoProviderForTierError, ValidationError
from engramdb.core.types import MemoryTier
from engramdb.engine import Engine


async def test_an_entity_reaches_the_graph(any_engine: Engine) -> None:
    mem = any_engine.scope("acme", "alice")
    for tier in (None, MemoryTier.PERSISTENT):
        key = f"alice-{tier}"
        value = {"name": f"Alice {tier}", "entity_type": "person"}
        entry = await mem.manager.store(key, value, content_type="entity", tier=tier)
        assert entry.provider_id == "graph"
        entity = await mem.graph.get_entity(key)
        assert entity is not None
        assert entity.name == f"Alice {tier}"
        assert await mem.persistent.read(key) is None  # not also in the event-sourced store
        assert (await mem.manager.read(key)) is not None


async def test_other_content_types_keep_their_tiers(any_engine: Engine) -> None:
    mem = any_engine.scope("acme", "alice")
    assert (await mem.manager.store("user.city", "Lisbon")).provider_id == "working"
    stored = await mem.manager.store("user.city", "Lisbon", tier=MemoryTier.PERSISTENT)
    assert stored.provider_id == "event_sourced"
    assert await mem.graph.get_entity("user.city") is None


async def test_a_bad_entity_is_refused_and_nothing_is_written(any_engine: Engine) -> None:
    mem = any_engine.scope("acme", "alice")
    with pytest.raises(ValidationError):
        await mem.manager.store("bob", "not an entity", content_type="entity")
    assert await mem.manager.read("bob") is None
    with pytest.raises(NoProviderForTierError, match="'indexed'"):
        await mem.manager.store("carol", "x", tier=MemoryTier.INDEXED)
