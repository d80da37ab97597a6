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

from engramdb.core.errors import UsageError, ValidationError, ValueTooLargeError
from engramdb.core.events import EventEnvelope
from engramdb.core.validation import (
    DEFAULT_MAX_VALUE_BYTES,
    MAX_JSON_DEPTH,
    json_text,
    parse_json,
)
from engramdb.storage.backend import EventQuery, EventStore

#: Events appended per transaction.
BATCH = 1000
REGISTERED = "memory.provider.registered"
WRITTEN = "memory.written"
#: How far below an export row its payload's value starts (row, payload, value).
_ROW_LEVELS = 3


def export_rows(
    source: Path, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES
) -> Iterator[tuple[str, EventEnvelope | None]]:
    """Each row of the export at ``source``: ``("record", None)`` or ``("event", event)``.

    A row passes the checks a write passes: UTF-8 text, no NUL character or lone surrogate,
    nesting within bounds, and no written value over ``max_value_bytes`` as JSON.

    Raises:
        UsageError: there is no such file.
        ValidationError: a line is not UTF-8 or JSON, not a record or event row, not a valid
            event, or holds what no write may store (the message names the line).
    """
    if not source.is_file():
        raise UsageError(f"no export at {source}")
    with source.open("rb") as lines:
        for number, raw in enumerate(lines, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ValidationError(
                    f"line {number} is not UTF-8 text (byte {exc.start})", line=number
                ) from None
            if line.strip():
                yield _row(number, line, max_value_bytes)


def _row(number: int, line: str, max_value_bytes: int) -> tuple[str, EventEnvelope | None]:
    try:
        row = parse_json(line, what=f"line {number}")
        # The row wraps the payload that wraps the value: a few levels more than a value's.
        json_text(row, what=f"line {number}", max_depth=MAX_JSON_DEPTH + _ROW_LEVELS)
    except ValidationError as exc:
        raise ValidationError(exc.message, line=number) from None
    kind = row.get("kind") if isinstance(row, dict) else None
    if kind == "record":
        return "record", None
    if kind != "event":
        raise ValidationError(
            f"line {number} is neither a record nor an event of an export", line=number
        )
    fields = {k: v for k, v in row.items() if k not in ("kind", "position")}
    try:
        event = EventEnvelope.model_validate(fields)
    except ValidationError as exc:
        raise ValidationError(
            f"line {number} is not a valid event: {exc.message}", line=number
        ) from exc
    if event.event_type == WRITTEN:
        size = json_text(event.payload.get("value"))[1]
        if size > max_value_bytes:
            raise ValueTooLargeError(
                f"line {number} writes a value of {size} bytes as JSON; the limit is "
                f"{max_value_bytes}",
                line=number,
                size=size,
                limit=max_value_bytes,
            )
    return "event", event


def count_rows(source: Path, max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> tuple[int, int]:
    """How many records and how many events the export lists, every line checked on the way
    (see :func:`export_rows`)."""
    records = events = 0
    for kind, _ in export_rows(source, max_value_bytes):
        if kind == "record":
            records += 1
        else:
            events += 1
    return records, events


async def append_export(
    log: EventStore,
    source: Path,
    progress: Callable[[int], None] | None = None,
    max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
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
    for _, event in export_rows(source, max_value_bytes):
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
