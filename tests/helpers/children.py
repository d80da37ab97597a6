"""Writer processes of the crash tests: started from this checkout, watched through the file
where each lists the turns it acknowledged (a number a line), then killed."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def acknowledged(acks: Path) -> list[int]:
    """The turns a child listed in ``acks`` as acknowledged, in order (none before its first)."""
    return [int(line) for line in acks.read_text().splitlines() if line] if acks.exists() else []


async def start_child(module: str, args: Sequence[str], log: Path) -> asyncio.subprocess.Process:
    """``python -m module *args`` with this checkout on its path, its stderr added to ``log``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    with log.open("ab") as sink:
        return await asyncio.create_subprocess_exec(
            sys.executable, "-m", module, *args, cwd=ROOT, env=env, stderr=sink
        )


def said(log: Path) -> str:
    """What the children wrote to ``log``."""
    return log.read_text()


async def until_acknowledged(
    wanted: Mapping[Path, int],
    children: Sequence[asyncio.subprocess.Process],
    log: Path,
    *,
    seconds: float,
    failure: str,
) -> None:
    """Poll until each acknowledgement file of ``wanted`` lists at least its number of turns;
    fail with the children's log if one of them exits first, and with ``failure`` after
    ``seconds``."""
    deadline = time.monotonic() + seconds
    while any(len(acknowledged(acks)) < least for acks, least in wanted.items()):
        for child in children:
            assert child.returncode is None, said(log)
        assert time.monotonic() < deadline, failure
        await asyncio.sleep(0.05)
