"""A sample of the intent operations through the SDK against a real ``engram serve`` process
(production mode, API keys issued before it started); the whole set runs in process on both
backends in test_parity.py."""

from __future__ import annotations

import uuid

import pytest

from engramdb.core.errors import NotFoundError, PermissionDeniedError
from tests.service.conftest import Connect, LiveServer


async def test_intent_operations_live(connect: Connect, live_server: LiveServer) -> None:
    agent = f"agent-{uuid.uuid4().hex[:8]}"
    alice = connect(live_server.alice, agent_id=agent)
    written = await alice.log_interactions(
        [{"role": "user", "content": "I moved to Lisbon"}, {"role": "user", "content": "Hi"}]
    )
    assert (await alice.get_capacity_info("episodic")).item_count == 2
    changed = await alice.delete_memory("episodic", written[0].id)
    assert changed.status == "forgotten"
    assert (await alice.restore_memory("episodic", written[0].id)).status == "restored"
    forgotten = await alice.forget("episodic", 'matching "Hi"', mode="hard")
    assert forgotten.forgotten == [written[1].id]
    with pytest.raises(NotFoundError):
        await alice.restore_memory("episodic", written[1].id)
    await alice.store_knowledge("Alice works at Acme", key="alice.employer")
    await alice.store_knowledge("Alice works at Initech", key="alice.employer")
    history = await alice.knowledge_history("alice.employer")
    assert [v.text for v in history] == ["Alice works at Initech", "Alice works at Acme"]
    await alice.memorize_turn("user", "Where do I live again?")
    assert [t.text for t in await alice.recent_turns()] == ["Where do I live again?"]
    context = await alice.assemble("where does alice live?", token_limit=200)
    assert "Lisbon" in context.text
    summary = await alice.summarize("semantic", token_limit=50)
    assert "Initech" in summary.text
    reader = connect(live_server.reader, agent_id=agent)
    assert (await reader.get_capacity_info("semantic")).item_count >= 1
    with pytest.raises(PermissionDeniedError):
        await reader.forget("semantic", "all")
