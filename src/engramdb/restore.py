"""Restoring an export (``engram export``) into an empty database.

The log is the truth, so a restore appends the export's events as they were (ids, times,
scopes, payloads, in order) and rebuilds every projection from them; the records of the
export are only counted, to check the result. Vectors are not exported: the engine's model
computes them again. Provider registrations the new database already holds (the built-in
providers register themselves when a database is created) are not appended twice.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from engramdb.core.errors import UsageError, ValidationError
from engramdb.core.events import EventEnvelope
from engramdb.storage.backend import EventQuery, EventStore

#: Events appended per transaction.
BATCH = 1000
REGISTERED = "memory.provider.registered"


@dataclass(frozen=True)
class ExportRows:
    """What an export holds: its events in log order, and how many records it listed."""

    events: list[EventEnvelope]
    records: int


def read_export(lines: Iterable[str]) -> ExportRows:
    """The events and the record count of an export's JSON lines.

    Raises:
        ValidationError: a line is not JSON, not a record or event row, or not a valid
            event (the message names the line).
    """
    events: list[EventEnvelope] = []
    records = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"line {number} is not JSON: {exc.msg}", line=number) from exc
        kind = row.get("kind") if isinstance(row, dict) else None
        if kind == "record":
            records += 1
        elif kind == "event":
            fields = {
                name: value for name, value in row.items() if name not in ("kind", "position")
            }
            try:
                events.append(EventEnvelope.model_validate(fields))
            except ValidationError as exc:
                raise ValidationError(
                    f"line {number} is not a valid event: {exc.message}", line=number
                ) from exc
        else:
            raise ValidationError(
                f"line {number} is neither a record nor an event of an export", line=number
            )
    return ExportRows(events, records)


def _batches(events: list[EventEnvelope]) -> Iterator[list[EventEnvelope]]:
    for start in range(0, len(events), BATCH):
        yield events[start : start + BATCH]


async def append_export(
    log: EventStore, rows: ExportRows, progress: Callable[[int], None] | None = None
) -> int:
    """Append the export's events to the log of an empty database, a batch per transaction;
    returns how many.

    Raises:
        UsageError: the database already holds events other than provider registrations.
    """
    held = await log.read(EventQuery(event_types=(REGISTERED,)))
    if await log.count() != len(held):
        raise UsageError("a restore needs an empty database: this one already holds memories")
    registered = {json.dumps(e.payload, sort_keys=True) for e in held}
    fresh = [
        event
        for event in rows.events
        if event.event_type != REGISTERED
        or json.dumps(event.payload, sort_keys=True) not in registered
    ]
    appended = 0
    for batch in _batches(fresh):
        await log.append(batch)
        appended += len(batch)
        if progress is not None:
            progress(len(batch))
    return appended
