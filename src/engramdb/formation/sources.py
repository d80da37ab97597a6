"""Conversation files for ``engram ingest``: messages as JSON or JSON lines, or a haystack of
the LongMemEval and LoCoMo benchmark files (``evaluation.datasets`` reads those).

* JSON: a list of ``{"role", "content"}`` messages (optional ``timestamp``, ``session_id``,
  ``id``, ``speaker``, ``metadata``), or an object holding one under ``"messages"``.
* JSON lines: one message per line (blank lines skipped).
* LongMemEval / LoCoMo (``.json`` or ``.json.xz``): the turns of one haystack (``haystack``,
  required when the file holds several), each timed at its session's date plus its place in
  the session in milliseconds, with the benchmark's turn id (``<session>:<n>``). LongMemEval
  indexes the user's turns only; in a LoCoMo conversation the first speaker is the user and the
  other speaker's turns are stored with role ``other``.
"""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

from engramdb.core.errors import UsageError, ValidationError
from engramdb.evaluation.datasets import Haystack, load_dataset
from engramdb.formation.ingest import IngestMessage

_XZ_MAGIC = b"\xfd7zXZ\x00"


def read_messages(path: str | Path, *, haystack: str | None = None) -> list[IngestMessage]:
    """The messages of the conversation file at ``path`` (see the module docstring).

    Raises:
        UsageError: there is no such file, or a benchmark file holds several haystacks and
            none (or an unknown one) was chosen.
        ValidationError: the file is neither form, or a message is malformed (its line or
            place named).
    """
    source = Path(path)
    try:
        raw = source.read_bytes()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from exc
    if raw.startswith(_XZ_MAGIC):
        return _benchmark(source, haystack)
    text = raw.decode("utf-8", errors="replace")
    try:
        data: Any = json.loads(text)
    except json.JSONDecodeError:
        return _json_lines(text)
    if isinstance(data, list) and data and isinstance(data[0], dict) and "role" not in data[0]:
        return _benchmark(source, haystack)
    if isinstance(data, dict) and isinstance(data.get("messages"), list):
        data = data["messages"]
    if isinstance(data, dict):  # one message as one JSON object: a one-line JSON lines file
        data = [data]
    if not isinstance(data, list):
        raise ValidationError(f"{source}: expected a list of messages")
    return [_message(item, f"message {n}") for n, item in enumerate(data)]


def _json_lines(text: str) -> list[IngestMessage]:
    messages = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number}: not JSON ({exc.msg})", line=number) from exc
        messages.append(_message(item, f"line {number}"))
    return messages


def _message(item: Any, where: str) -> IngestMessage:
    if not isinstance(item, dict):
        raise ValidationError(f"{where}: a message is an object with role and content")
    try:
        return IngestMessage.model_validate(item)
    except ValidationError as exc:
        raise ValidationError(f"{where}: {exc.message}") from exc


def _benchmark(source: Path, chosen: str | None) -> list[IngestMessage]:
    dataset = load_dataset(source)
    haystacks = {h.haystack_id: h for h in dataset.haystacks}
    if chosen is None:
        if len(haystacks) != 1:
            first = next(iter(haystacks), "?")
            raise UsageError(
                f"{source} holds {len(haystacks)} {dataset.format} haystacks: choose one with "
                f"--haystack (e.g. --haystack {first})"
            )
        chosen = next(iter(haystacks))
    if chosen not in haystacks:
        raise UsageError(f"{source} holds no haystack {chosen!r}", haystack=chosen)
    return haystack_messages(haystacks[chosen])


def haystack_messages(haystack: Haystack) -> list[IngestMessage]:
    """The turns of a benchmark haystack as messages (see the module docstring)."""
    first = next((t.speaker for s in haystack.sessions for t in s.turns), "user")
    return [
        IngestMessage(
            role="user" if turn.speaker in (first, "user") else "other",
            speaker=turn.speaker,
            content=turn.text,
            timestamp=session.occurred_at + timedelta(milliseconds=turn.index),
            session_id=session.session_id,
            id=turn.turn_id,
        )
        for session in haystack.sessions
        for turn in session.turns
    ]
