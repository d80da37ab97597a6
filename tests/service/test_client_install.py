"""Installing only the client: a fresh virtualenv (no system site-packages) gets
engramdb-client and its dependencies offline, holds none of the model runtime or the server,
and talks to a live ``engram serve`` through the async and the blocking client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

from tests.helpers.wheels import CLIENT_PROJECT, ROOT, client_build, repacked
from tests.service.conftest import LiveServer

#: What only the engine and the server need; none may be importable beside the client alone.
HEAVY = ["onnxruntime", "onnx", "hnswlib", "fastapi", "numpy", "uvicorn", "networkx", "re2"]

SCRIPT = textwrap.dedent(
    """
    import asyncio, importlib.util, json, sys

    from engramdb.client import MemoryClient, SyncMemoryClient
    from engramdb.core.errors import NotFoundError

    url, key, heavy = sys.argv[1], sys.argv[2], sys.argv[3].split(",")

    async def through_async():
        async with MemoryClient(url, api_key=key) as memory:
            await memory.store_knowledge("The staging database lives in Frankfurt.")
            found = await memory.search_knowledge("where is the staging database?")
            return [item.text for item in found]

    with SyncMemoryClient(url, api_key=key) as memory:
        written = memory.log_interaction("user", "I prefer tea to coffee")
        recent = [item.text for item in memory.get_recent_history(5)]
        entity = memory.graph.add_entity("Frankfurt", "location")
        try:
            memory.get_plan("no-such-plan")
            missing = None
        except NotFoundError as error:
            missing = type(error).__name__

    import engramdb
    print(json.dumps({
        "async_found": asyncio.run(through_async()),
        "sync_written": written.status,
        "sync_recent": recent,
        "entity": entity.name,
        "missing": missing,
        "importable": [name for name in heavy if importlib.util.find_spec(name)],
        "engine_loaded": sorted(m for m in sys.modules if m.startswith("engramdb.")
                                and m.split(".")[1] not in ("client", "core", "service",
                                                            "orchestrator", "providers")),
        "engramdb_at": engramdb.__file__,
        "version": engramdb.__version__,
    }))
    """
)


def run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``command`` outside this interpreter's environment (no PYTHONPATH, no venv)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PIP_", "VIRTUAL"))}
    return subprocess.run(
        command, check=True, capture_output=True, text=True, env=env, timeout=300, cwd=cwd
    )


def test_the_client_alone_installs_offline_and_talks_to_engram_serve(
    tmp_path: Path, live_server: LiveServer
) -> None:
    project = tomllib.loads((CLIENT_PROJECT / "pyproject.toml").read_text())["project"]
    wheels = tmp_path / "wheels"
    repacked(project["dependencies"], wheels)
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", str(venv)])
    python = str(venv / "bin" / "python")
    # pip builds the client through its in-tree backend; everything else comes from `wheels`.
    run(
        [
            *(python, "-m", "pip", "install", "--quiet", "--no-index", "--no-cache-dir"),
            *("--find-links", str(wheels), str(CLIENT_PROJECT)),
        ]
    )
    listed = run([python, "-m", "pip", "list", "--format=json"]).stdout
    installed = {entry["name"].lower() for entry in json.loads(listed)}
    assert "engramdb-client" in installed
    assert "engramdb" not in installed

    script = tmp_path / "talk.py"
    script.write_text(SCRIPT)
    answer = run(
        [python, str(script), live_server.url, live_server.alice, ",".join(HEAVY)], cwd=tmp_path
    )
    seen = json.loads(answer.stdout)
    assert seen["importable"] == []
    assert seen["engine_loaded"] == []
    assert seen["engramdb_at"].startswith(str(venv))
    assert seen["version"] == project["version"]
    assert seen["async_found"][0] == "The staging database lives in Frankfurt."
    assert seen["sync_written"] == "created"
    assert seen["sync_recent"][0] == "I prefer tea to coffee"
    assert seen["entity"] == "Frankfurt"
    assert seen["missing"] == "NotFoundError"


def test_the_client_distribution_lists_what_the_client_imports() -> None:
    """The wheel holds exactly the modules ``import engramdb.client`` loads: a module the
    client starts to import must be added to the list (and must be light)."""
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, engramdb.client; "
            "print('\\n'.join(m for m in sys.modules if m.startswith('engramdb')))",
        ],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    ).stdout.split()
    packages = {m for m in loaded if (ROOT / "src" / m.replace(".", "/") / "__init__.py").exists()}
    config = tomllib.loads((CLIENT_PROJECT / "pyproject.toml").read_text())
    assert sorted(set(loaded) - packages) == sorted(config["tool"]["engramdb-client"]["modules"])


def test_the_client_has_the_version_of_engramdb(tmp_path: Path) -> None:
    client = tomllib.loads((CLIENT_PROJECT / "pyproject.toml").read_text())["project"]
    main = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert client["version"] == main["version"]
    wheel = client_build().client_wheel(tmp_path)
    assert wheel.name == f"engramdb_client-{main['version']}-py3-none-any.whl"
