"""The event log on NATS JetStream, against real NATS servers: every committed event reaches a
durable consumer exactly once, in log order; a NATS outage while writes go on loses nothing;
a bridge that stops resumes where the stream ends."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import nats
import pytest
from typer.testing import CliRunner

from engramdb.bridge.consumer import EventConsumer
from engramdb.bridge.publisher import EventBridge
from engramdb.bridge.subjects import tenant_of_token
from engramdb.core.errors import UsageError
from engramdb.core.events import EventEnvelope
from engramdb.engine import Engine
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.helpers.cli import run
from tests.helpers.ports import free_port

SHARED_NATS = "nats://127.0.0.1:4222"
PERSISTENT = "event_sourced"  # the provider of ``ScopedMemory.persistent``
NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


@pytest.fixture
async def stream() -> AsyncIterator[dict[str, Any]]:
    """A stream and subject prefix of this test's own on the shared server."""
    name = f"t{uuid.uuid4().hex[:12]}"
    yield {"stream": name.upper(), "prefix": name}
    nc = await nats.connect(SHARED_NATS)
    with contextlib.suppress(Exception):  # a test that failed early made no stream
        await nc.jetstream().delete_stream(name.upper())
    await nc.close()


class Collector:
    """A consumer's handler: the events applied, and a key/value projection of them."""

    def __init__(self) -> None:
        self.events: list[EventEnvelope] = []
        self.state: dict[tuple[str | None, str], Any] = {}

    async def __call__(self, event: EventEnvelope) -> None:
        self.events.append(event)
        key = event.payload.get("key")
        if event.event_type == "memory.written" and event.provider_id == PERSISTENT:
            self.state[(event.scope.tenant, str(key))] = event.payload.get("value")
        elif event.event_type == "memory.deleted" and event.provider_id == PERSISTENT:
            self.state.pop((event.scope.tenant, str(key)), None)


async def write_some(engine: Engine, tenants: list[str], n: int, tag: str) -> None:
    for i in range(n):
        for tenant in tenants:
            memory = engine.scope(tenant=tenant)
            await memory.persistent.write(f"{tag}-{i % 7}", {"n": i, "tenant": tenant})
            if i % 5 == 4:
                await memory.persistent.delete(f"{tag}-{(i - 1) % 7}")


async def consume_until(consumer: EventConsumer, collector: Collector, count: int) -> None:
    async with asyncio.timeout(60):
        while len(collector.events) < count:
            await consumer.poll(timeout_s=0.5)


def assert_once_in_order(logged: list[EventEnvelope], seen: list[EventEnvelope]) -> None:
    ids = [e.event_id for e in seen]
    assert len(ids) == len(set(ids)), "an event was applied twice"
    assert sorted(ids) == sorted(e.event_id for e in logged), "an event is missing"
    positions = [e.position or 0 for e in seen]
    assert positions == sorted(positions), "events were applied out of log order"


async def test_every_committed_event_reaches_a_consumer_once_in_order(
    any_engine: Engine, stream: dict[str, Any]
) -> None:
    tenants = ["acme", "acme.x", "globex > *"]  # separators and wildcards stay one token
    collector = Collector()
    async with EventBridge(any_engine.events, SHARED_NATS, **stream) as bridge:
        await write_some(any_engine, tenants, 30, "k")
        await bridge.drain()
        health = await bridge.health()
        assert health.connected
        assert health.lag == 0
    logged = await any_engine.events.read()
    async with EventConsumer(SHARED_NATS, "apply", collector, **stream) as consumer:
        await consume_until(consumer, collector, len(logged))
        assert await consumer.poll(timeout_s=0.3) == 0
    assert_once_in_order(logged, collector.events)
    for tenant in tenants:
        mine = [e.position or 0 for e in collector.events if e.scope.tenant == tenant]
        assert mine == sorted(mine)
        assert mine  # each tenant's events arrived under its own subject
    assert {tenant_of_token(token) for token in ("acme%2Ex", "globex%20%3E%20%2A")} == {
        "acme.x",
        "globex > *",
    }


