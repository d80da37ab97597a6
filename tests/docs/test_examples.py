"""Every script in examples/ runs as a user would run it, and prints what it promises."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
#: What each script must print (every script of the folder is listed: a new one needs a line).
PRINTS = {
    "agent_loop.py": [
        "recalled turn 0: Hi! I just moved to Lisbon",
        "## Known facts",
        "Alice is allergic to peanuts",
    ],
    "rest_service.py": [
        "service: ok",
        "second upsert: updated",
        "knowledge: Error 402",
        "episode: My card was declined with error 402.",
        "plan state: acc_123",
        "graph: Ada works_for Acme",
    ],
    "mcp_stdio.py": [
        "tools: memorize, remember, forget",
        "remembered: ['Alice is allergic to peanuts']",
        "a bad call answers: Error executing tool forget: invalid_forget_instruction",
        "recent episode: Alice cooked a Thai curry",
        "the prompt recalls: True",
    ],
    "langgraph_agent.py": [
        "stored: I just moved to Lisbon",
        "user (thread-2): Which city do I live in now?",
        "recalled: I just moved to Lisbon",
        "agent: You live in Lisbon.",
        "turns counted: 2",
        "namespaces: [('memories', 'alice'), ('stats', 'alice')]",
    ],
    "graph.py": [
        "from the sentence: [('lives_in', {})]",
        "Alice's neighbours: ['Acme', 'Bob', 'Lisbon']",
        "Bob to Alice: ['Bob', 'Alice'] by ['knows']",
        "Alice works for, now: ['Globex']",
        "Alice works for, in 2025: ['Acme']",
    ],
}


def test_every_example_is_run_here() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.py")) == sorted(PRINTS)


@pytest.mark.parametrize("name", sorted(PRINTS))
def test_example_runs(name: str, tmp_path: Path) -> None:
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    for line in PRINTS[name]:
        assert line in done.stdout, done.stdout
    assert list(tmp_path.iterdir()) == []  # each works in a temporary folder of its own
