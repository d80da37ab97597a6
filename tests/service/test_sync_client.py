"""The blocking client does what the async one does: against the app in process (on the loop
of an engine opened with ``open_sync``) and against a live ``engram serve``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.client import MemoryClient, SyncMemoryClient, SyncWorkflowState
from engramdb.core.errors import EntityNotFoundError, NotFoundError, PermissionDeniedError
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.service.conftest import LiveServer


def exercise(memory: SyncMemoryClient) -> None:
    """One tour of the client's areas, each answer checked."""
    assert memory.health().status == "ok"
    stored = memory.store_knowledge("Error 402 means insufficient funds.")
    assert stored.status == "created"
    assert [i.text for i in memory.search_knowledge("what does error 402 mean?")] == [
        "Error 402 means insufficient funds."
    ]
    memory.log_interaction("user", "I moved to Lisbon last spring")
    assert memory.get_recent_history(5)[0].text == "I moved to Lisbon last spring"
    memory.store("user.city", "Lisbon")
    entry = memory.read("user.city")
    assert entry is not None
    assert entry.value == "Lisbon"
    assert memory.delete("user.city")
    assert memory.read("user.city") is None

    alice = memory.graph.add_entity("Alice", "person")
    acme = memory.graph.add_entity("Acme", "organization")
    memory.graph.add_relation(alice.entity_id, acme.entity_id, "works_at")
    assert memory.graph.search("Alice")[0][0].name == "Alice"
    assert memory.graph.get_entity(alice.entity_id) is not None
    with pytest.raises(EntityNotFoundError):
        memory.graph.merge_entities(alice.entity_id, "no-such-entity")

    plan = memory.create_plan("ship", "ship the release")
    state = SyncWorkflowState(memory, plan.plan_id)
    state.set("step", 1)
    state.record_action("built")
    assert state.get("step") == 1
    assert state.get_action_history() == ["built"]
    with pytest.raises(NotFoundError):
        memory.get_plan("no-such-plan")


@pytest.fixture
def in_process(tmp_path: Path) -> Iterator[SyncMemoryClient]:
    config = engramdb.EngineConfig(embedder=None)
    with engramdb.open_sync(tmp_path / "sync-client.db", config=config) as engram:
        app = create_app(ServiceSettings(), engine=engram.wrapped)
        client = MemoryClient("http://service", transport=httpx.ASGITransport(app=app))
        # The app runs on the engine's own loop, where its connections live.
        with SyncMemoryClient.over(client, engram._portal) as memory:
            yield memory


def test_the_blocking_client_in_process(in_process: SyncMemoryClient) -> None:
    exercise(in_process)


def test_the_blocking_client_against_engram_serve(live_server: LiveServer) -> None:
    with SyncMemoryClient(live_server.url, api_key=live_server.alice) as memory:
        exercise(memory)
    with (
        SyncMemoryClient(live_server.url, api_key=live_server.reader) as reader,
        pytest.raises(PermissionDeniedError),
    ):
        reader.store_knowledge("a reader may not write")


def test_a_closed_client_refuses_calls(live_server: LiveServer) -> None:
    memory = SyncMemoryClient(live_server.url, api_key=live_server.alice)
    memory.close()
    memory.close()  # twice is harmless
    with pytest.raises(engramdb.EngineClosedError):
        memory.health()
