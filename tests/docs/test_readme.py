"""Every code block of README.md, read from the README when the tests run, and run.

Python blocks run as scripts in a temporary folder (the REST client's block against a server
started for it, as the README tells). Bash blocks run line by line in a temporary folder, with
the ``engram`` command installed beside this Python and a user data folder of their own;
a server line runs in the background until it answers, then is stopped. Four things are
changed on the way, each said where it is done:

* ports written in a block are swapped for free ones, so that parallel runs do not collide;
* a file of the checkout that a block names (``schemathesis.toml``) is copied into its
  folder, as the block is written to run from the checkout;
* ``pip install -e …`` is checked to be done (this checkout installed, the extra's
  requirements present) instead of being run again: ``scripts/test.sh`` runs it before
  pytest starts, and running it inside the suite would reinstall the package under test;
* the lines that are the suite itself and its checks (``bash scripts/test.sh``,
  ``bash .ci/run``, ruff, mypy) are checked to be what ``.ci/run`` runs, not run from inside
  the suite.

The LongMemEval command runs as written on a tiny file of the same format (the real file
takes 25 minutes to embed the first time). No block is skipped.
"""

from __future__ import annotations

import importlib.metadata
import json
import lzma
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import engramdb
from tests.evaluation.conftest import longmemeval_records
from tests.helpers.ports import free_port
from tests.helpers.processes import serving, stop_group

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
#: Files of the checkout a block may name, run as it is from the checkout.
CHECKOUT_FILES = ("schemathesis.toml",)
CI_RUN = ROOT / ".ci" / "run"
TIMEOUT_S = 600


@dataclass(frozen=True)
class Block:
    """One fenced code block of the README."""

    language: str
    code: str
    line: int

    @property
    def name(self) -> str:
        """The block's line and its first line that is not an import."""
        lines = [line.strip() for line in self.code.splitlines()]
        telling = next(
            (line for line in lines if line and not line.startswith(("import ", "from "))),
            lines[0],
        )
        return f"README.md:{self.line} {telling[:50]}"


def readme_blocks() -> list[Block]:
    """The fenced blocks of the README, in order."""
    text = README.read_text(encoding="utf-8")
    return [
        Block(match["language"], match["code"], text.count("\n", 0, match.start()) + 1)
        for match in re.finditer(r"^```(?P<language>\w*)\n(?P<code>.*?)^```$", text, re.S | re.M)
    ]


BLOCKS = readme_blocks()
PYTHON_BLOCKS = [b for b in BLOCKS if b.language == "python"]
BASH_BLOCKS = [b for b in BLOCKS if b.language == "bash"]
JSON_BLOCKS = [b for b in BLOCKS if b.language == "json"]
#: What a block must print: a block that silently does nothing fails.
PRINTS = {
    "{hit.entry.key} = {hit.entry.value}": "user.city = Lisbon",
    "engramdb.open_sync(": "I moved to Lisbon",
    "memorize_many(": "golden retriever",
    "mem.assemble(": "vegetarian",
    "mem.graph.add_entity(": "['Acme']",
    "MemoryClient(": "Error 402",
}


def test_every_block_is_python_bash_json_or_the_layout_tree() -> None:
    assert PYTHON_BLOCKS
    assert BASH_BLOCKS
    assert JSON_BLOCKS
    plain = [b for b in BLOCKS if b.language not in ("python", "bash", "json")]
    # The one block without a language is the tree of the source folders: text, not code.
    assert [(b.language, b.code.splitlines()[0]) for b in plain] == [("", "src/engramdb/")]


