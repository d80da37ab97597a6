"""The ``ingest`` tool forms memories in the connection's scope: the conversation's episodes,
the profile facts it states (with their source turns), and nothing for another tenant."""

from __future__ import annotations

from pathlib import Path

from mcp import Client

import engramdb
from engramdb.core.scope import Scope
from engramdb.engine import EngineConfig
from engramdb.mcp.binding import Binding, fixed
from engramdb.mcp.server import build_server
from tests.mcp.conftest import TOOLS, call, refused


async def test_ingest_forms_memories_in_the_connections_scope(tmp_path: Path) -> None:
    config = EngineConfig(embedder=None)
    async with engramdb.open(tmp_path / "engram.db", config=config) as engine:
        binding = Binding(engine, Scope(tenant="acme", user="alice"))
        async with Client(build_server(fixed(binding))) as client:
            assert {t.name for t in (await client.list_tools()).tools} == TOOLS
            answer = await call(
                client,
                "ingest",
                messages=[
                    {"role": "user", "content": "I live in Lisbon and I work at Acme."},
                    {"role": "assistant", "content": "Noted!"},
                ],
            )
            assert "messages" in await refused(client, "ingest", messages=[])
        report = answer["report"]
        assert report["episodes"] == 2
        keys = {item["key"]: item for item in report["items"]}
        assert keys["user.city"]["decision"] == "added"
        assert keys["user.city"]["sources"]
        alice = engine.scope(tenant="acme", user="alice")
        assert "Lisbon" in (await alice.semantic.remember("where does the user live?"))[0].text
        other = engine.scope(tenant="globex", user="alice")
        assert (await other.episodic.get_capacity_info()).item_count == 0
