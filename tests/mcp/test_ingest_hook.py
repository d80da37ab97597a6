"""The ``ingest`` tool is offered exactly when the engine's scopes can ingest, and hands the
conversation over as memory items in the connection's scope."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mcp import Client

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import Scope
from engramdb.engine import EngineConfig, ScopedMemory
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server
from tests.mcp.conftest import BASE_TOOLS, call, refused


@dataclass
class Report:
    """What a formation step might answer."""

    episodes: int
    scope: str
    roles: list[str] = field(default_factory=list)


async def test_ingest_is_offered_when_scopes_can_ingest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def ingest(self: ScopedMemory, messages: list[MemoryItem]) -> Report:
        assert all(isinstance(m, MemoryItem) for m in messages)
        return Report(len(messages), self.scope.tenant, [m.role or "" for m in messages])

    monkeypatch.setattr(ScopedMemory, "ingest", ingest, raising=False)
    config = EngineConfig(embedder=None)
    async with engramdb.open(tmp_path / "engram.db", config=config) as engine:
        binding = Binding(engine, Scope(tenant="acme", user="alice"))
        async with Client(build_server(fixed(binding))) as client:
            assert {t.name for t in (await client.list_tools()).tools} == BASE_TOOLS | {"ingest"}
            answer = await call(
                client,
                "ingest",
                messages=[
                    {"role": "user", "content": "I moved to Lisbon"},
                    {"role": "assistant", "content": "Noted!"},
                ],
            )
            assert answer == {
                "report": {"episodes": 2, "scope": "acme", "roles": ["user", "assistant"]}
            }
            assert "messages" in await refused(client, "ingest", messages=[])
