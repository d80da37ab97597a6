"""How the CLI shows things: rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.filesize import decimal
from rich.table import Table

if TYPE_CHECKING:
    from engramdb.core.events import EventEnvelope
    from engramdb.core.types import MemoryEntry, RecallResult

out = Console(soft_wrap=True)
err = Console(stderr=True, soft_wrap=True)
NOTHING_FOUND = "nothing found"


def emit_json(data: Any) -> None:
    """Print ``data`` as JSON on stdout (plain, for pipes)."""
    print(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def table(found: Table) -> None:
    """Print ``found``, or say that nothing was found when it has no row."""
    if found.row_count:
        out.print(found)
    else:
        out.print(NOTHING_FOUND)


def size(size_bytes: int | None) -> str:
    """A size for people (``1.2 MB``), with the exact count of bytes."""
    if size_bytes is None:
        return "unknown"
    return f"{decimal(size_bytes)} ({size_bytes:,} bytes)"


def short(value: Any, width: int = 80) -> str:
    """A one-line preview of a stored value."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 1] + "…"


def entry_table(entries: Sequence[MemoryEntry], title: str) -> Table:
    """Entries as a table."""
    table = Table(title=title)
    for column in ("key", "value", "type", "updated"):
        table.add_column(column)
    for e in entries:
        table.add_row(
            e.key,
            short(e.value),
            e.content_type,
            (e.updated_at or e.created_at).isoformat(timespec="seconds"),
        )
    return table


def recall_table(results: Sequence[RecallResult], query: str) -> Table:
    """Recall hits as a ranked table."""
    table = Table(title=f"recall: {query}")
    for column in ("#", "score", "tier", "key", "value"):
        table.add_column(column)
    for rank, r in enumerate(results, 1):
        table.add_row(str(rank), f"{r.score:.3f}", r.tier.value, r.entry.key, short(r.entry.value))
    return table


def event_table(events: Sequence[EventEnvelope]) -> Table:
    """Log entries as a table."""
    table = Table(title="events")
    for column in ("pos", "time", "type", "scope", "subject"):
        table.add_column(column)
    for e in events:
        subject = e.payload.get("key") or e.payload.get("provider_id") or ""
        table.add_row(
            str(e.position),
            e.occurred_at.isoformat(timespec="seconds"),
            e.event_type,
            e.scope.label(),
            str(subject),
        )
    return table
