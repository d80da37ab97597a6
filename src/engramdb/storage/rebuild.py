"""A rebuild that holds writers off only for short transactions: ``staged_rebuild``.

Recomputing a namespace from the log is mostly reading and folding events, and a store of a
hundred thousand records takes minutes of it; holding the write lock for all of that makes
every writer wait out the whole rebuild (or give up). So a rebuild goes in stages:

1. **Snapshot** (no write lock): in one read snapshot, fold the events up to the newest
   position and read the records as they are.
2. **Plan**: the slots (partition and key) whose stored row differs from what the fold left,
   with the row each change was planned against. A store in step with its log plans nothing.
3. **Apply**, a batch per short transaction that holds writers off: first the keys named by
   events appended since the last look are marked touched; a planned change is stored only if
   its key is untouched and its slot still holds the row it was planned against, otherwise its
   key is marked touched too.
4. **Settle**, one last short transaction: the touched keys' events are folded again, whole,
   and what they leave is stored over what their slots hold.

Every write made during the rebuild either came before the snapshot (and the fold saw it) or
appended an event naming its key (and the settle step folds that key from the whole log), so
the result is what folding the whole log gives, and no write made meanwhile is lost. This
relies on the fold being slot-local: what a slot holds depends only on the events whose
payload names its key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from engramdb.storage.records import Record
from engramdb.storage.rows import RECORD_COLUMNS, record_row

#: A record's place: its five scope columns and its key (within one namespace).
Slot = tuple[str, ...]
#: How many planned changes one applying transaction stores.
APPLY_BATCH = 500
#: The columns a slot is named by (``RECORD_COLUMNS`` order): scope columns and key.
SLOT_COLUMNS = RECORD_COLUMNS[1:7]


def slot_of_row(row: Sequence[Any]) -> Slot:
    """The slot of a row in ``RECORD_COLUMNS`` order."""
    return tuple(row[1:7])


def slot_of(record: Record) -> Slot:
    """The slot of ``record``."""
    return (*record.scope.columns(), record.key)


@dataclass(frozen=True)
class Change:
    """Store ``record`` in ``slot`` (delete what it holds when ``None``), provided the slot
    still holds ``expected`` (a row in ``RECORD_COLUMNS`` order; ``None``: nothing)."""

    slot: Slot
    expected: tuple[Any, ...] | None
    record: Record | None


@dataclass(frozen=True)
class Snapshot:
    """What the log up to ``position`` leaves (``target``) and what was stored at that point
    (``current``: rows in ``RECORD_COLUMNS`` order, in the form ``record_row`` gives)."""

    position: int
    target: dict[Slot, Record]
    current: dict[Slot, tuple[Any, ...]]


@dataclass
class Progress:
    """How far the applying transactions have looked: the log ``position`` and the keys
    ``touched`` since the snapshot; ``settled`` is how many records the settle step left."""

    position: int
    touched: set[str] = field(default_factory=set)
    settled: int = 0

    def saw(self, events: Iterable[tuple[int, str | None]]) -> None:
        """Note source events (position, payload key) appended since ``position``."""
        for position, key in events:
            self.position = max(self.position, int(position))
            if key is not None:
                self.touched.add(str(key))


def plan(target: dict[Slot, Record], current: dict[Slot, tuple[Any, ...]]) -> list[Change]:
    """The changes that turn ``current`` into ``target``, each against the row it replaces."""
    changes = [
        Change(slot, current.get(slot), record)
        for slot, record in target.items()
        if current.get(slot) != record_row(record)
    ]
    changes += [Change(slot, row, None) for slot, row in current.items() if slot not in target]
    return changes


def settle_plan(
    folded: Iterable[Record], stored: Iterable[tuple[Any, ...]], keys: set[str]
) -> list[Change]:
    """The changes that store ``folded`` (what the events of ``keys`` leave) over the slots
    of ``keys`` that hold ``stored`` rows (``record_row`` form)."""
    return plan(
        {slot_of(r): r for r in folded if r.key in keys},
        {slot_of_row(row): tuple(row) for row in stored},
    )


def still_planned(
    changes: Sequence[Change], stored: dict[Slot, tuple[Any, ...]], progress: Progress
) -> list[Change]:
    """The ``changes`` to store now: those whose key no event since the snapshot named and
    whose slot holds what it held then (``stored``: the slots' rows now). The keys of the
    others join ``progress.touched``, for the settle step."""
    kept = []
    for change in changes:
        key = change.slot[-1]
        if key in progress.touched or stored.get(change.slot) != change.expected:
            progress.touched.add(key)
        else:
            kept.append(change)
    return kept


def record_count(snapshot: Snapshot, progress: Progress) -> int:
    """How many records the rebuild left: the snapshot's untouched ones and the settled."""
    untouched = sum(1 for slot in snapshot.target if slot[-1] not in progress.touched)
    return untouched + progress.settled


class StagedRebuild(Protocol):
    """A backend's steps of one rebuild (namespace, scope, source events and fold fixed)."""

    async def snapshot(self) -> Snapshot:
        """Fold the source events up to the newest position and read the stored records,
        in one read snapshot, holding no writer off."""
        ...

    async def apply(self, changes: Sequence[Change], progress: Progress, *, settle: bool) -> None:
        """In one transaction that holds writers off: mark the keys of source events after
        ``progress.position`` touched (and move the position on), store the changes
        ``still_planned`` keeps, and, with ``settle``, fold the events of every touched key
        again and store what they leave (``progress.settled``: how many)."""
        ...


async def staged_rebuild(steps: StagedRebuild, *, batch: int = APPLY_BATCH) -> int:
    """Run a rebuild's stages (see the module docstring); returns how many records it left."""
    snapshot = await steps.snapshot()
    progress = Progress(snapshot.position)
    changes = plan(snapshot.target, snapshot.current)
    for start in range(0, len(changes), batch):
        await steps.apply(changes[start : start + batch], progress, settle=False)
    await steps.apply([], progress, settle=True)
    return record_count(snapshot, progress)
