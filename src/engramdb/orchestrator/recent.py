"""``recent_items``: the latest items of a memory type, newest first, without reading the
whole partition.

Records are ordered by key, not by time, so the newest writes are found in the event log
(read newest first, which stops after a page) and then read back as records, which drops the
deleted ones. Only when a page of events does not yield enough live items is the partition
scanned and sorted.
"""

from __future__ import annotations

from engramdb.core.events import MemoryWritten
from engramdb.core.intent import MemoryItem
from engramdb.core.scope import ScopeFilter
from engramdb.orchestrator.plugin import StoredMemoryType, moment, record_item
from engramdb.storage.backend import EventQuery


async def recent_items(memory: StoredMemoryType, limit: int) -> list[MemoryItem]:
    """The ``limit`` latest live items of ``memory`` (by when they happened), newest first."""
    provider = memory.provider
    page = max(4 * limit, 64)
    events = await provider.backend.events.read(
        EventQuery(
            event_types=(MemoryWritten.event_type,),
            provider_id=provider.provider_id,
            scope=ScopeFilter(provider.partition, provider.spec.levels),
            newest_first=True,
            limit=page,
        )
    )
    keys = tuple(dict.fromkeys(str(e.payload.get("key", "")) for e in events))
    records = await memory.records(keys=keys) if keys else []
    if len(records) < limit and len(events) == page:
        records = await memory.records()
    newest = sorted(records, key=lambda r: (moment(r), r.created_at, r.key), reverse=True)
    return [record_item(r) for r in newest[:limit]]
