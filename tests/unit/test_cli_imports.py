"""The ``engram`` command starts without importing what only some commands need.

Checked by which modules a fresh interpreter has loaded, not by timing (the timings are in
docs/benchmarks.md, measured by bench/bench_cli_start.sh).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Loaded only by commands that need them: the model runtime, the web stack, the drivers.
HEAVY = (
    "onnxruntime",
    "onnx",
    "tokenizers",
    "numpy",
    "networkx",
    "fastapi",
    "starlette",
    "uvicorn",
    "psycopg",
    "hnswlib",
    "mcp",
    "langgraph",
    "langchain_core",
    "engramdb.engine",
)


def loaded_after(code: str) -> set[str]:
    """The top-level modules (and ``engramdb.*``) loaded once ``code`` ran in a new Python."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} | "
        "{m for m in sys.modules if m.startswith('engramdb.')})))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_core_never_imports_an_integration() -> None:
    loaded = loaded_after("import engramdb\nengramdb.open\nengramdb.EngineConfig")
    assert loaded.isdisjoint({"langgraph", "langchain_core"}), sorted(loaded)
    assert "engramdb.integrations" not in loaded


def test_importing_the_cli_loads_no_engine_model_or_web_framework() -> None:
    loaded = loaded_after("import engramdb.cli.app")
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


@pytest.mark.parametrize(
    "args", [["--help"], ["serve", "--help"], ["eval", "--help"], ["mcp", "--help"]]
)
def test_help_loads_none_of_them_either(args: list[str]) -> None:
    loaded = loaded_after(
        "from engramdb.cli.app import app\n"
        f"try:\n    app({args!r}, prog_name='engram')\nexcept SystemExit:\n    pass"
    )
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))


def test_import_engramdb_loads_names_on_first_use() -> None:
    loaded = loaded_after("import engramdb\nassert engramdb.EngramError")
    assert loaded.isdisjoint(HEAVY), sorted(loaded & set(HEAVY))
    assert "engramdb.engine" in loaded_after("import engramdb\nengramdb.open")
