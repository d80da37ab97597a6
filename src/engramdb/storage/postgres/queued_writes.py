"""``QueuedWrites``: writes a caller does not wait for, which every later transaction of the
same tenant still comes after.

A lone write on PostgreSQL commits its record while the model computes the record's vector, and
the vector follows in a transaction of its own (``record_first``). Its writer should not wait
for that second commit, but whatever this process asks of the tenant afterwards — a search, a
read of the events, the next write of the same key — must see it, as it would on SQLite's one
connection. So the write is begun at once on a pooled connection of its own, and every
transaction the pool lends out later waits first for the queued writes of its tenant (of every
tenant, for one that spans tenants). Queued writes of one tenant run one after another, in the
order they were queued. Other processes see a queued write once it is committed, as any other.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable

__all__ = ["QueuedWrites"]

#: Set inside a queued write: its own transactions do not wait for themselves.
_QUEUED: contextvars.ContextVar[bool] = contextvars.ContextVar("engram_queued", default=False)


class QueuedWrites:
    """The queued writes of one pool, by tenant (``None``: a write that spans tenants)."""

    def __init__(self) -> None:
        self._pending: dict[str | None, set[asyncio.Task[None]]] = {}

    def queue(self, tenant: str | None, write: Callable[[], Awaitable[None]]) -> asyncio.Task[None]:
        """Begin ``write`` after the writes already queued for ``tenant``; the task is done
        once it is (its failure is the task's exception)."""
        ahead = self._ahead(tenant)

        async def run() -> None:
            _QUEUED.set(True)
            if ahead:
                await asyncio.wait(ahead)
            await write()

        # A fresh context: the write outlives the caller that queued it.
        task = asyncio.get_running_loop().create_task(run(), context=contextvars.Context())
        self._pending.setdefault(tenant, set()).add(task)
        task.add_done_callback(lambda done: self._forget(tenant, done))
        return task

    def _forget(self, tenant: str | None, task: asyncio.Task[None]) -> None:
        pending = self._pending.get(tenant)
        if pending is not None:
            pending.discard(task)
            if not pending:
                del self._pending[tenant]

    async def settle(self, tenant: str | None) -> None:
        """Wait for the writes queued so far that a transaction as ``tenant`` must come after
        (none inside a queued write); their failures are their writers' to report."""
        if not self._pending or _QUEUED.get():
            return
        ahead = self._ahead(tenant)
        if ahead:
            await asyncio.wait(ahead)

    async def drain(self) -> None:
        """Wait for every queued write."""
        everything = self._ahead(None)
        if everything:
            await asyncio.wait(everything)

    def _ahead(self, tenant: str | None) -> list[asyncio.Task[None]]:
        if tenant is None:
            tasks = [task for pending in self._pending.values() for task in pending]
        else:
            tasks = [*self._pending.get(tenant, ()), *self._pending.get(None, ())]
        # A write queued on a loop that is gone will never end, and cannot be waited for here.
        loop = asyncio.get_running_loop()
        return [task for task in tasks if task.get_loop() is loop]
