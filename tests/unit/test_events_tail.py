"""``engram events tail``: the newest events, and with ``--follow`` each new one as another
process commits it (JSON lines with ``--json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from tests.helpers.cli import run


def test_tail_shows_the_newest_events_oldest_first(tmp_path: Path) -> None:
    cli = CliRunner()
    db = str(tmp_path / "engram.db")
    for key in ("a", "b", "c"):
        assert run(cli, "--db", db, "add", key, "1")[0] == 0
    code, out, _ = run(cli, "--db", db, "events", "tail", "-n", "2", "--json")
    assert code == 0
    keys = [json.loads(line)["payload"]["key"] for line in out.splitlines()]
    assert keys == ["b", "c"]
    # The plain listing is unchanged.
    code, out, _ = run(cli, "--db", db, "events", "--type", "memory.written", "--json")
    assert code == 0
    assert [e["payload"]["key"] for e in json.loads(out)] == ["a", "b", "c"]


def test_follow_prints_what_another_process_commits(tmp_path: Path) -> None:
    db = str(tmp_path / "engram.db")
    cli = CliRunner()
    assert run(cli, "--db", db, "add", "before", "1")[0] == 0
    command = [sys.executable, "-m", "engramdb.cli", "--db", db, "events", "tail", "-n", "1"]
    follower = subprocess.Popen(
        [*command, "--follow", "--json", "--interval", "0.05"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        assert follower.stdout is not None
        first = json.loads(follower.stdout.readline())
        assert first["payload"]["key"] == "before"
        for key in ("x1", "x2"):
            assert run(cli, "--db", db, "add", key, "1")[0] == 0
        seen: list[str] = []
        deadline = time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            event = json.loads(follower.stdout.readline())
            seen.append(event["payload"]["key"])
        assert seen == ["x1", "x2"]
    finally:
        follower.terminate()
        follower.wait(30)
        if follower.stdout is not None:
            follower.stdout.close()
