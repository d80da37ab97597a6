"""``engram --files``: file categories as ``-t`` choices, ``engram rescan`` for hand edits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.helpers.cli import run


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    """The ``engram`` command on a fresh database, keeping memory files in ``tmp/memory``."""
    return CliRunner(
        env={"ENGRAM_DB": str(tmp_path / "cli.db"), "ENGRAM_USER": "alice", "COLUMNS": "200"}
    )


def test_file_categories_through_the_cli(cli: CliRunner, tmp_path: Path) -> None:
    files = str(tmp_path / "memory")
    code, out, err = run(
        cli,
        "--files",
        files,
        "memorize",
        "Alice lives in Lisbon",
        "-t",
        "profile",
        "--key",
        "user.city",
    )
    assert (code, err) == (0, "")
    assert "created user.city in profile" in out
    profile = tmp_path / "memory/default/users/alice/profile.md"
    profile.write_text(profile.read_text().replace("Lisbon", "Porto"))
    code, out, _ = run(cli, "--files", files, "rescan", "--json")
    assert code == 0
    assert json.loads(out) == {"added": [], "changed": ["user.city"], "removed": [], "ignored": []}
    code, out, _ = run(cli, "--files", files, "remember", "Porto", "-t", "profile", "--json")
    assert code == 0
    assert [item["text"] for item in json.loads(out)] == ["Alice lives in Porto"]
    code, out, _ = run(cli, "--files", files, "rescan")
    assert out.splitlines()[0].split() == ["added", "0"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["memorize", "x", "-t", "profile"], "needs memory files"),
        (["rescan"], "needs the memory files"),
        (["--files", "{files}", "--user", "../x", "memorize", "x", "-t", "event"], "user '../x'"),
        (["--files", "{files}", "--user", "a\u202eb", "memorize", "x", "-t", "event"], "U+202E"),
    ],
)
def test_misuse_is_one_error_line(
    cli: CliRunner, tmp_path: Path, args: list[str], message: str
) -> None:
    files = str(tmp_path / "memory")
    code, _, err = run(cli, *(a.replace("{files}", files) for a in args))
    assert code == 2
    assert err.startswith("error: ")
    assert message in err
    assert not (tmp_path / "memory").exists() or not any((tmp_path / "memory").rglob("*.md"))


def test_an_unknown_type_is_refused_with_the_choices(cli: CliRunner) -> None:
    code, _, err = run(cli, "memorize", "x", "-t", "nonsense")
    assert code == 2
    assert "profile" in err
