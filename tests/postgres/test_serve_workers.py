"""``engram serve --workers 2`` on PostgreSQL: two worker processes answer as one service;
on SQLite more than one worker is refused with an error line."""

from __future__ import annotations

import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
from typer.testing import CliRunner

from tests.helpers.cli import run
from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.postgres.database import scratch_database


def children_of(pid: int) -> list[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # it ended meanwhile
        # The command name (2nd field) may hold spaces; the parent id follows its ")".
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def test_two_workers_serve_one_postgresql_database(tmp_path: Path) -> None:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with scratch_database("workers") as url:
        command = [
            *(sys.executable, "-m", "engramdb.cli", "--db", url, "serve", "--no-vectors"),
            *("--port", str(port), "--workers", "2"),
        ]
        env = {**os.environ, "HF_HUB_OFFLINE": "1"}
        with serving(command, f"{base}/healthz", log=tmp_path / "serve.log", env=env) as server:
            assert len(children_of(server.pid)) >= 2  # uvicorn's two workers

            def write(n: int) -> str:
                answer = httpx.post(
                    f"{base}/v1/memory/semantic",
                    json={"user_id": "alice", "content": f"fact number {n} about zanzibar"},
                    timeout=60,
                )
                assert answer.status_code in (200, 201), answer.text
                return str(answer.json()["id"])

            # Fresh connections each time: the kernel spreads them over both workers.
            with ThreadPoolExecutor(8) as pool:
                ids = set(pool.map(write, range(16)))
            assert len(ids) == 16
            found = httpx.get(
                f"{base}/v1/memory/semantic/search",
                params={"user_id": "alice", "q": "zanzibar", "limit": 50},
                timeout=60,
            )
            assert found.status_code == 200, found.text
            assert {hit["id"] for hit in found.json()["items"]} >= ids


def test_more_than_one_worker_on_sqlite_is_refused(tmp_path: Path) -> None:
    code, _, err = run(CliRunner(), "--db", str(tmp_path / "engram.db"), "serve", "--workers", "2")
    assert code == 2
    assert "error:" in err
    assert "PostgreSQL" in err
    assert not (tmp_path / "engram.db").exists()
