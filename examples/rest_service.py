"""The REST service through the client SDK: this script starts ``engram serve`` on a free port
of the loopback interface (local mode, a database in a temporary folder), then stores and
recalls knowledge, logs and searches a conversation, and keeps a plan's state, over HTTP.

    python examples/rest_service.py

The same calls work against any ``engram serve``: give ``MemoryClient`` its URL (and, in
production mode, an API key from ``engram admin key create``).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from engramdb.client import MemoryClient, WorkflowState


def free_port() -> int:
    """A port of the loopback interface that nothing listens on now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def engram_command() -> list[str]:
    """The ``engram`` command beside this Python, else on the PATH, else ``python -m``."""
    beside = Path(sys.executable).parent / "engram"
    if beside.exists():
        return [str(beside)]
    found = shutil.which("engram")
    return [found] if found else [sys.executable, "-m", "engramdb.cli"]


@contextmanager
def engram_serve(db: Path) -> Iterator[str]:
    """``engram serve`` on ``db`` until the block ends; yields its URL once it answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    command = [*engram_command(), "serve", "--db", str(db), "--port", str(port)]
    server = subprocess.Popen(command, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"engram serve exited with {server.returncode}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("engram serve did not answer within 120 s") from None
                time.sleep(0.2)
        yield url
    finally:
        server.send_signal(signal.SIGINT)  # as Ctrl-C: uvicorn shuts down cleanly
        server.wait(timeout=30)


async def use(url: str) -> None:
    """Everything an agent does with its memory, through the SDK."""
    async with MemoryClient(url, user_id="alice", agent_id="support-bot") as memory:
        print("service:", (await memory.health()).status)

        await memory.upsert_knowledge("Error 402 means the card has insufficient funds.")
        again = await memory.upsert_knowledge(
            "Error 402 means the card has insufficient funds!", dedupe_threshold=0.9
        )
        print("second upsert:", again.status)  # updated: the same fact, not a duplicate
        facts = await memory.search_knowledge("what does error 402 mean?")
        print("knowledge:", facts[0].text)

        await memory.log_interaction("user", "My card was declined with error 402.")
        await memory.log_interaction("assistant", "That means insufficient funds.")
        history = await memory.search_interactions("which error did the card give?")
        print("episode:", history[0].text)

        state = WorkflowState(memory, plan_id="refund-42")
        await state.set("account_id", "acc_123")
        await state.record_action("billing.checked")
        print("plan state:", await state.get("account_id"))

        ada = await memory.graph.add_entity("Ada", "person")
        acme = await memory.graph.add_entity("Acme", "organization")
        await memory.graph.add_relation(ada.entity_id, acme.entity_id, "works_for")
        print("graph:", ada.name, "works_for", acme.name)


def main() -> None:
    """Serve a temporary database and use it."""
    with tempfile.TemporaryDirectory() as folder, engram_serve(Path(folder) / "memory.db") as url:
        asyncio.run(use(url))


if __name__ == "__main__":
    main()
