"""The ``engram`` command line, end to end on a real database file."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import engramdb
from engramdb.core.intent import MemoryItem
from engramdb.engine import EngineConfig
from engramdb.index.minilm import MiniLMEmbedder
from tests.helpers.cli import run


def test_add_get_recall_events_rebuild_stats(cli: CliRunner) -> None:
    assert run(cli, "add", "user.city", "Lisbon", "--type", "profile", "-m", "turn=7")[0] == 0
    assert run(cli, "add", "user.pet", '{"kind": "dog"}', "--json-value")[0] == 0
    code, out, _ = run(cli, "get", "user.city", "--json")
    assert code == 0
    entry = json.loads(out)
    assert (entry["value"], entry["content_type"], entry["metadata"]) == (
        "Lisbon",
        "profile",
        {"turn": 7},
    )
    code, out, _ = run(cli, "--json", "recall", "which city is home, Lisbon?")
    assert code == 0
    assert json.loads(out)[0]["entry"]["key"] == "user.city"
    code, out, _ = run(cli, "recall", "lisbon")
    assert "user.city" in out
    code, out, _ = run(cli, "events", "--json", "--type", "memory.written")
    assert [e["payload"]["key"] for e in json.loads(out)] == ["user.city", "user.pet"]
    code, out, _ = run(cli, "rebuild", "--json")
    assert code == 0
    assert {ns: n for ns, n in json.loads(out)["records"].items() if n} == {"event_sourced": 2}
    code, out, _ = run(cli, "stats", "--json")
    assert json.loads(out)["records"] == 2
    code, out, _ = run(cli, "list", "--prefix", "user.")
    assert "user.city" in out
    assert "user.pet" in out


def test_delete_and_scope_options(cli: CliRunner) -> None:
    run(cli, "--tenant", "acme", "--user", "alice", "add", "k", "alice's")
    code, _, err = run(cli, "--tenant", "acme", "--user", "bob", "get", "k")
    assert code == 2
    assert "no entry 'k'" in err
    assert run(cli, "--tenant", "acme", "--user", "alice", "delete", "k")[0] == 0
    assert run(cli, "--tenant", "acme", "--user", "alice", "get", "k")[0] == 2
    code, out, _ = run(cli, "events", "--json", "--type", "memory.deleted")
    assert [e["scope"]["user"] for e in json.loads(out)] == ["alice"]


def test_ttl_and_sweep(cli: CliRunner) -> None:
    run(cli, "add", "soon", "gone", "--ttl", "0.001")
    time.sleep(0.01)
    _, out, _ = run(cli, "sweep", "--json")
    assert json.loads(out) == {"expired": 1}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["add", "", "x"], "key must not be empty"),
        (["add", "k", "x", "--meta", "novalue"], "metadata must be key=value"),
        (["add", "k", "{bad", "--json-value"], "VALUE is not valid JSON"),
        (["add", "k", "x", "--type", "Bad Type"], "content_type must be a lowercase identifier"),
        (["add", "k", "x", "--ttl", "-1"], "ttl"),
        (["add", "x" * 600, "x"], "limit is 512"),
        (["get", "missing"], "no entry 'missing'"),
        (["delete", "missing"], "no entry 'missing'"),
        (["--tenant", " bad", "list"], "scope tenant"),
    ],
)
def test_bad_input_prints_one_clear_line_and_exits_2(
    cli: CliRunner, args: list[str], message: str
) -> None:
    code, out, err = run(cli, *args)
    assert code == 2
    assert err.count("\n") == 1
    assert err.startswith("error: ")
    assert message in err
    code, out, _ = run(cli, "stats", "--json")
    assert json.loads(out)["records"] == 0


def test_unknown_backend_is_one_line(cli: CliRunner) -> None:
    code, _, err = run(cli, "--db", "mysql://nowhere/x", "stats")
    assert code == 2
    assert err.startswith("error: no storage backend for 'mysql'")


def test_installed_entry_point_runs(tmp_path: Path) -> None:
    env = {**os.environ, "ENGRAM_DB": str(tmp_path / "proc.db")}
    script = Path(sys.executable).parent / "engram"
    command = [str(script)] if script.exists() else [sys.executable, "-m", "engramdb.cli"]
    done = subprocess.run(
        [*command, "add", "k", "v"], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    done = subprocess.run(
        [*command, "get", ""], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert done.stderr.strip() == "error: key must not be empty"


def test_reindex_embeds_every_memory_again_with_the_current_model(cli: CliRunner) -> None:
    assert run(cli, "memorize", "I adopted a golden retriever called Max.")[0] == 0
    assert run(cli, "memorize", "We are planning a trip to Kyoto.", "-t", "semantic")[0] == 0
    code, out, _ = run(cli, "reindex", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["vectors"] == 2
    assert report["model"] == "all-MiniLM-L6-v2-onnx-int8-per-token-exact"
    code, out, _ = run(cli, "--json", "remember", "what dog do I have?")
    assert code == 0
    assert "golden retriever" in out


def test_stats_count_vectors_per_model_and_a_stale_reindex_finds_none_to_do(
    cli: CliRunner,
) -> None:
    assert run(cli, "memorize", "I adopted a golden retriever called Max.")[0] == 0
    code, out, _ = run(cli, "stats", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["vectors"] == {report["model"]: 1}
    code, out, _ = run(cli, "stats")
    assert f"vectors   1 of {report['model']}" in out
    assert "not the current model" not in out
    code, out, _ = run(cli, "reindex", "--stale", "--json")
    assert code == 0
    assert json.loads(out)["vectors"] == 0


def test_vectors_of_an_older_model_are_reported_and_reindexed(
    cli: CliRunner, tmp_path: Path
) -> None:
    async def write_with_the_float_model() -> str:
        async with (
            MiniLMEmbedder(threads=1, precision="float32") as old,
            engramdb.open(tmp_path / "cli.db", config=EngineConfig(embedder=old)) as engine,
        ):
            await engine.scope().episodic.memorize(MemoryItem(text="I play the cello."))
            return old.model_id

    old_model = asyncio.run(write_with_the_float_model())
    code, out, err = run(cli, "stats")
    assert code == 0
    assert f"vectors   1 of {old_model}  (not the current model" in out
    assert "warning:" in err
    assert "engram reindex --stale" in err
    code, out, _ = run(cli, "reindex", "--stale", "--json")
    assert json.loads(out)["vectors"] == 1
    code, out, err = run(cli, "stats")
    assert "not the current model" not in out
    assert "warning" not in err


def test_import_restores_an_export_into_an_empty_database(cli: CliRunner, tmp_path: Path) -> None:
    run(cli, "add", "user.city", "Lisbon", "--type", "profile")
    dump = tmp_path / "dump.jsonl"
    assert run(cli, "export", "--out", str(dump))[0] == 0
    other = str(tmp_path / "other.db")
    code, out, _ = run(cli, "--db", other, "--json", "import", str(dump))
    assert code == 0
    report = json.loads(out)
    assert report["records"] == report["records_expected"] == 1
    assert "Lisbon" in run(cli, "--db", other, "get", "user.city")[1]
    code, _, err = run(cli, "--db", other, "import", str(dump))
    assert (code, "needs an empty database" in err) == (2, True)
    assert "no export at" in run(cli, "--db", other, "import", str(tmp_path / "nope"))[2]
