"""``/mcp`` of the REST application in process: started with the application, guarded
against rebound host names in local mode, and a clear 501 when the extra is missing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from engramdb.engine import EngineConfig
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}


@pytest.fixture
def local_app(tmp_path: Path) -> Iterator[TestClient]:
    """The application in local mode on a fresh SQLite file, started."""
    app = create_app(
        ServiceSettings(), db=tmp_path / "engram.db", config=EngineConfig(embedder=None)
    )
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        yield client


def test_local_mode_serves_mcp_without_credentials(local_app: TestClient) -> None:
    answer = local_app.post("/mcp", json=LIST_TOOLS, headers=HEADERS)
    assert answer.status_code == 200
    names = {t["name"] for t in answer.json()["result"]["tools"]}
    assert {"memorize", "assemble", "graph_traverse"} <= names


def test_local_mode_refuses_a_host_name_that_is_not_local(local_app: TestClient) -> None:
    # A web page could reach a credential-free server through a DNS name rebound to 127.0.0.1.
    rebound = local_app.post(
        "/mcp", json=LIST_TOOLS, headers={**HEADERS, "Host": "attacker.example:8000"}
    )
    assert rebound.status_code == 421


def test_without_the_extra_mcp_answers_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in [m for m in sys.modules if m == "engramdb.mcp.http" or m.startswith("mcp")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # what an install without the extra finds
    app = create_app(
        ServiceSettings(), db=tmp_path / "engram.db", config=EngineConfig(embedder=None)
    )
    with TestClient(app, base_url="http://127.0.0.1:8000") as client:
        answer = client.post("/mcp", json=LIST_TOOLS, headers=HEADERS)
        assert client.get("/healthz").status_code == 200
    assert answer.status_code == 501
    assert answer.json()["message"] == (
        "MCP is not installed on this server: pip install 'engramdb[mcp]'"
    )
