"""``engram eval`` through typer's CliRunner: bad input, and full runs on a real engine."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from engramdb.cli.app import app
from engramdb.cli.eval_command import parse_ks, parse_search_settings
from engramdb.core.errors import UsageError, ValidationError
from tests.helpers.openai_server import Seen
from tests.helpers.rerank_server import rerank_server

__all__ = ["rerank_server"]  # a fixture used here


@pytest.fixture
def cli() -> CliRunner:
    return CliRunner(env={"COLUMNS": "200"})


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--k", "0"], "--k must be at least 1"),
        (["--k", "five"], "--k takes whole numbers"),
        (["--limit-questions", "1", "--sample", "1"], None),
    ],
)
def test_bad_options_exit_2(
    cli: CliRunner, tmp_path: Path, args: list[str], message: str | None
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"not": "a benchmark"}')
    result = cli.invoke(app, ["eval", str(bad), *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert (message or "unrecognised benchmark file") in result.stderr


def test_a_file_without_questions_is_a_usage_error(cli: CliRunner, tmp_path: Path) -> None:
    only_abstention = tmp_path / "abs.json"
    only_abstention.write_text(
        json.dumps(
            [
                {
                    "question_id": "x_abs",
                    "question_type": "single-session-user",
                    "question": "?",
                    "question_date": "2023/05/30 (Tue) 10:00",
                    "haystack_dates": [],
                    "haystack_session_ids": [],
                    "haystack_sessions": [],
                    "answer_session_ids": [],
                }
            ]
        )
    )
    result = cli.invoke(app, ["eval", str(only_abstention)])
    assert result.exit_code == 2
    assert "holds no question to evaluate" in result.stderr


def test_parse_search_settings_reads_each_field_as_its_type() -> None:
    parsed = parse_search_settings(["strip_time=false", "part_vectors=1", "time_boost=0.2"])
    assert parsed == {"strip_time": False, "part_vectors": True, "time_boost": 0.2}
    assert parse_search_settings(["candidates=200"]) == {"candidates": 200}
    for bad in ("strip_time=maybe", "candidates=many", "nope=1", "mode=bm25"):
        with pytest.raises(UsageError):
            parse_search_settings([bad])


def test_parse_ks() -> None:
    assert parse_ks(None) == (5, 10)
    assert parse_ks(["10", "5,1", "5"]) == (1, 5, 10)
    with pytest.raises(ValidationError):
        parse_ks([""])


@pytest.mark.integration
def test_compare_on_longmemeval(cli: CliRunner, longmemeval_file: Path, tmp_path: Path) -> None:
    out, plot = tmp_path / "report.json", tmp_path / "report.png"
    cache = tmp_path / "embeddings.sqlite"
    args = ["eval", str(longmemeval_file), "--compare", "--embedding-cache", str(cache)]
    result = cli.invoke(app, [*args, "--out", str(out), "--plot", str(plot)])
    assert result.exit_code == 0, result.stderr
    text = result.stdout
    assert "2 questions evaluated" in text
    assert "1 abstention (_abs)" in text
    assert "only user turns are indexed" in text
    for expected in ("single-session-user", "multi-session", "overall", "bm25", "vector"):
        assert expected in text
    assert "turns/s" in text
    report = json.loads(out.read_text())
    assert [run["mode"] for run in report["runs"]] == ["bm25", "vector", "hybrid"]
    assert report["config"]["embedder"]["cache"]["path"] == str(cache)
    # The turn that holds the answer shares its words with the question: every mode finds it.
    for run in report["runs"]:
        single = next(q for q in run["questions"] if q["question_id"] == "q-single")
        assert single["turn"]["recall_all@5"] == 1.0
        assert single["session"]["recall_all@5"] == 1.0
        assert run["ingest"]["turns"] == 7
    # Vector runs embed through the cache (questions too); bm25 runs have no embedder.
    caches = [run["embedding_cache"] for run in report["runs"]]
    assert caches[0] is None
    assert caches[1]["misses"] >= 7
    assert caches[2]["misses"] == 0  # hybrid after vector: the same texts, all from the file
    assert caches[2]["hits"] >= 7
    assert plot.read_bytes().startswith(b"\x89PNG")
    assert cache.is_file()


@pytest.mark.integration
def test_locomo_json_output(cli: CliRunner, locomo_file: Path, tmp_path: Path) -> None:
    args = ["--json", "eval", str(locomo_file), "--mode", "bm25", "--k", "1,3"]
    result = cli.invoke(app, [*args, "--no-embedding-cache", "--granularity", "session"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["dataset"]["format"] == "locomo"
    assert report["dataset"]["questions_skipped"] == {"no evidence": 1}
    assert report["config"]["granularity"] == "session"
    assert report["config"]["embedder"]["cache"] is None
    (run,) = report["runs"]
    assert set(run["overall"]) == {"n", "session"}
    assert run["overall"]["n"] == 3
    assert set(run["categories"]) == {"category 1", "category 2", "category 4"}


@pytest.mark.integration
def test_a_reranker_serves_the_hybrid_run_alone(
    cli: CliRunner, locomo_file: Path, rerank_server: tuple[str, list[Seen]]
) -> None:
    base_url, log = rerank_server
    log.clear()
    args = ["--json", "eval", str(locomo_file), "--compare", "--no-embedding-cache"]
    result = cli.invoke(app, [*args, "--rerank-url", base_url, "--rerank-model", "word:cake"])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["config"]["reranker"] == {"url": base_url, "model": "word:cake"}
    assert [run["mode"] for run in report["runs"]] == ["bm25", "vector", "hybrid"]
    assert len(log) == report["runs"][-1]["overall"]["n"]  # one request per hybrid question
    alone = cli.invoke(app, ["eval", str(locomo_file), "--rerank-url", base_url])
    assert alone.exit_code == 2
    assert "--rerank-url and --rerank-model go together" in alone.stderr
