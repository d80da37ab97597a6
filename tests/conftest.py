"""Shared fixtures: real storage backends on temporary files, the real default embedder
(offline, one thread), and a guard that keeps every test off the network.

No test may reach the network: the Hugging Face libraries are told to stay offline, and an
autouse guard refuses every socket connection that does not go to this machine's loopback.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

import engramdb
from engramdb.engine import Engine, EngineConfig
from engramdb.index.minilm import MiniLMEmbedder

# Set before anything could import huggingface_hub: a code path that tried to fetch a model
# would fail instead of downloading. Ours never should; the guard below proves it.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


def _is_loopback(address: Any) -> bool:
    if not isinstance(address, tuple):
        return True  # AF_UNIX paths stay on this machine
    host = str(address[0])
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture(autouse=True)
def no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse connections to anything but loopback for the duration of each test."""
    original_connect = socket.socket.connect
    original_connect_ex = socket.socket.connect_ex

    def connect(sock: socket.socket, address: Any) -> None:
        if not _is_loopback(address):
            raise ConnectionRefusedError(f"tests must not reach the network: {address!r}")
        original_connect(sock, address)

    def connect_ex(sock: socket.socket, address: Any) -> int:
        if not _is_loopback(address):
            raise ConnectionRefusedError(f"tests must not reach the network: {address!r}")
        return original_connect_ex(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)


@pytest.fixture(scope="session")
def embedder() -> Iterator[MiniLMEmbedder]:
    """The default embedding model, loaded once for the whole session, on one thread."""
    model = MiniLMEmbedder(threads=1)
    yield model
    model.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """A fresh SQLite file path."""
    return tmp_path / "engram.db"


@pytest.fixture
async def engine(db_path: Path, embedder: MiniLMEmbedder) -> AsyncIterator[Engine]:
    """An engine on a fresh SQLite file, with the default embedder."""
    async with engramdb.open(db_path, config=EngineConfig(embedder=embedder)) as opened:
        yield opened


@pytest.fixture(params=["sqlite", "postgresql"])
async def any_engine(
    request: pytest.FixtureRequest, tmp_path: Path, embedder: MiniLMEmbedder
) -> AsyncIterator[Engine]:
    """An engine on each storage backend (a fresh SQLite file, an empty PostgreSQL
    database), with the default embedder."""
    from tests.postgres.database import empty_database

    target = str(tmp_path / "engram.db") if request.param == "sqlite" else empty_database()
    async with engramdb.open(target, config=EngineConfig(embedder=embedder)) as opened:
        yield opened
