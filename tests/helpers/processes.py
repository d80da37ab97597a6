"""A server the tests start as a real process: run until its URL answers, stopped after."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import httpx


@contextmanager
def serving(
    command: list[str],
    ready_url: str,
    *,
    log: Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    timeout_s: float = 120,
) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``command`` (its output to ``log``), wait until ``ready_url`` answers 200, and
    stop it when the block ends, with every process it started.

    Raises:
        RuntimeError: the process exited, or did not answer within ``timeout_s``.
    """
    with log.open("wb") as sink:
        process = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: stopped whole (a shell's too)
        )
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if process.poll() is not None:
                    raise RuntimeError(f"{command} exited: {log.read_text(errors='replace')}")
                try:
                    if httpx.get(ready_url, timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{command} did not answer within {timeout_s} s")
                time.sleep(0.2)
            yield process
        finally:
            stop_group(process)


def stop_group(process: subprocess.Popen[bytes]) -> None:
    """Stop ``process`` and the rest of its process group (it must lead one): SIGTERM, then
    SIGKILL after 30 s."""
    for sent in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sent)
        except ProcessLookupError:
            break  # nothing of the group is left
        try:
            process.wait(timeout=30)
            break
        except subprocess.TimeoutExpired:
            continue
