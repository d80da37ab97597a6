"""``EventConsumer``: Engram's events applied in another process, each once, in log order.

A durable JetStream pull consumer (its name is its identity: a consumer that restarts with the
same name goes on after the last event it acknowledged). Each event is handed to ``handler``
and acknowledged only after the handler returned, so a crash redelivers what was not yet
done. What was done but not acknowledged when the process died is redelivered too, so the
consumer skips event ids it has applied: ``applied`` is the record of them, in memory by
default; give one that persists with the handler's own state (``AppliedIds``) to skip them
across restarts as well.

Messages arrive in stream order, which is log order; a handler that fails is retried (the
message is redelivered) before any later event of the stream is handed over, so each tenant's
events — and all events — are applied in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol

from engramdb.bridge.publisher import DEFAULT_STREAM
from engramdb.bridge.subjects import DEFAULT_PREFIX, tenant_subjects
from engramdb.core.events import EventEnvelope

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

log = logging.getLogger(__name__)

Handler = Callable[[EventEnvelope], Awaitable[None]]


class AppliedIds(Protocol):
    """Which event ids were applied already."""

    async def seen(self, event_id: str) -> bool: ...

    async def add(self, event_id: str) -> None: ...


class RecentIds:
    """The last ``size`` applied event ids, in memory: enough to skip redeliveries, which
    only concern the events handed over since the last acknowledgement."""

    def __init__(self, size: int = 100_000) -> None:
        self.size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    async def seen(self, event_id: str) -> bool:
        return event_id in self._ids

    async def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        while len(self._ids) > self.size:
            self._ids.popitem(last=False)


class EventConsumer:
    """Applies the events of ``stream`` (those of ``tenant`` only, if given) with
    ``handler``, as the durable consumer ``durable``."""

    def __init__(
        self,
        url: str,
        durable: str,
        handler: Handler,
        *,
        tenant: str | None = None,
        stream: str = DEFAULT_STREAM,
        prefix: str = DEFAULT_PREFIX,
        applied: AppliedIds | None = None,
        batch: int = 100,
        ack_wait_s: float = 30.0,
    ) -> None:
        self.url = url
        self.durable = durable
        self.handler = handler
        self.stream = stream
        self.subjects = tenant_subjects(prefix, tenant) if tenant else f"{prefix}.>"
        self.applied = applied or RecentIds()
        self.batch = batch
        self.ack_wait_s = ack_wait_s
        self.handled = 0
        self.skipped = 0
        self._nc: NatsClient | None = None
        self._sub: JetStreamContext.PullSubscription | None = None

    async def __aenter__(self) -> EventConsumer:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def connect(self) -> None:
        """Connect and bind the durable consumer (created on first use)."""
        import nats
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        self._nc = await nats.connect(self.url, connect_timeout=2, max_reconnect_attempts=-1)
        js = self._nc.jetstream(timeout=5)
        config = ConsumerConfig(
            durable_name=self.durable,
            ack_policy=AckPolicy.EXPLICIT,
            deliver_policy=DeliverPolicy.ALL,
            ack_wait=self.ack_wait_s,
            max_ack_pending=self.batch,
        )
        self._sub = await js.pull_subscribe(
            self.subjects, durable=self.durable, stream=self.stream, config=config
        )

    async def close(self) -> None:
        nc, self._nc, self._sub = self._nc, None, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()

    async def poll(self, timeout_s: float = 1.0) -> int:
        """Fetch what is waiting (up to ``batch``) and apply it; how many events were handed
        to the handler (0 when none arrived within ``timeout_s``)."""
        from nats.errors import TimeoutError as NatsTimeout

        if self._sub is None:
            await self.connect()
        assert self._sub is not None
        try:
            messages = await self._sub.fetch(self.batch, timeout=timeout_s)
        except (NatsTimeout, TimeoutError):  # the client raises either when nothing came
            return 0
        before = self.handled
        for message in messages:
            await self._apply(message)
        return self.handled - before

    async def _apply(self, message: Msg) -> None:
        event = EventEnvelope.model_validate_json(message.data)
        if await self.applied.seen(event.event_id):
            self.skipped += 1
        else:
            try:
                await self.handler(event)
            except Exception:
                # Redelivered after ack_wait; nothing after it is acknowledged before it.
                log.exception("event consumer %s: handler failed on %s", self.durable, event)
                await message.nak()
                raise
            await self.applied.add(event.event_id)
            self.handled += 1
        await message.ack()

    async def run(self, stop: asyncio.Event) -> None:
        """Apply events until ``stop`` is set."""
        while not stop.is_set():
            await self.poll(timeout_s=0.5)


__all__ = ["AppliedIds", "EventConsumer", "Handler", "RecentIds"]
