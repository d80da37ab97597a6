"""``engram ingest FILE``: the per-category report, ``--json``, and bad files refused before
the database is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from tests.evaluation.conftest import longmemeval_records, write_benchmark
from tests.helpers.cli import run


@pytest.fixture
def cli(tmp_path: Path) -> CliRunner:
    return CliRunner(env={"ENGRAM_DB": str(tmp_path / "cli.db"), "COLUMNS": "200"})


def conversation(path: Path) -> Path:
    lines = [
        {"role": "user", "content": "I live in Lisbon.", "timestamp": "2024-01-02T10:00:00Z"},
        {"role": "assistant", "content": "Lovely city!", "timestamp": "2024-01-02T10:00:05Z"},
        {"role": "user", "content": "I moved to Porto.", "timestamp": "2024-04-02T10:00:00Z"},
    ]
    path.write_text("\n".join(json.dumps(line) for line in lines))
    return path


def test_ingest_prints_the_report(cli: CliRunner, tmp_path: Path) -> None:
    code, out, _ = run(cli, "--user", "ana", "ingest", str(conversation(tmp_path / "c.jsonl")))
    assert code == 0
    assert "stored 3 episodes; extracted 2 items" in out
    assert "│ profile  │     1 │       1 │          1 │         0 │" in out
    assert "The user lives in Porto." in out
    code, out, _ = run(cli, "--user", "ana", "recall", "lives in")
    assert code == 0


def test_ingest_json(cli: CliRunner, tmp_path: Path) -> None:
    source = str(conversation(tmp_path / "c.jsonl"))
    code, out, _ = run(cli, "--user", "ana", "ingest", source, "--json")
    assert code == 0
    report = json.loads(out)
    assert report["categories"]["profile"]["updated"] == 1
    assert [i["sources"] for i in report["items"]] == [[i["sources"][0]] for i in report["items"]]
    code, out, _ = run(cli, "--json", "--user", "ana", "ingest", source)
    assert json.loads(out)["notes"] == ["everything extracted was already known: nothing changed"]


def test_nothing_extracted(cli: CliRunner, tmp_path: Path) -> None:
    source = tmp_path / "q.json"
    source.write_text(json.dumps([{"role": "user", "content": "How do I boil an egg?"}]))
    code, out, _ = run(cli, "ingest", str(source))
    assert code == 0
    assert "nothing extracted" in out
    assert "note: no rule matched in 1 user turns" in out


def test_bad_files_change_nothing(cli: CliRunner, tmp_path: Path) -> None:
    broken = tmp_path / "b.jsonl"
    broken.write_text('{"role": "user", "content": "I live in Lisbon."}\n{"role": "user"}\n')
    code, _, err = run(cli, "ingest", str(broken))
    assert code == 2
    assert err.startswith("error: line 2: ")
    code, _, err = run(cli, "ingest", str(tmp_path / "missing.json"))
    assert (code, err.split(":")[0]) == (2, "error")
    benchmark = write_benchmark(tmp_path / "lme.json.xz", longmemeval_records())
    code, _, err = run(cli, "ingest", str(benchmark))
    assert code == 2
    assert "choose one with --haystack" in err
    assert not (tmp_path / "cli.db").exists()


def test_ingest_a_benchmark_haystack(cli: CliRunner, tmp_path: Path) -> None:
    benchmark = write_benchmark(tmp_path / "lme.json.xz", longmemeval_records())
    code, out, _ = run(cli, "--json", "ingest", str(benchmark), "--haystack", "q-single")
    assert code == 0
    report = json.loads(out)
    assert report["turns"] == report["episodes"] > 0
