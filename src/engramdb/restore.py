"""Restoring an export (``engram export``) into an empty database.

The log is the truth, so a restore appends the export's events as they were (ids, times,
scopes, payloads, in order) and rebuilds every projection from them; the records of the
export are only counted, to check the result. Vectors are not exported: the engine's model
computes them again. Provider registrations the new database already holds (the built-in
providers register themselves when a database is created) are not appended twice.

The file is read twice, a line at a time: once to check every line before anything is
written, once to append, so an export of any size restores in bounded memory. Events go in
by batches, each its own transaction: should the database fail part-way, the batches before
stay, and the restore is started again on an empty database.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

from engramdb.core.errors import UsageError, ValidationError
from engramdb.core.events import EventEnvelope
from engramdb.storage.backend import EventQuery, EventStore

#: Events appended per transaction.
BATCH = 1000
REGISTERED = "memory.provider.registered"


def export_rows(source: Path) -> Iterator[tuple[str, EventEnvelope | None]]:
    """Each row of the export at ``source``: ``("record", None)`` or ``("event", event)``.

    Raises:
        UsageError: there is no such file.
        ValidationError: a line is not JSON, not a record or event row, or not a valid
            event (the message names the line).
    """
    if not source.is_file():
        raise UsageError(f"no export at {source}")
    with source.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if line.strip():
                yield _row(number, line)


def _row(number: int, line: str) -> tuple[str, EventEnvelope | None]:
    try:
        row = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ValidationError(f"line {number} is not JSON: {exc.msg}", line=number) from exc
    kind = row.get("kind") if isinstance(row, dict) else None
    if kind == "record":
        return "record", None
    if kind != "event":
        raise ValidationError(
            f"line {number} is neither a record nor an event of an export", line=number
        )
    fields = {k: v for k, v in row.items() if k not in ("kind", "position")}
    try:
        return "event", EventEnvelope.model_validate(fields)
    except ValidationError as exc:
        raise ValidationError(
            f"line {number} is not a valid event: {exc.message}", line=number
        ) from exc


def count_rows(source: Path) -> tuple[int, int]:
    """How many records and how many events the export lists, every line checked on the way
    (see :func:`export_rows`)."""
    records = events = 0
    for kind, _ in export_rows(source):
        if kind == "record":
            records += 1
        else:
            events += 1
    return records, events


async def append_export(
    log: EventStore, source: Path, progress: Callable[[int], None] | None = None
) -> int:
    """Append the events of the export at ``source`` to the log of an empty database, a
    batch per transaction; returns how many.

    Raises:
        UsageError: the database already holds events other than provider registrations.
    """
    held = await log.read(EventQuery(event_types=(REGISTERED,)))
    if await log.count() != len(held):
        raise UsageError("a restore needs an empty database: this one already holds memories")
    registered = {json.dumps(e.payload, sort_keys=True) for e in held}
    appended = 0
    batch: list[EventEnvelope] = []
    for _, event in export_rows(source):
        if event is None:
            continue
        if event.event_type == REGISTERED and json.dumps(event.payload, sort_keys=True) in (
            registered
        ):
            continue
        batch.append(event)
        if len(batch) == BATCH:
            appended += await _append(log, batch, progress)
            batch = []
    if batch:
        appended += await _append(log, batch, progress)
    return appended


async def _append(
    log: EventStore, batch: list[EventEnvelope], progress: Callable[[int], None] | None
) -> int:
    await log.append(batch)
    if progress is not None:
        progress(len(batch))
    return len(batch)