async def test_a_restarted_bridge_resumes_and_duplicates_are_dropped(
    any_engine: Engine, stream: dict[str, Any]
) -> None:
    async with EventBridge(any_engine.events, SHARED_NATS, **stream) as bridge:
        await write_some(any_engine, ["acme"], 10, "a")
        await bridge.drain()
    # Written while no bridge runs: the next one starts after the stream's last event.
    await write_some(any_engine, ["acme"], 10, "b")
    async with EventBridge(any_engine.events, SHARED_NATS, **stream) as again:
        await again.drain()
        # Publishing a page again (a crash before the acknowledgement) adds nothing.
        again.position = 0
        await again.drain()
    nc = await nats.connect(SHARED_NATS)
    info = await nc.jetstream().stream_info(stream["stream"])
    await nc.close()
    assert info.state.messages == len(await any_engine.events.read())


@pytest.fixture
def own_nats(tmp_path: Path) -> Iterator[dict[str, Any]]:
    """A NATS server of this test's own, on its own port, that the test may stop."""
    port = free_port()
    store = tmp_path / "jetstream"
    server: dict[str, Any] = {"url": f"nats://127.0.0.1:{port}", "process": None}

    def start() -> None:
        server["process"] = subprocess.Popen(
            [NATS_SERVER, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", str(store)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    def stop() -> None:
        process = server["process"]
        if process is not None:
            process.terminate()
            process.wait(10)
            server["process"] = None

    server["start"], server["stop"] = start, stop
    start()
    yield server
    stop()


async def wait_for_server(url: str) -> None:
    async with asyncio.timeout(20):
        while True:
            try:
                nc = await nats.connect(url, connect_timeout=1, max_reconnect_attempts=0)
            except Exception:
                await asyncio.sleep(0.1)
                continue
            await nc.close()
            return


async def test_a_nats_outage_while_writing_loses_nothing(
    any_engine: Engine, own_nats: dict[str, Any]
) -> None:
    url = own_nats["url"]
    await wait_for_server(url)
    collector = Collector()
    async with EventBridge(any_engine.events, url, max_backoff_s=0.5) as bridge:
        await write_some(any_engine, ["acme", "globex"], 10, "before")
        await bridge.drain()
        own_nats["stop"]()
        await write_some(any_engine, ["acme", "globex"], 10, "during")
        health = await bridge.health()
        assert health.lag > 0
        own_nats["start"]()
        await wait_for_server(url)
        await write_some(any_engine, ["acme", "globex"], 10, "after")
        await bridge.drain(timeout_s=60)
        assert (await bridge.health()).lag == 0
    logged = await any_engine.events.read()
    async with EventConsumer(url, "projection", collector) as consumer:
        await consume_until(consumer, collector, len(logged))
    assert_once_in_order(logged, collector.events)
    # The consumer's projection is the writer's.
    expected = {}
    for tenant in ("acme", "globex"):
        persistent = any_engine.scope(tenant=tenant).persistent
        for key in await persistent.list_keys():
            entry = await persistent.read(key)
            assert entry is not None
            expected[(tenant, key)] = entry.value
    assert collector.state == expected


async def test_the_service_publishes_its_writes_and_reports_the_bridge(
    any_engine: Engine, stream: dict[str, Any]
) -> None:
    settings = ServiceSettings(nats_url=SHARED_NATS, nats_stream=stream["stream"])
    app = create_app(settings, engine=any_engine)
    # The bridge publishes under the default prefix: give the test's stream its own subjects.
    nc = await nats.connect(SHARED_NATS)
    await nc.jetstream().add_stream(name=stream["stream"], subjects=["engram.>"])
    await nc.close()
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://s") as http,
    ):
        written = await http.post("/v1/memory/entries", json={"key": "k", "value": "v"})
        assert written.status_code == 201
        await app.state.bridge.drain()
        health = (await http.get("/healthz")).json()
    assert health["bridge"]["connected"] is True
    assert health["bridge"]["lag"] == 0
    assert health["bridge"]["published"] >= 1


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:4222", "nats://", "nats://a b", "nats://a\x00b", "nats://\ud800"]
)
def test_a_malformed_nats_address_is_refused_before_serving(url: str, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="NATS address"):
        ServiceSettings(nats_url=url)
    if "\x00" in url or "\ud800" in url:
        return  # a process's arguments cannot hold these
    code, _, err = run(CliRunner(), "--db", str(tmp_path / "x.db"), "serve", "--nats", url)
    assert code == 2
    assert len(err.strip().splitlines()) == 1
    assert err.startswith("error:")
    assert not (tmp_path / "x.db").exists()
