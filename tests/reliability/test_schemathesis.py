"""Hostile requests against a live service: schemathesis generates valid and invalid
(negative) requests for every operation of the OpenAPI schema and sends them to a real
``engram serve`` in production mode (an API key issued before it started), on SQLite and on
PostgreSQL. No answer may be a server error (status ≥ 500).

Bounded for CI (``ENGRAM_SCHEMATHESIS_SECONDS``, default 40 s of generation per backend, and
``ENGRAM_SCHEMATHESIS_EXAMPLES``, default 5 per operation); a longer run by hand is the same
test with larger ones (and ``ENGRAM_SCHEMATHESIS_PHASES`` adding ``stateful``), run with
``-s`` to see schemathesis's summary (docs/reliability.md has the figures).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import engramdb
from engramdb.engine import Engine, EngineConfig
from engramdb.service.app import create_app
from engramdb.service.settings import ServiceSettings
from tests.helpers.ports import free_port
from tests.helpers.processes import serving
from tests.service.conftest import JWT_SECRET

SECONDS = int(os.environ.get("ENGRAM_SCHEMATHESIS_SECONDS", "40"))
EXAMPLES = int(os.environ.get("ENGRAM_SCHEMATHESIS_EXAMPLES", "5"))
PHASES = os.environ.get("ENGRAM_SCHEMATHESIS_PHASES", "examples,coverage,fuzzing")
CONFIG = Path(__file__).resolve().parents[2] / "schemathesis.toml"


async def _issue_key(target: str) -> str:
    """A tenant-wide writer key of tenant ``acme`` (which may act for any of its users)."""
    async with engramdb.open(target, config=EngineConfig(embedder=None)) as engine:
        await engine.tenancy.create_tenant("acme", "Acme")
        await engine.tenancy.create_user("acme", "alice")
        return (await engine.tenancy.create_key("acme"))[1]


def schemathesis_command(
    url: str, key: str, report: Path, seconds: int, examples: int
) -> list[str]:
    """Every operation, valid and negative data, only the server-error check (which lets
    the documented 503 of a busy machine pass, as ``schemathesis.toml`` says)."""
    return [
        *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG)),
        *("run", f"{url}/openapi.json"),
        *("--checks", "not_a_server_error", "--mode", "all"),
        *("--phases", PHASES),
        *("--generation-database", "none"),
        *("--max-examples", str(examples), "--max-time", str(seconds)),
        *("--header", f"Authorization: Bearer {key}"),
        *("--workers", "1", "--seed", "20261125", "--request-timeout", "30"),
        *("--report", "junit", "--report-junit-path", str(report)),
        "--no-color",
    ]


@pytest.mark.reliability
def test_no_request_gets_a_server_error(target: str, tmp_path: Path) -> None:
    key = asyncio.run(_issue_key(target))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    serve = [
        *(sys.executable, "-m", "engramdb.cli", "--db", target, "serve"),
        *("--host", "127.0.0.1", "--port", str(port), "--auth", "production"),
    ]
    env = {**os.environ, "ENGRAM_JWT_SECRET": JWT_SECRET, "HF_HUB_OFFLINE": "1"}
    with serving(serve, f"{url}/healthz", log=tmp_path / "serve.log", env=env):
        run = subprocess.run(
            schemathesis_command(url, key, tmp_path / "junit.xml", SECONDS, EXAMPLES),
            capture_output=True,
            text=True,
            timeout=SECONDS + 120,
            check=False,
            cwd=tmp_path,
        )
    summary = run.stdout[-6000:]
    print(summary[summary.find("SUMMARY") :])  # the figures, for a run with -s
    assert run.returncode == 0, summary
    assert "passed" in summary
    assert "Internal Server Error" not in (tmp_path / "serve.log").read_text(errors="replace")


HOSTILE_STRINGS = {"nul": '"a\\u0000b"', "lone surrogate": '"x\\ud800y"'}


@pytest.mark.parametrize("text", HOSTILE_STRINGS.values(), ids=HOSTILE_STRINGS.keys())
async def test_unstorable_strings_are_no_server_errors(any_engine: Engine, text: str) -> None:
    """A string JSON can carry but no backend stores is a 4xx, on both backends alike."""
    await any_engine.tenancy.create_tenant("acme")
    key = (await any_engine.tenancy.create_key("acme"))[1]
    app = create_app(ServiceSettings(auth="production"), engine=any_engine)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
        base_url="http://service",
        headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"},
    ) as client:
        answer = await client.post("/v1/memory/entries", content=f'{{"key": "k", "value": {text}}}')
    assert answer.status_code == 422, answer.text