def environment(folder: Path) -> dict[str, str]:
    """The environment of a block: this Python's ``engram`` first on the PATH, a user data
    and cache folder of their own (the default database lands in ``folder``), no network."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ENGRAM_")}
    scripts = Path(sys.executable).parent
    assert (scripts / "engram").exists(), "the engram command is not installed beside Python"
    env["PATH"] = f"{scripts}{os.pathsep}{env.get('PATH', '')}"
    env["XDG_DATA_HOME"] = str(folder / "data")
    env["XDG_CACHE_HOME"] = str(folder / "cache")
    env["HF_HUB_OFFLINE"] = "1"
    return env


def run_python(code: str, folder: Path, env: dict[str, str]) -> str:
    script = folder / "block.py"
    script.write_text(code, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.parametrize("block", PYTHON_BLOCKS, ids=lambda b: b.name)
def test_python_block_runs_as_a_script(block: Block, tmp_path: Path) -> None:
    env = environment(tmp_path)
    if "ENGRAM_URL" in block.code:
        out = run_against_a_production_server(block, tmp_path, env)
    else:
        out = run_python(block.code, tmp_path, env)
    for marker, printed in PRINTS.items():
        if marker in block.code:
            assert printed in out, out


def run_against_a_production_server(block: Block, folder: Path, env: dict[str, str]) -> str:
    """The client's block, as the README has it follow the production-mode commands: a tenant
    and an API key made with ``engram admin``, then ``engram serve --auth production``."""
    db = folder / "served.db"
    engram = ["engram", "--db", str(db)]
    subprocess.run([*engram, "admin", "tenant", "create", "acme"], env=env, check=True)
    made = subprocess.run(
        [*engram, "--json", "admin", "key", "create", "acme", "--user", "alice"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    port = free_port()
    server_env = {**env, "ENGRAM_JWT_SECRET": os.urandom(32).hex()}
    command = [*engram, "serve", "--port", str(port), "--auth", "production"]
    url = f"http://127.0.0.1:{port}"
    with serving(command, f"{url}/healthz", log=folder / "serve.log", env=server_env):
        client_env = {
            **env,
            "ENGRAM_URL": url,
            "ENGRAM_API_KEY": json.loads(made.stdout)["api_key"],
        }
        return run_python(block.code, folder, client_env)


# -- bash -----------------------------------------------------------------------------------


def with_free_ports(code: str) -> str:
    """``code`` with each port it names (``--port N``, ``127.0.0.1:N``) swapped for a free one."""
    ports = set(re.findall(r"--port (\d+)", code)) | set(re.findall(r"127\.0\.0\.1:(\d+)", code))
    for port in ports:
        code = re.sub(rf"\b{port}\b", str(free_port()), code)
    return code


def check_installed(command: str) -> None:
    """``pip install -e '.[extra]'`` is done: this checkout is what is installed, with the
    requirements of the extra."""
    spec = shlex.split(command)[-1]
    assert spec.startswith("."), command
    assert Path(engramdb.__file__).resolve().is_relative_to(ROOT / "src")
    extra = spec[2:-1] if spec.startswith(".[") else None
    for text in importlib.metadata.requires("engramdb") or []:
        requirement = Requirement(text)
        marker = requirement.marker
        if marker is None or (extra is not None and marker.evaluate({"extra": extra})):
            if requirement.name == "engramdb":
                continue  # engramdb[postgres] inside dev: its requirements are listed too
            installed = importlib.metadata.version(requirement.name)
            assert requirement.specifier.contains(installed, prereleases=True), text


def is_the_suite_or_its_checks(command: str) -> bool:
    return command.startswith(
        ("bash scripts/test.sh", "bash .ci/run", "python -m pytest", "ruff ", "mypy")
    )


def check_ci_runs(command: str) -> None:
    """``command`` is what ``.ci/run`` runs (``.ci/run`` itself needs no such check)."""
    if command == "bash .ci/run":
        return
    ci = CI_RUN.read_text(encoding="utf-8").splitlines()
    parts = [part.strip() for part in command.split("&&")]
    for part in parts:
        assert part in ci, f"{part!r} is not a line of .ci/run"


def server_port(command: str) -> str | None:
    """The port of a line that serves until it is stopped (``engram … serve|inspect``)."""
    if not re.search(r"\bengram\b.*\b(serve|inspect)\b", command):
        return None
    found = re.search(r"--port (\d+)", command)
    assert found is not None, f"a server line names its port: {command}"
    return found[1]


def commands(code: str) -> list[str]:
    """The commands of a block, one a line, without comments."""
    found = []
    for line in code.splitlines():
        command = re.sub(r"\s+#.*$", "", line).strip()
        if command and not command.startswith("#"):
            found.append(command)
    return found


def run_bash(command: str, folder: Path, env: dict[str, str]) -> str:
    """Run ``command`` with bash (``-euo pipefail``); what it left running in the background
    is stopped after it. Returns its standard output."""
    out, err = folder / "bash.out", folder / "bash.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        shell = subprocess.Popen(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=folder,
            env=env,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            code = shell.wait(timeout=TIMEOUT_S)
        finally:
            stop_group(shell)
    said = out.read_text(errors="replace")
    assert code == 0, f"{command}\n{said}\n{err.read_text(errors='replace')}"
    return said


def tiny_longmemeval(folder: Path) -> Path:
    """A LongMemEval file of a few turns, in the format of the real one."""
    path = folder / "longmemeval_tiny.json.xz"
    path.write_bytes(lzma.compress(json.dumps(longmemeval_records()).encode()))
    return path


@pytest.mark.parametrize("block", BASH_BLOCKS, ids=lambda b: b.name)
def test_bash_block_runs(block: Block, tmp_path: Path) -> None:
    env = environment(tmp_path)
    code = with_free_ports(block.code)
    for name in CHECKOUT_FILES:
        if name in code:
            shutil.copyfile(ROOT / name, tmp_path / name)
    if re.search(r"&\s*(server=\$!)?\s*$", code, re.M):
        # A server in the background and what uses it: one script, as a shell runs it.
        run_bash(code, tmp_path, env)
        return
    for command in commands(code):
        if is_the_suite_or_its_checks(command):
            check_ci_runs(command)
            continue
        installed = re.match(r"pip install (-e \S+)( && )?", command)
        if installed:
            check_installed(installed[1])
            command = command[installed.end() :]
            if not command:
                continue
        if "engram eval" in command:
            found = re.search(r"engram eval (\S+)", command)
            assert found is not None
            command = command.replace(found[1], str(tiny_longmemeval(tmp_path)))
        port = server_port(command)
        if port is None:
            out = run_bash(command, tmp_path, env)
            if "engram recall" in command:
                assert "user.city" in out, out
            continue
        # A server: in the background until it answers, then stopped.
        ready = f"http://127.0.0.1:{port}/{'healthz' if ' serve' in command else ''}"
        log = tmp_path / "server.log"
        with serving(["bash", "-c", command], ready, log=log, env=env, cwd=tmp_path):
            pass
        assert f"on http://127.0.0.1:{port}/" in log.read_text()


def test_the_readme_test_command_is_what_ci_runs() -> None:
    named = {c for b in BASH_BLOCKS for c in commands(b.code) if c.startswith("bash scripts/")}
    assert named == {"bash scripts/test.sh"}
    ci = CI_RUN.read_text(encoding="utf-8").splitlines()
    assert "bash scripts/test.sh" in ci
    assert ci.index("bash scripts/test.sh") < ci.index("mypy")
    script = (ROOT / "scripts" / "test.sh").read_text(encoding="utf-8")
    assert "pip install -q -e '.[dev]'" in script
    assert script.rstrip().endswith('exec "$PYTHON" -m pytest "$@"')


@pytest.mark.parametrize("block", JSON_BLOCKS, ids=lambda b: b.name)
def test_json_block_is_an_mcp_configuration_that_starts_a_working_server(
    block: Block, tmp_path: Path
) -> None:
    """A desktop agent's entry, started as the agent starts it (its command and arguments,
    over stdio), lists the tools and keeps state."""
    import anyio
    from mcp import Client, StdioServerParameters

    (entry,) = json.loads(block.code)["mcpServers"].values()
    params = StdioServerParameters(
        command=entry["command"], args=entry["args"], env=environment(tmp_path), cwd=tmp_path
    )

    async def talk() -> None:
        async with Client(params, read_timeout_seconds=TIMEOUT_S) as client:
            assert "assemble" in {t.name for t in (await client.list_tools()).tools}
            done = await client.call_tool("set_state", {"key": "step", "value": 3})
            assert not done.is_error
            read = await client.call_tool("get_state", {"key": "step"})
            assert read.structured_content == {"key": "step", "value": 3, "plan": None}

    anyio.run(talk)
