"""``PendingVectors``: memories stored without their vector because the embedding model was
unavailable when they were written, and the work that embeds them later.

A write never waits on a busy embeddings server longer than its retry policy allows, and never
fails because of it: the memory is committed with its event (full-text search finds it at
once) and its record id noted here. The vectors are computed later, by whichever comes first:

- the background task started by the first deferral, which tries again with a growing pause
  while the model stays unavailable;
- the next write whose own embedding succeeds (the model is back: the task wakes at once);
- ``Engine.reindex(stale_only=True)`` / ``engram reindex --stale``, which embeds every memory
  without a vector of the current model — also those deferred by a process that has since
  stopped, since what is noted here lives only in memory while the records themselves are
  durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from engramdb.core.errors import EngramError, ModelUnavailableError
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.records import Record

__all__ = ["PendingVectors"]

_log = logging.getLogger(__name__)

#: Embeds the listed records of a namespace that still lack a vector; returns how many.
EmbedStored = Callable[[ProjectionSpec, tuple[int, ...]], Awaitable[int]]


class PendingVectors:
    """Record ids waiting for their vector, by namespace, and the task that embeds them.

    Args:
        embed: embeds stored records by id (those deleted or embedded since are skipped).
        retry_interval_s: the pause after a catch-up found the model still unavailable; it
            doubles after each such round, up to ``max_interval_s``.
    """

    def __init__(
        self,
        embed: EmbedStored,
        *,
        retry_interval_s: float = 5.0,
        max_interval_s: float = 300.0,
    ) -> None:
        self._embed = embed
        self.retry_interval_s = retry_interval_s
        self.max_interval_s = max_interval_s
        self._waiting: dict[str, tuple[ProjectionSpec, set[int]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        return sum(len(ids) for _, ids in self._waiting.values())

    def add(self, spec: ProjectionSpec, stored: Sequence[Record]) -> None:
        """Note ``stored`` records as committed without a vector, and start the catch-up."""
        ids = {r.id for r in stored if r.id is not None}
        if not ids:
            return
        _, waiting = self._waiting.setdefault(spec.namespace, (spec, set()))
        waiting.update(ids)
        _log.warning(
            "embedding model unavailable: %d %s memories stored without a vector, "
            "to be embedded when it is back",
            len(ids),
            spec.namespace,
        )
        self._start(wake=False)

    def model_is_back(self) -> None:
        """An embedding just succeeded: embed what is waiting now rather than after a pause."""
        if self._waiting:
            self._start(wake=True)

    async def embed_now(self) -> int:
        """Embed every waiting memory now; returns how many were embedded.

        Raises:
            ModelUnavailableError: the model is still unavailable (what is left keeps waiting).
        """
        done = 0
        for namespace in list(self._waiting):
            spec, ids = self._waiting[namespace]
            batch = tuple(sorted(ids))
            done += await self._embed(spec, batch)
            # Ids the embedding skipped were deleted or embedded meanwhile: nothing waits.
            ids.difference_update(batch)
            if not ids:
                self._waiting.pop(namespace, None)
        return done

    def _start(self, *, wake: bool) -> None:
        if self._task is not None and not self._task.done():
            if wake:
                self._wake.set()
            return
        self._closed = False
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        pause = self.retry_interval_s
        while self._waiting and not self._closed:
            self._wake.clear()
            try:
                done = await self.embed_now()
            except ModelUnavailableError:
                await self._rest(pause)
                pause = min(pause * 2, self.max_interval_s)
                continue
            except EngramError as exc:
                # Not a busy model (a rejected key, a closed store): retrying blindly will not
                # help; the records stay without a vector for `engram reindex --stale`.
                _log.warning("deferred embedding stopped: %s", exc.message)
                return
            _log.info("embedded %d memories stored while the model was unavailable", done)

    async def _rest(self, seconds: float) -> None:
        """Wait ``seconds``, or less if a write finds the model back or the engine closes."""
        waiter = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait([waiter], timeout=seconds)
        finally:
            waiter.cancel()

    async def close(self) -> None:
        """Stop the background catch-up (what is left waits for ``reindex --stale``)."""
        task, self._task = self._task, None
        self._closed = True
        self._wake.set()
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
