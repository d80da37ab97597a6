"""``EventBridge``: the event log published to NATS JetStream, in log order, after commit.

The log is the outbox. Every persistent write appends its events in its own transaction, and
positions are handed out in commit order (a reader paging by position never skips a late
commit), so the bridge only has to read the log after the last position it published and
publish each event, waiting for JetStream's acknowledgement before the next one. Nothing is
written to the database for the bridge: where it stopped is read back from the stream itself
(the ``Engram-Position`` header of the stream's last message), so a bridge that crashed between
a commit and its publish — or between a publish and anything else — starts again at the first
event the stream lacks. An event published twice (the crash came after JetStream stored it but
before the acknowledgement arrived) carries its event id as ``Nats-Msg-Id``, and JetStream drops
the copy within its duplicate window.

When NATS is down the bridge waits with capped exponential backoff and jitter and connects
again; the log keeps every event meanwhile, so the only cost of an outage is lag, which
``health()`` reports with the last error.

One stream per database: its subjects are ``<prefix>.>`` (see ``engramdb.bridge.subjects``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engramdb.bridge.subjects import DEFAULT_PREFIX, subject
from engramdb.storage.backend import EventQuery

if TYPE_CHECKING:
    from nats.aio.client import Client as NatsClient
    from nats.js import JetStreamContext

    from engramdb.core.events import EventEnvelope
    from engramdb.storage.backend import EventStore

log = logging.getLogger(__name__)

DEFAULT_STREAM = "ENGRAM"
POSITION_HEADER = "Engram-Position"
TENANT_HEADER = "Engram-Tenant"
#: How long JetStream remembers message ids to drop duplicates (seconds).
DUPLICATE_WINDOW_S = 600.0


@dataclass(frozen=True)
class BridgeHealth:
    """What ``engram stats`` and the service's health endpoint show of a bridge."""

    connected: bool
    published_position: int
    log_position: int
    published: int
    last_error: str | None

    @property
    def lag(self) -> int:
        """Events committed but not yet acknowledged by JetStream."""
        return max(0, self.log_position - self.published_position)

    def to_dict(self) -> dict[str, Any]:
        return {
            "connected": self.connected,
            "published_position": self.published_position,
            "log_position": self.log_position,
            "lag": self.lag,
            "published": self.published,
            "last_error": self.last_error,
        }


class EventBridge:
    """Publishes ``events`` to the JetStream stream ``stream`` on the NATS server at ``url``.

    Run it with ``async with bridge:`` (or ``start()`` / ``stop()``); ``drain()`` waits until
    everything committed so far is published.
    """

    def __init__(
        self,
        events: EventStore,
        url: str,
        *,
        stream: str = DEFAULT_STREAM,
        prefix: str = DEFAULT_PREFIX,
        batch: int = 500,
        poll_s: float = 0.05,
        max_backoff_s: float = 5.0,
    ) -> None:
        self.events = events
        self.url = url
        self.stream = stream
        self.prefix = prefix
        self.batch = batch
        self.poll_s = poll_s
        self.max_backoff_s = max_backoff_s
        self.position = 0
        self.published = 0
        self.last_error: str | None = None
        self._nc: NatsClient | None = None
        self._js: JetStreamContext | None = None
        self._task: asyncio.Task[None] | None = None
        self._progress = asyncio.Condition()

    # -- life cycle ------------------------------------------------------------------------------

    async def __aenter__(self) -> EventBridge:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start publishing in the background (connecting, and resuming, as it can)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="engram-event-bridge")

    async def stop(self) -> None:
        """Stop publishing and close the connection; nothing committed is lost (the next
        bridge resumes from the stream)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._disconnect()

    async def drain(self, timeout_s: float = 30.0) -> None:
        """Wait until every event committed before this call is published.

        Raises:
            TimeoutError: not within ``timeout_s`` (NATS down, say).
        """
        target = await self.events.last_position()
        async with asyncio.timeout(timeout_s), self._progress:
            await self._progress.wait_for(lambda: self.position >= target)

    async def health(self) -> BridgeHealth:
        """Connection, how far the stream is behind the log, and the last error."""
        return BridgeHealth(
            connected=self._nc is not None and self._nc.is_connected,
            published_position=self.position,
            log_position=await self.events.last_position(),
            published=self.published,
            last_error=self.last_error,
        )

    # -- the loop --------------------------------------------------------------------------------

    async def _run(self) -> None:
        failures = 0
        while True:
            try:
                if self._js is None:
                    await self._connect()
                sent = await self.publish_pending()
                failures = 0
                if not sent:
                    await asyncio.sleep(self.poll_s)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # any NATS or network failure: back off and reconnect
                failures += 1
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("event bridge: %s (retry %d)", self.last_error, failures)
                await self._disconnect()
                await asyncio.sleep(self._backoff(failures))

    def _backoff(self, failures: int) -> float:
        ceiling = min(self.max_backoff_s, 0.1 * 2**failures)
        return random.uniform(ceiling / 2, ceiling)

    async def _connect(self) -> None:
        import nats
        from nats.js.api import StreamConfig
        from nats.js.errors import BadRequestError

        nc = await nats.connect(
            self.url, connect_timeout=2, allow_reconnect=False, max_reconnect_attempts=0
        )
        js = nc.jetstream(timeout=5)
        config = StreamConfig(
            name=self.stream,
            subjects=[f"{self.prefix}.>"],
            duplicate_window=DUPLICATE_WINDOW_S,
        )
        try:
            await js.add_stream(config)
        except BadRequestError:
            await js.update_stream(config)
        self._nc, self._js = nc, js
        self.position = await self._stream_position(js)
        self.last_error = None

    async def _stream_position(self, js: JetStreamContext) -> int:
        """The log position of the stream's last message (0 for an empty stream)."""
        info = await js.stream_info(self.stream)
        if not info.state.last_seq:
            return 0
        last = await js.get_msg(self.stream, seq=info.state.last_seq)
        return int((last.headers or {}).get(POSITION_HEADER, 0))

    async def _disconnect(self) -> None:
        nc, self._nc, self._js = self._nc, None, None
        if nc is not None:
            with contextlib.suppress(Exception):
                await nc.close()

    async def publish_pending(self) -> int:
        """Publish the next page of unpublished events; how many were published."""
        js = self._js
        if js is None:
            return 0
        page = await self.events.read(EventQuery(after=self.position, limit=self.batch))
        for event in page:
            await self._publish(js, event)
        return len(page)

    async def _publish(self, js: JetStreamContext, event: EventEnvelope) -> None:
        assert event.position is not None  # read from the log
        headers = {
            "Nats-Msg-Id": event.event_id,
            POSITION_HEADER: str(event.position),
            TENANT_HEADER: event.scope.tenant or "",
        }
        await js.publish(
            subject(self.prefix, event.scope.tenant, event.event_type),
            event.model_dump_json().encode(),
            stream=self.stream,
            headers=headers,
        )
        async with self._progress:
            self.position = event.position
            self.published += 1
            self._progress.notify_all()


__all__ = [
    "DEFAULT_STREAM",
    "POSITION_HEADER",
    "TENANT_HEADER",
    "BridgeHealth",
    "EventBridge",
]
