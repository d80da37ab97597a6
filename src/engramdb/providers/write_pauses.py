"""``WritePauses``: when the writes of one engine pause, for the work that yields to them.

Work done after a write is acknowledged (sentence vectors, ``DeferredParts``; memory formation,
``formation.auto.AutoFormation``) shares the event loop, the model and the database writer with
the writes still coming. It waits for a pause: no write in flight and none begun or ended for
``quiet_s``. A steady stream of writes delays it but never starves it: it waits ``max_wait_s``
at most.

A write is counted from ``began`` to ``ended`` (``writing`` does both around a block). One that
never ends (its commit failed between the two) is forgotten once no write has begun or ended for
``max_wait_s``, so it cannot hold the work back for good.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator

__all__ = ["WritePauses"]


class WritePauses:
    """The writes in flight and when the last one began or ended.

    Args:
        quiet_s: how long no write may have begun or ended for the writes to count as paused.
        max_wait_s: the longest ``pause`` waits, however busy the writes.
        clock: seconds, never going back (``time.monotonic``; tests may pass their own).
    """

    def __init__(
        self,
        quiet_s: float,
        max_wait_s: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.quiet_s = quiet_s
        self.max_wait_s = max_wait_s
        self._clock = clock
        #: Writes begun and not ended.
        self.in_flight = 0
        #: When a write last began or ended (long before any write: the writes start paused).
        self._last = clock() - max(quiet_s, max_wait_s)
        #: Set while no write is in flight.
        self._none = asyncio.Event()
        self._none.set()

    def began(self) -> None:
        """A write began (its embedding or commit is under way)."""
        self.in_flight += 1
        self._last = self._clock()
        self._none.clear()

    def ended(self) -> None:
        """A write ended, committed or not."""
        self.in_flight = max(0, self.in_flight - 1)
        self._last = self._clock()
        if not self.in_flight:
            self._none.set()

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Count the write the block performs."""
        self.began()
        try:
            yield
        finally:
            self.ended()

    def paused(self) -> bool:
        """Whether the writes pause now (a write that never ended is forgotten here once
        ``max_wait_s`` has passed without any)."""
        idle = self._clock() - self._last
        if idle >= self.max_wait_s:
            self._forget_writes()
        return idle >= self.quiet_s and not self.in_flight

    def _forget_writes(self) -> None:
        self.in_flight = 0
        self._none.set()

    def _until_quiet(self) -> float:
        """How long until the writes may count as paused, if nothing else begins."""
        idle = self._clock() - self._last
        # Writes in flight past quiet_s: look again after another quiet_s.
        return self.quiet_s - idle if idle < self.quiet_s else self.quiet_s

    async def pause(self) -> None:
        """Wait for a pause in the writes, or ``max_wait_s``, whichever comes first."""
        due = self._clock()
        while (waited := self._clock() - due) < self.max_wait_s:
            if self.paused():
                return
            await asyncio.sleep(min(self._until_quiet(), self.max_wait_s - waited))

    async def between(self) -> None:
        """Wait until no write is in flight (at once if none is), ``max_wait_s`` at most:
        work done in small steps goes on between the writes rather than after them all."""
        if not self.in_flight:
            return
        try:
            await asyncio.wait_for(self._none.wait(), self.max_wait_s)
        except TimeoutError:
            # Writes that never ended (their commit failed between the two calls).
            self._forget_writes()
