"""Fixtures of the service tests: the app in process (httpx's ASGI transport) over a real
engine, and a real ``engram serve`` process on a free loopback port with a temporary SQLite
file, with a tenant and API keys issued before it starts."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.client import MemoryClient
from engramdb.engine import Engine, EngineConfig
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.service.live_sdk import BACKENDS, FLAVORS, Clients, Served, serve

JWT_SECRET = "a-test-secret-of-at-least-thirty-two-bytes"
LIVE_TENANT = "acme"

#: Builds a client of an in-process app: settings of the app, then client keywords.
ClientFactory = Callable[..., MemoryClient]


@pytest.fixture
async def local_client(engine: Engine) -> AsyncIterator[MemoryClient]:
    """A client of the app in local mode, in process."""
    app = create_app(ServiceSettings(), engine=engine)
    async with MemoryClient("http://service", transport=httpx.ASGITransport(app=app)) as client:
        yield client


@pytest.fixture
async def production(engine: Engine) -> AsyncIterator[ClientFactory]:
    """Clients of one production-mode app in process: ``production(api_key=…)``."""
    app = create_app(ServiceSettings(auth="production", jwt_secret=JWT_SECRET), engine=engine)
    made: list[MemoryClient] = []

    def factory(
        *,
        api_key: str | None = None,
        token: str | None = None,
        tenant_id: str | None = None,
        user_id: str | None = None,
    ) -> MemoryClient:
        client = MemoryClient(
            "http://service",
            transport=httpx.ASGITransport(app=app),
            api_key=api_key,
            token=token,
            tenant_id=tenant_id,
            user_id=user_id,
        )
        made.append(client)
        return client

    yield factory
    for client in made:
        await client.aclose()


@dataclass(frozen=True)
class LiveServer:
    """A running ``engram serve`` and the API keys issued for it."""

    url: str
    db: Path
    alice: str  # writer key bound to user alice
    bob: str  # writer key bound to user bob
    reader: str  # reader key bound to alice
    service: str  # writer key of the whole tenant


async def _issue_keys(db: Path) -> tuple[str, str, str, str]:
    async with engramdb.open(db, config=EngineConfig(embedder=None)) as engine:
        tenancy = engine.tenancy
        await tenancy.create_tenant(LIVE_TENANT, "Acme")
        for user in ("alice", "bob"):
            await tenancy.create_user(LIVE_TENANT, user)
        alice = (await tenancy.create_key(LIVE_TENANT, user_id="alice"))[1]
        bob = (await tenancy.create_key(LIVE_TENANT, user_id="bob"))[1]
        reader = (await tenancy.create_key(LIVE_TENANT, user_id="alice", role="reader"))[1]
        service = (await tenancy.create_key(LIVE_TENANT))[1]
        return alice, bob, reader, service


@pytest.fixture(scope="module")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """``engram serve`` in production mode on a temporary SQLite file."""
    db = tmp_path_factory.mktemp("live") / "engram.db"
    keys = asyncio.run(_issue_keys(db))
    port = free_port()
    env = {**os.environ, "ENGRAM_JWT_SECRET": JWT_SECRET, "HF_HUB_OFFLINE": "1"}
    url = f"http://127.0.0.1:{port}"
    command = [
        *(sys.executable, "-m", "engramdb.cli", "--db", str(db), "serve"),
        *("--host", "127.0.0.1", "--port", str(port), "--auth", "production"),
    ]
    with serving(command, f"{url}/healthz", log=db.parent / "serve.log", env=env):
        yield LiveServer(url, db, *keys)


Connect = Callable[..., MemoryClient]


@pytest.fixture
async def connect(live_server: LiveServer) -> AsyncIterator[Connect]:
    """Clients of the live server: ``connect(api_key=…, user_id=…)``."""
    made: list[MemoryClient] = []

    def factory(
        api_key: str | None = None,
        *,
        tenant_id: str | None = None,
        user_id: str | None = None,
        agent_id: str | None = None,
    ) -> MemoryClient:
        client = MemoryClient(
            live_server.url,
            api_key=api_key,
            tenant_id=tenant_id,
            user_id=user_id,
            agent_id=agent_id,
        )
        made.append(client)
        return client

    yield factory
    for client in made:
        await client.aclose()


@pytest.fixture(scope="module", params=BACKENDS)
def served(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """``engram serve`` of the module on each storage backend, with memory files and an
    installed memory type (``tests/service/live_sdk.py``)."""
    with serve(request.param, tmp_path_factory.mktemp(f"served-{request.param}")) as running:
        yield running


@pytest.fixture(params=FLAVORS)
async def sdk(request: pytest.FixtureRequest, served: Served) -> AsyncIterator[Clients]:
    """Clients of ``served`` in each SDK flavor (async, sync) as a fresh user; afterwards,
    the test must have reached every operation it ``covers``."""
    clients = Clients(served, request.param)
    yield clients
    await clients.close()
    missing = set(getattr(request.function, "covers", ())) - clients.reached()
    assert not missing, f"covered but never answered successfully: {sorted(missing)}"
