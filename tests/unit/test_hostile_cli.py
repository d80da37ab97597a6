"""Hostile input on the command line: each is one ``error:`` line and exit 2, never a
traceback, and nothing is stored. Invalid UTF-8 in the arguments goes through a real process
(Python decodes it to lone surrogates), the rest through typer's runner."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import engramdb
from engramdb.engine import EngineConfig
from engramdb.storage.backend import EventQuery
from tests.helpers.cli import run

DEEP = "[" * 10_000 + "]" * 10_000

HOSTILE: dict[str, list[str]] = {
    "deep json value": ["add", "k", DEEP, "--json-value"],
    "deep json metadata": ["add", "k", "v", "--meta", f"m={DEEP}"],
    "json value 101 deep": ["add", "k", "[" * 101 + "]" * 101, "--json-value"],
    "nul in value": ["add", "k", "a\x00b"],
    "nul escape in json value": ["add", "k", '"a\\u0000b"', "--json-value"],
    "nul in a json key": ["add", "k", '{"\\u0000": 1}', "--json-value"],
    "surrogate escape in json value": ["add", "k", '["\\ud800"]', "--json-value"],
    "nul in metadata": ["add", "k", "v", "--meta", "m=a\x00b"],
    "nul in a metadata name": ["add", "k", "v", "--meta", "a\x00=1"],
    # What Python makes of invalid UTF-8 in argv: a lone surrogate per bad byte.
    "decoded bad byte in value": ["add", "k", "a\udcffb"],
    "decoded bad byte in key": ["add", "k\udcff", "v"],
    "decoded bad byte in tenant": ["--tenant", "t\udcff", "add", "k", "v"],
    "nul in user": ["--user", "u\x00", "add", "k", "v"],
    "ttl nan": ["add", "k", "v", "--ttl", "nan"],
    "ttl inf": ["add", "k", "v", "--ttl", "inf"],
    "ttl -1": ["add", "k", "v", "--ttl", "-1"],
    "ttl beyond a century": ["add", "k", "v", "--ttl", "1e300"],
    "value over the size limit": ["add", "k", "x" * 2_000_000],
    "events after 10**30": ["events", "--after", str(10**30)],
    "events limit 10**30": ["events", "--limit", str(10**30)],
    "nul in a list prefix": ["list", "--prefix", "a\x00"],
    "nul in a key read": ["get", "k\x00"],
    "decoded bad byte in a key deleted": ["delete", "\udcff"],
    "nul in an episode": ["memorize", "a\x00b"],
    "backreference trigger": ["memorize", "r", "-t", "procedural", "--trigger", r"regex:(a)\1"],
    "lookbehind trigger": ["memorize", "r", "-t", "procedural", "--trigger", "regex:(?<=a)b"],
    "an export that is not there": ["import", "/nonexistent/export.jsonl"],
}


def written(db: Path) -> list[str]:
    """The keys of every ``memory.written`` event in ``db``."""

    async def read() -> list[str]:
        async with engramdb.open(db, config=EngineConfig(embedder=None)) as engine:
            events = await engine.events.read(EventQuery(event_types=("memory.written",)))
            return [str(e.payload.get("key")) for e in events]

    return asyncio.run(read())


def assert_refused(code: int, out: str, err: str) -> None:
    assert code == 2, (code, out, err)
    assert "Traceback" not in out + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err


@pytest.mark.parametrize("args", list(HOSTILE.values()), ids=list(HOSTILE))
def test_hostile_input_is_one_error_line_and_exit_2(
    cli: CliRunner, tmp_path: Path, args: list[str]
) -> None:
    assert_refused(*run(cli, *args))
    if (tmp_path / "cli.db").exists():
        assert written(tmp_path / "cli.db") == []


@pytest.mark.parametrize(
    "argv",
    [
        [b"add", b"k", b"a\xffb"],
        [b"add", b"k\xc3", b"v"],
        [b"--tenant", b"t\xed\xa0\x80", b"add", b"k", b"v"],
        [b"events", b"--type", b"memory.\xff"],
        [b"events", b"tail", b"--type", b"\xff"],
    ],
    ids=["value", "key", "tenant", "event type", "tail event type"],
)
def test_invalid_utf8_arguments_are_refused(tmp_path: Path, argv: list[bytes]) -> None:
    db = tmp_path / "proc.db"
    env = {**os.environ, "ENGRAM_DB": str(db), "PYTHONUTF8": "1"}
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"engramdb.cli", *argv],
        env=env,
        capture_output=True,
        check=False,
    )
    assert_refused(
        done.returncode,
        done.stdout.decode(errors="replace"),
        done.stderr.decode(errors="replace"),
    )
    if db.exists():
        assert written(db) == []


def _export(tmp_path: Path) -> list[str]:
    """The lines of a small, valid export with one value ``"placeholder"``."""

    async def make() -> list[str]:
        async with engramdb.open(tmp_path / "src.db", config=EngineConfig(embedder=None)) as e:
            memory = e.scope(tenant="acme", user="alice")
            await memory.persistent.write("fine", "kept?")
            await memory.persistent.write("bad", "placeholder")
            return [json.dumps(row) async for row in e.export()]

    return asyncio.run(make())


@pytest.mark.parametrize(
    "kind", ["invalid utf-8", "surrogate escape", "nul escape", "deep json", "5 MB value"]
)
def test_import_of_a_hostile_export_stores_nothing(
    cli: CliRunner, tmp_path: Path, kind: str
) -> None:
    lines = _export(tmp_path)
    placeholder = '"placeholder"'
    assert any(placeholder in line for line in lines)
    raw = "\n".join(lines).encode()
    if kind == "invalid utf-8":
        raw = raw.replace(placeholder.encode(), b'"pl\xffaceholder"')
    elif kind == "surrogate escape":
        raw = raw.replace(placeholder.encode(), b'"\\ud800"')
    elif kind == "nul escape":
        raw = raw.replace(placeholder.encode(), b'"a\\u0000b"')
    elif kind == "deep json":
        raw += b"\n" + DEEP.encode()
    else:  # beyond the 1 MiB a write may store
        raw = raw.replace(placeholder.encode(), json.dumps("x" * 5_000_000).encode())
    export = tmp_path / "hostile.jsonl"
    export.write_bytes(raw + b"\n")
    assert_refused(*run(cli, "import", str(export)))
    assert written(tmp_path / "cli.db") == []


def _files_folders(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "a-file").write_text("not a folder")
    return {
        "a file": str(tmp_path / "a-file"),
        "under a file": str(tmp_path / "a-file" / "memory"),
        "nul": str(tmp_path / "a\x00b"),
        "lone surrogate": str(tmp_path / "\ud800"),
        "decoded bad byte": str(tmp_path / "a\udcffb"),
        "10,000 characters": str(tmp_path / ("x" * 10_000)),
        "a name over 255 bytes": str(tmp_path / ("x" * 300)),
        "cannot be made": "/proc/engram-memory",
    }


FILES_FOLDERS = list(_files_folders(Path("/tmp")))


@pytest.mark.parametrize("kind", FILES_FOLDERS)
@pytest.mark.parametrize("command", [["serve", "--no-vectors", "--port", "0"], ["memorize", "x"]])
def test_a_memory_folder_no_file_could_be_written_under_is_refused_first(
    cli: CliRunner, tmp_path: Path, kind: str, command: list[str]
) -> None:
    folder = _files_folders(tmp_path)[kind]
    assert_refused(*run(cli, "--files", folder, *command))
    assert not (tmp_path / "cli.db").exists()  # refused before the database is made
    assert (tmp_path / "a-file").read_text() == "not a folder"


def test_invalid_utf8_in_the_files_folder_is_refused_by_serve(tmp_path: Path) -> None:
    db = tmp_path / "proc.db"
    env = {**os.environ, "ENGRAM_DB": str(db), "PYTHONUTF8": "1"}
    argv = [b"--files", bytes(tmp_path) + b"/a\xffb", b"serve", b"--no-vectors", b"--port", b"0"]
    done = subprocess.run(
        [sys.executable.encode(), b"-m", b"engramdb.cli", *argv],
        env=env,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert_refused(done.returncode, done.stdout.decode(), done.stderr.decode(errors="replace"))
    assert "UTF-8" in done.stderr.decode(errors="replace")
    assert sorted(tmp_path.iterdir()) == []
