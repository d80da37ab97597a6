"""``AutoFormation``: memories formed from every episode and conversation turn as it is
memorized, after the write is acknowledged, and never lost to a crash.

The work is durable before it is done. A memorize into ``episodic`` or ``conversation``
commits, in its own transaction, a *pending formation* record (namespace
``formation_pending``, written with its ``memory.written`` event) holding the turns as they
were said (a conversation may evict a turn from its buffer before it is formed). The
memorize then returns; a background task extracts from those turns and consolidates what they
state (``formation.ingest.form``), then deletes the pending record (its ``memory.deleted`` event
says the formation ran). A process that dies in between leaves the pending record in the store
and in the log: the next engine to open the store forms those turns (``resume``).

Several engines may share one store (service instances on one PostgreSQL database): each
pending record is formed by the engine that claims it (``formation.claims``: a lease written
into the record, decided on the locked row), and a lease that ends unfinished is taken over. An
engine forms the records its own writes committed, every record it finds unclaimed or with an
ended lease when it opens, and, while it writes, again every ``lease_s``; a record it finds
held it looks at again when the lease ends.

Forming a turn again is harmless: consolidation finds what it would write already holding and
writes nothing, and writes each fact only over the version it decided on, so a formation
interrupted half-way and resumed, or run by two engines at once, leaves every fact once.
Formation runs one batch at a time per engine.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from engramdb.core.errors import (
    EngramError,
    NotFoundError,
    ValidationError,
    VersionConflictError,
)
from engramdb.core.events import EventEnvelope, new_id
from engramdb.core.scope import LEVELS, Scope
from engramdb.core.types import utc_now
from engramdb.formation.claims import Held, claim_change, holder_name, release_change
from engramdb.formation.ingest import IngestReport, form
from engramdb.formation.types import Extractor, Turn
from engramdb.orchestrator.plugin import record_item
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.projection import ProjectionSpec
from engramdb.providers.write_pauses import WritePauses
from engramdb.storage.records import Op, Record, RecordQuery

if TYPE_CHECKING:
    from engramdb.engine import Engine, ScopedMemory

__all__ = ["FORMATION_SPEC", "FORMED_NAMESPACES", "AutoFormation", "episode_turn"]

_log = logging.getLogger(__name__)


def _unsearched(key: str, value: Any, occurred_at: datetime | None) -> str:
    """No full-text key: a pending formation is read by key, never searched, so its write
    tokenizes no turn into the text indexes and their statistics (and its deletion none out)."""
    return ""


#: Pending formations, one record per memorize, kept in the writer's full scope.
FORMATION_SPEC = ProjectionSpec("formation_pending", levels=LEVELS, key_text=_unsearched)
#: The namespaces whose writes are formed.
FORMED_NAMESPACES = frozenset({"episodic", "conversation"})


def episode_turn(record: Record) -> Turn:
    """A stored episode or conversation turn as a ``Turn`` to form from (an episode stored
    without a role is read as the user's)."""
    item = record_item(record)
    session = record.metadata.get("session_id")
    return Turn(
        turn_id=record.key,
        role=item.role or "user",
        text=item.text,
        occurred_at=item.occurred_at or record.created_at,
        session_id=session if isinstance(session, str) else (record.thread or None),
    )


class AutoFormation:
    """The pending formations of one engine and the task that forms them.

    Formation yields to the writes: a round starts once no turn has been memorized for
    ``quiet_s`` (writes and formation share one event loop and one database writer), or
    ``max_wait_s`` after it was due, whichever is first, so a steady stream of writes delays
    formation but never starves it.

    Args:
        engine: the engine whose scopes the turns belong to.
        extractor: makes the extractor each batch is read by (the rules by default).
        lease_s: how long a claim on a pending record keeps other engines off it.
    """

    def __init__(
        self,
        engine: Engine,
        extractor: Callable[[], Extractor],
        *,
        quiet_s: float = 0.05,
        max_wait_s: float = 2.0,
        lease_s: float = 60.0,
    ) -> None:
        self.engine = engine
        self.extractor = extractor
        #: The formed writes under way, which formation waits for a pause in (a write whose
        #: commit failed never ends: it is forgotten once writes pause for ``max_wait_s``).
        self.pauses = WritePauses(quiet_s, max_wait_s)
        if not lease_s > 0:
            raise ValidationError("a formation lease lasts a positive number of seconds")
        self.lease_s = lease_s
        #: This engine's name in the leases it writes.
        self.holder = holder_name()
        #: When this engine last looked at every pending record (``time.monotonic``).
        self._swept = time.monotonic()
        #: The look again at records held by others, when their leases end.
        self._recheck: asyncio.TimerHandle | None = None
        #: The pending record this engine has claimed and is forming.
        self._holding: Record | None = None
        #: Keys of the pending records this process committed and has not formed yet.
        self._mine: set[str] = set()
        #: Whether the next round forms every pending record (those of stopped processes too).
        self._all = False
        #: Pending records whose formation failed in this process (retried at the next start).
        self._failed: set[str] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: What the formations of this process did, for those who ask (tests, the CLI).
        self.reports: list[IngestReport] = []

    def __len__(self) -> int:
        return len(self._mine)

    # -- the write's side (WriteCompanion) ----------------------------------------------------

    def ops_for(
        self, provider: EventSourcedProvider, records: Sequence[Record]
    ) -> tuple[list[Op], list[EventEnvelope]]:
        """A pending-formation record naming ``records``, to commit with them."""
        if provider.provider_id not in FORMED_NAMESPACES or not records:
            return [], []
        key = new_id()
        # Noted before the commit: a key whose commit failed is simply never found.
        self._mine.add(key)
        # A write in flight is not a pause: formation keeps off its round trips.
        self.pauses.began()
        request = WriteRequest(
            key=key,
            value={
                "namespace": provider.provider_id,
                "turns": [_turn_value(episode_turn(r)) for r in records],
            },
            content_type="formation",
        )
        return self._pending_provider(provider.scope).prepared([request])

    def committed(self, provider: EventSourcedProvider, records: Sequence[Record]) -> None:
        """The turns are stored: their pending record is queued for forming."""
        if provider.provider_id not in FORMED_NAMESPACES or not records:
            return
        self.pauses.ended()
        self._enqueue()

    # -- the background side -----------------------------------------------------------------

    async def resume(self) -> int:
        """Queue every pending formation in the store (those a stopped process left too);
        returns how many are pending."""
        self._sweep()
        return len(await self._stored(None))

    def _sweep(self) -> None:
        self._all = True
        self._enqueue()

    async def wait(self) -> None:
        """Wait until every queued formation has been done."""
        while not self._idle.is_set():
            await self._idle.wait()

    def _enqueue(self) -> None:
        self._idle.clear()
        self._wake.set()
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _stored(self, keys: tuple[str, ...] | None) -> list[Record]:
        query = RecordQuery(FORMATION_SPEC.namespace, None, keys=keys)
        # Keys are time-ordered ids: the oldest pending formation is formed first.
        return sorted(await self.engine.backend.scan(query), key=lambda r: r.key)

    async def _run(self) -> None:
        try:
            while self._wake.is_set():
                await self.pauses.pause()
                self._wake.clear()
                # While it writes, an engine also takes on what stopped engines left.
                if self._all or time.monotonic() - self._swept >= self.lease_s:
                    self._swept, self._all = time.monotonic(), True
                keys = None if self._all else tuple(sorted(self._mine))
                self._all = False
                for pending in await self._stored(keys) if keys != () else []:
                    if pending.key not in self._failed:
                        # Each record waits for a pause of its own: a round started in one
                        # pause does not run on into the writes that follow it.
                        await self.pauses.pause()
                        await self._form_or_note(pending)
                    self._mine.discard(pending.key)
        except Exception as exc:
            # The store cannot be read (closed, unreachable): what is pending stays pending,
            # formed on the next write or by the next engine to open the store.
            _log.warning("automatic formation stopped: %s", _said(exc))
        finally:
            # Anything still pending is formed on the next write or the next start.
            self._idle.set()

    async def _form_or_note(self, pending: Record) -> None:
        """Form ``pending``; one that fails is logged and left pending, in the store, for the
        next engine to open it, and the others are formed meanwhile."""
        try:
            claimed = await self._claim(pending)
            if claimed is not None:
                await self._form(pending, claimed)
        except Exception as exc:
            self._failed.add(pending.key)
            await self._release()
            _log.warning(
                "automatic formation of %s failed, left pending until the next start: %s",
                pending.key,
                _said(exc),
            )

    async def _claim(self, pending: Record) -> int | None:
        """Claim ``pending`` for this engine: the version the claim wrote, or ``None`` if
        another engine formed it already or holds it (looked at again when its lease ends)."""
        try:
            entry = await self._pending_provider(pending.scope).update(
                pending.key, claim_change(self.holder, self.lease_s)
            )
        except NotFoundError:
            return None
        except Held as held:
            self._look_again_at(held.until)
            return None
        assert entry.version is not None
        self._holding = pending
        return entry.version

    async def _release(self) -> None:
        """Give up the claim in hand, if any (best effort: an unreleased lease just ends)."""
        pending, self._holding = self._holding, None
        if pending is None:
            return
        try:
            await self._pending_provider(pending.scope).update(
                pending.key, release_change(self.holder)
            )
        except (Held, EngramError) as exc:
            _log.info("the claim on %s was not given up: %s", pending.key, exc)

    def _look_again_at(self, until: datetime) -> None:
        delay = max(0.0, (until - utc_now()).total_seconds()) + self.pauses.quiet_s
        due = asyncio.get_running_loop().time() + delay
        if self._recheck is not None and self._recheck.when() <= due:
            return
        if self._recheck is not None:
            self._recheck.cancel()
        self._recheck = asyncio.get_running_loop().call_at(due, self._sweep)

    async def _form(self, pending: Record, claimed: int) -> None:
        from engramdb.engine import ScopedMemory

        value = pending.value if isinstance(pending.value, dict) else {}
        mem = ScopedMemory(self.engine, pending.scope)
        turns = sorted(
            (_value_turn(t) for t in value.get("turns", [])),
            key=lambda t: (t.occurred_at, t.turn_id),
        )
        if turns:
            extractor = self.extractor()
            report = IngestReport(turns=len(turns), extractor=extractor.name)
            await form(
                mem.semantic, mem.graph, turns, report, subject=_subject(mem), extractor=extractor
            )
            self.reports.append(report)
        try:
            # Only at the claim's version: a lease taken over is the new holder's to delete.
            await self._pending_provider(pending.scope).delete(
                pending.key, expected_version=claimed
            )
        except (NotFoundError, VersionConflictError):
            _log.info("the lease on %s was taken over while it was formed", pending.key)
        self._holding = None

    def _pending_provider(self, scope: Scope) -> EventSourcedProvider:
        return self.engine.provider(FORMATION_SPEC, scope)

    async def close(self) -> None:
        """Stop forming; what is pending stays pending, in the store."""
        if self._recheck is not None:
            self._recheck.cancel()
            self._recheck = None
        task, self._task = self._task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        # Cut short mid-formation: the next engine to look need not wait for the lease.
        await self._release()
        self._idle.set()


def _turn_value(turn: Turn) -> dict[str, Any]:
    return {
        "id": turn.turn_id,
        "role": turn.role,
        "text": turn.text,
        "occurred_at": turn.occurred_at.isoformat(),
        "session_id": turn.session_id,
    }


def _value_turn(value: dict[str, Any]) -> Turn:
    return Turn(
        turn_id=value["id"],
        role=value["role"],
        text=value["text"],
        occurred_at=datetime.fromisoformat(value["occurred_at"]),
        session_id=value.get("session_id"),
    )


def _said(exc: Exception) -> str:
    return exc.message if isinstance(exc, EngramError) else f"{type(exc).__name__}: {exc}"


def _subject(mem: ScopedMemory) -> str:
    return mem.scope.user or "user"
