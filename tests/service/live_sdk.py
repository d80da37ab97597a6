"""The SDK against a real ``engram serve``, in both flavors, on both storage backends.

``serve(backend, folder)`` starts one server in production mode (JWTs; a tenant and its users
are registered on first sight, so each test works as a fresh user of its own) with memory
files (``--files``: their categories are memory types) and a memory type installed the way a
package installs one (an ``engramdb.memory_types`` entry point: ``notes``). ``Sdk`` makes the
blocking client's methods awaitable (each runs in a worker thread), so one test body drives
``MemoryClient`` and ``SyncMemoryClient`` alike; ``Recorder`` notes the operation each answered
request reached, so a test proves the operations it ``covers``.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar
from urllib.parse import urlsplit, urlunsplit

import httpx
import psycopg
from psycopg import sql

from engramdb.client import MemoryClient, SyncMemoryClient
from engramdb.service.auth import issue_token
from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.postgres.database import SERVER_URL

BACKENDS = ("sqlite", "postgresql")
FLAVORS = ("async", "sync")
JWT_SECRET = "a-test-secret-of-at-least-thirty-two-bytes"
TENANT = "acme"
#: The installed memory type: a module of the test helpers, declared by a package's metadata.
NOTES_ENTRY_POINT = "notes = tests.helpers.notes_type:NOTES_TYPE"

F = TypeVar("F", bound=Callable[..., Any])


def covers(*operation_ids: str) -> Callable[[F], F]:
    """Mark a test as the live test of these operations; its ``sdk`` fixture checks that the
    test reached each of them with a successful answer."""

    def mark(test: F) -> F:
        test.covers = operation_ids  # type: ignore[attr-defined]
        return test

    return mark


def unique(prefix: str) -> str:
    """A name no other test uses."""
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True)
class Operation:
    """One operation of the served OpenAPI schema, and how to tell its requests."""

    operation_id: str
    method: str
    path: re.Pattern[str]
    parameters: int


@dataclass(frozen=True)
class Served:
    """A running ``engram serve``: its URL and the operations of its schema."""

    url: str
    backend: str
    operations: tuple[Operation, ...]

    def operation_of(self, method: str, raw_path: str) -> str | None:
        """The operation a request reached (a literal segment wins over a parameter, as in
        the service's own routing of ``/working/capacity``)."""
        matching = [o for o in self.operations if o.method == method and o.path.fullmatch(raw_path)]
        return min(matching, key=lambda o: o.parameters).operation_id if matching else None


def operations_of(schema: dict[str, Any]) -> tuple[Operation, ...]:
    """Every operation of an OpenAPI schema."""
    found = []
    for path, methods in schema["paths"].items():
        pattern = re.compile(
            "/".join("[^/]+" if s.startswith("{") else re.escape(s) for s in path.split("/"))
        )
        for method, operation in methods.items():
            found.append(
                Operation(operation["operationId"], method.upper(), pattern, path.count("{"))
            )
    return tuple(found)


@contextmanager
def _database(backend: str, folder: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield str(folder / "engram.db")
        return
    name = f"parity_live_{os.getpid()}_{uuid.uuid4().hex[:6]}"
    with psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        parts = urlsplit(SERVER_URL)
        yield urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, ""))
    finally:
        with psycopg.connect(SERVER_URL, autocommit=True, connect_timeout=5) as conn:
            drop = sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)")
            conn.execute(drop.format(sql.Identifier(name)))


def _installed_package(folder: Path) -> Path:
    """A folder holding the metadata of a package that declares the ``notes`` memory type."""
    info = folder / "plugins" / "engram_parity_types-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: engram-parity-types\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(f"[engramdb.memory_types]\n{NOTES_ENTRY_POINT}\n")
    return info.parent


@contextmanager
def serve(backend: str, folder: Path) -> Iterator[Served]:
    """``engram --files … serve`` in production mode on a fresh database of ``backend``."""
    with _database(backend, folder) as target:
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        path = os.pathsep.join(
            p for p in (str(_installed_package(folder)), os.environ.get("PYTHONPATH")) if p
        )
        env = {
            **os.environ,
            "ENGRAM_JWT_SECRET": JWT_SECRET,
            "HF_HUB_OFFLINE": "1",
            "PYTHONPATH": path,
        }
        command = [
            *(sys.executable, "-m", "engramdb.cli", "--db", target),
            *("--files", str(folder / "files"), "serve"),
            *("--host", "127.0.0.1", "--port", str(port), "--auth", "production"),
        ]
        with serving(command, f"{url}/healthz", log=folder / "serve.log", env=env):
            schema = httpx.get(f"{url}/openapi.json", timeout=30).json()
            yield Served(url, backend, operations_of(schema))


class Recorder(httpx.AsyncHTTPTransport):
    """A transport that notes every answered request: method, raw path, status."""

    def __init__(self) -> None:
        super().__init__()
        self.answered: list[tuple[str, str, int]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        path = request.url.raw_path.split(b"?")[0].decode("ascii")
        self.answered.append((request.method, path, response.status_code))
        return response


class Sdk:
    """A client of either flavor whose every method is awaitable: the async client's as it
    is, the blocking client's run in a worker thread."""

    def __init__(self, client: Any, blocking: bool) -> None:
        self._client = client
        self._blocking = blocking

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._client, name)
        if name == "graph":
            return Sdk(found, self._blocking)
        if not self._blocking or not callable(found):
            return found

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(found, *args, **kwargs)

        return call


@dataclass
class Clients:
    """The clients one test made (of one flavor), all as one fresh user of the tenant."""

    served: Served
    flavor: str
    user: str = field(default_factory=lambda: f"u-{uuid.uuid4().hex[:10]}")
    agent: str = field(default_factory=lambda: f"a-{uuid.uuid4().hex[:8]}")
    recorders: list[Recorder] = field(default_factory=list)
    made: list[Any] = field(default_factory=list)

    def __call__(
        self,
        *,
        user: str | None = None,
        role: Literal["reader", "writer"] = "writer",
        session: str | None = None,
        agent: str | None = None,
    ) -> Any:
        """A client (an ``Sdk``) acting as the test's user (or ``user``), with a JWT of
        ``role``."""
        # A transport of each client's own: a connection pool belongs to one event loop.
        recorder = Recorder()
        self.recorders.append(recorder)
        options: dict[str, Any] = {
            "token": issue_token(JWT_SECRET, TENANT, user=user or self.user, role=role),
            "agent_id": agent or self.agent,
            "session_id": session,
            "transport": recorder,
        }
        blocking = self.flavor == "sync"
        client = (
            SyncMemoryClient(self.served.url, **options)
            if blocking
            else MemoryClient(self.served.url, **options)
        )
        self.made.append(client)
        return Sdk(client, blocking)

    async def close(self) -> None:
        for client in self.made:
            if isinstance(client, SyncMemoryClient):
                await asyncio.to_thread(client.close)
            else:
                await client.aclose()

    def reached(self) -> set[str]:
        """The operations that answered a request successfully."""
        return {
            found
            for recorder in self.recorders
            for method, path, status in recorder.answered
            if 200 <= status < 300 and (found := self.served.operation_of(method, path))
        }
