"""``HeldPartitions``: which partitions of a database that searches vectors itself
(PostgreSQL) this process searches from vectors it holds, and how each is kept current.

A partition small enough to be searched exactly costs the database a scan of every vector it
holds, each row read and compared, on every search; held here, the same exact search is one
matrix product. A held partition follows its tenant's event log: before each search the events
since the last position seen are read (a few index entries), and the records their keys name
in the partition are read again, vectors and all. Every write of a record appends its event in
the same transaction, and events become visible in position order, so no write is passed over,
whoever made it; this process's own writes reach the index at once (``Indexer.committed``)
and are read again harmlessly. A partition whose log holds a change it cannot follow key by key
(too many at once, an event without a key) is dropped and loaded afresh on its next search.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from engramdb.core.scope import Scope
from engramdb.index.vector_index import VectorIndex
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.search_backend import FollowsTenantLog

Slot = tuple[str, Scope]

#: Events read per catch-up; a partition with more since its last search loads afresh.
CHANGES_READ = 256
#: A held partition loads afresh after this long whatever its log says: an administrator's
#: rebuild rewrites records without appending events.
RELOAD_AFTER_S = 300.0
#: A partition whose log said more than ``CHANGES_READ`` changes at once is searched by the
#: database for this long: written that fast, it would be loaded again and again.
BUSY_FOR_S = 10.0
#: More searches than this at once in one process are answered by the database: each held
#: search reads the log before it searches, and that read waits for the tenant's writes this
#: process has queued, while the database's own searches run side by side.
HELD_SEARCHES_AT_ONCE = 4
#: Records of a held partition kept for ranking, the most recently read: the hits a search
#: ranks highest are then often known without a round trip.
RECORDS_KEPT = 1000


@dataclass
class _Held:
    position: int
    records: int
    loaded_at: float
    read: OrderedDict[int, Record] = field(default_factory=OrderedDict)
    #: Counts the catch-ups that found changed records: records read before one may be older
    #: than what it dropped, and are not kept.
    generation: int = 0


class HeldPartitions:
    """The held partitions' log positions, ages and sizes, within a budget of records (the
    partitions searched least recently go first)."""

    def __init__(self, search: FollowsTenantLog, budget: int) -> None:
        self._search = search
        self._budget = budget
        self._held: OrderedDict[Slot, _Held] = OrderedDict()
        #: When each partition last changed too fast to follow.
        self._busy: dict[Slot, float] = {}

    def wanted(self, slot: Slot, size: int) -> bool:
        """Whether a partition of ``size`` records is searched from held vectors."""
        busy = self._busy.get(slot)
        if busy is not None and time.monotonic() - busy < BUSY_FOR_S:
            return False
        return size <= min(self._search.held_vectors_up_to, self._budget)

    async def position(self, partition: Scope) -> int:
        """The log position a partition's vectors read from now on are current at."""
        return await self._search.log_position(partition)

    def loaded(self, slot: Slot, position: int, records: int) -> list[Slot]:
        """Note a partition loaded at ``position``; the partitions to drop to keep within
        the budget (the least recently searched)."""
        self._held[slot] = _Held(position, records, time.monotonic())
        held = sum(h.records for h in self._held.values())
        dropped: list[Slot] = []
        for old in list(self._held):
            if held <= self._budget or old == slot:
                break
            held -= self._held[old].records
            dropped.append(old)
        return dropped

    def records(self, slot: Slot, ids: Sequence[int], now: datetime) -> dict[int, Record]:
        """Of ``ids``, the records kept of a held partition that are live at ``now`` (in
        step with its log as its index is: a change of one drops it)."""
        held = self._held.get(slot)
        if held is None:
            return {}
        kept = (held.read.get(i) for i in ids)
        return {r.id: r for r in kept if r is not None and r.id is not None and _live(r, now)}

    def generation(self, slot: Slot) -> int | None:
        """A held partition's catch-ups that found changes so far (``None``: not held); a
        search notes it before it reads any record, for ``keep``."""
        held = self._held.get(slot)
        return None if held is None else held.generation

    def keep(self, slot: Slot, records: Iterable[Record], generation: int | None) -> None:
        """Keep live records of a held partition read since its ``generation`` (as
        ``generation`` gave it when the reading began): unless a catch-up found changes
        meanwhile, which the records may predate."""
        held = self._held.get(slot)
        if held is None or held.generation != generation:
            return
        for record in records:
            if record.id is not None:
                held.read[record.id] = record
                held.read.move_to_end(record.id)
        while len(held.read) > RECORDS_KEPT:
            held.read.popitem(last=False)

    def dropped(self, slot: Slot) -> None:
        """Forget a partition dropped from memory."""
        self._held.pop(slot, None)

    async def catch_up(self, slot: Slot, index: VectorIndex, model: str) -> bool:
        """Bring ``index`` in step with what the log says changed in its partition since it
        was last current; ``False`` when it must be loaded afresh instead. Catch-ups of one
        partition may run side by side: one whose log read reached no further than another's
        already applied leaves the index as that one left it. (Events become visible in
        position order, so a read that reached further began after the other's log read.)"""
        held = self._held.get(slot)
        if held is None or time.monotonic() - held.loaded_at > RELOAD_AFTER_S:
            return False
        self._held.move_to_end(slot)
        namespace, partition = slot
        changes = await self._search.log_changes(partition, held.position, CHANGES_READ)
        if not changes:
            return True
        if len(changes) >= CHANGES_READ:
            self._busy[slot] = time.monotonic()
            if len(self._busy) > 10_000:
                self._busy.clear()  # a bound, not a record: forgetting costs a reload
            return False
        keys: set[str] = set()
        for _, provider, key in changes:
            if provider != namespace:
                continue  # records of another namespace: not this index's
            if not key:
                return False  # a change of the whole namespace
            keys.add(key)
        rows = []
        if keys:
            query = RecordQuery(namespace, partition, keys=tuple(sorted(keys)))
            rows = await self._search.keyed_vectors(query, model)
            # The records kept of the changed keys go, and no record read before this goes
            # in (``keep``), whatever happens to the vectors read.
            held.generation += 1
            for record_id, record in list(held.read.items()):
                if record.key in keys:
                    del held.read[record_id]
        newest = changes[-1][0]
        if newest <= held.position or self._held.get(slot) is not held:
            return True  # followed meanwhile, up to these changes or beyond
        # Rows read before a write this process made meanwhile (which reached the index at
        # once) may put an older vector back: that write is after ``newest`` in the log, and
        # the next search reads it again before it searches.
        index.put(rows)
        held.position = newest
        held.records = len(index)
        return True


def _live(record: Record, now: datetime) -> bool:
    return record.hidden_at is None and (record.expires_at is None or record.expires_at > now)
