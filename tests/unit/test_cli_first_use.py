"""What a person meets first in the ``engram`` command: a mistyped ``--db`` is refused, empty
results say so, sizes read as sizes, choices are listed, servers say where they are, long
work shows how far it got."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from engramdb.cli.app import EVENT_TYPES, app
from engramdb.cli.target import describe_target
from engramdb.core.events import EVENT_TYPES as DOMAIN_EVENT_TYPES
from engramdb.orchestrator.trace import TurnTraced
from tests.helpers.cli import run
from tests.helpers.ports import free_port
from tests.helpers.processes import serving

TAIL = "or check the path)\n"


@pytest.mark.parametrize("spelling", ["{missing}/x.db", "sqlite:///{missing}/x.db"])
def test_a_db_in_a_folder_that_does_not_exist_is_refused_and_nothing_is_made(
    cli: CliRunner, tmp_path: Path, spelling: str
) -> None:
    missing = tmp_path / "no" / "such"
    db = spelling.format(missing=missing)
    for args in (["--db", db, "add", "k", "v"], ["--db", db, "admin", "migrate"]):
        code, _, err = run(cli, *args)
        assert code == 2
        assert err == f"error: --db {db}: there is no folder {missing} (create it first, {TAIL}"
    result = cli.invoke(app, ["stats"], env={"ENGRAM_DB": db})
    assert (result.exit_code, result.stderr.startswith("error: --db")) == (2, True)
    assert not (tmp_path / "no").exists()


def test_a_folder_given_as_the_db_is_refused(cli: CliRunner, tmp_path: Path) -> None:
    code, _, err = run(cli, "--db", str(tmp_path), "stats")
    assert code == 2
    assert err == f"error: --db {tmp_path} is a folder: name a database file in it\n"


def test_the_default_database_is_made_in_the_user_data_folder(tmp_path: Path) -> None:
    runner = CliRunner(env={"ENGRAM_DB": None, "XDG_DATA_HOME": str(tmp_path / "data")})
    result = runner.invoke(app, ["add", "user.city", "Lisbon"])
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "data" / "engram" / "engram.db").is_file()


def test_an_empty_result_says_nothing_was_found(cli: CliRunner) -> None:
    for args in (
        ["recall", "which city?"],
        ["list"],
        ["events", "--type", "memory.expired"],
        ["remember", "which city?"],
    ):
        code, out, _ = run(cli, *args)
        assert (code, out) == (0, "nothing found\n"), args
    run(cli, "add", "user.city", "Lisbon")
    code, out, _ = run(cli, "recall", "Lisbon")
    assert "user.city" in out
    assert "nothing found" not in out


def test_stats_prints_the_size_for_people(cli: CliRunner) -> None:
    run(cli, "add", "k", "v")
    code, out, _ = run(cli, "stats")
    size_bytes = json.loads(run(cli, "stats", "--json")[1])["size_bytes"]
    assert code == 0
    line = next(line for line in out.splitlines() if line.startswith("size"))
    assert line.endswith(f" kB ({size_bytes:,} bytes)")


@pytest.mark.parametrize(
    ("args", "choices"),
    [
        (["forget", "--help"], "soft|hard"),
        (["serve", "--help"], "local|production"),
        (["admin", "key", "create", "--help"], "reader|writer"),
        (["memorize", "--help"], "working|episodic|semantic|procedural|conversation"),
    ],
)
def test_options_with_choices_list_them(cli: CliRunner, args: list[str], choices: str) -> None:
    code, out, _ = run(cli, *args)
    assert code == 0
    assert choices in out


@pytest.mark.parametrize(
    ("args", "listed"),
    [
        (["forget", "x", "--mode", "gentle"], "'gentle' is not one of 'soft', 'hard'"),
        (["serve", "--auth", "open"], "'open' is not one of 'local', 'production'"),
    ],
)
def test_a_wrong_choice_is_refused_with_the_choices(
    cli: CliRunner, args: list[str], listed: str
) -> None:
    code, _, err = run(cli, *args)
    assert code == 2
    assert listed in " ".join(err.replace("│", " ").split())


def test_type_options_name_the_types() -> None:
    for name in (*DOMAIN_EVENT_TYPES, TurnTraced.event_type):
        assert name in EVENT_TYPES
    runner = CliRunner(env={"COLUMNS": "300"})
    events_help = " ".join(runner.invoke(app, ["events", "--help"]).stdout.split())
    assert "memory.provider.registered" in events_help
    for command in ("add", "recall", "list"):
        shown = " ".join(runner.invoke(app, [command, "--help"]).stdout.split())
        assert "profile, event, fact" in shown, command


def test_long_work_shows_count_total_and_percentage(cli: CliRunner, tmp_path: Path) -> None:
    run(cli, "add", "user.city", "Lisbon")
    run(cli, "memorize", "I adopted a golden retriever called Max.")
    code, _, err = run(cli, "rebuild")
    assert code == 0
    assert "100%" in err
    events = json.loads(run(cli, "stats", "--json")[1])["events"]
    assert f"{events}/{events} events" in err
    code, _, err = run(cli, "reindex")
    assert (code, "1/1 memories" in err, "100%" in err) == (0, True, True)
    dump = tmp_path / "dump.jsonl"
    run(cli, "export", "--out", str(dump))
    code, _, err = run(cli, "--db", str(tmp_path / "other.db"), "import", str(dump))
    assert code == 0
    for phase in ("append", "rebuild", "embed"):
        line = next(line for line in err.splitlines() if line.startswith(phase))
        assert "100%" in line, line
    code, _, err = run(cli, "rebuild", "--json")
    assert (code, err) == (0, "")  # no bars around JSON


def test_describe_target_never_shows_a_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (
        describe_target("postgresql://app:s3cret@db.example:5432/engram?sslmode=require")
        == "postgresql://app@db.example:5432/engram?sslmode=require"
    )
    assert describe_target("postgresql://db/engram") == "postgresql://db/engram"
    monkeypatch.chdir(tmp_path)
    assert describe_target("memory.db") == str(tmp_path / "memory.db")


def test_serve_says_where_it_listens_how_it_authenticates_and_what_it_serves(
    tmp_path: Path,
) -> None:
    db = tmp_path / "served.db"
    port = free_port()
    command = [sys.executable, "-m", "engramdb.cli", "serve", "--db", str(db)]
    command += ["--port", str(port), "--no-vectors"]
    log = tmp_path / "serve.log"
    with serving(command, f"http://127.0.0.1:{port}/healthz", log=log):
        assert httpx.get(f"http://127.0.0.1:{port}/docs", timeout=10).status_code == 200
    said = log.read_text()
    assert f"Engram REST service on http://127.0.0.1:{port}/" in said
    assert "auth   local (one tenant, no credentials)" in said
    assert f"store  {db}" in said
