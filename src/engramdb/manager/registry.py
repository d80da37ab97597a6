"""``ProviderRegistry``: which providers exist, as a projection of
``memory.provider.registered`` events (rfc-2001 §6.2).

Registering a provider appends the event only when its capabilities are new or changed, so
opening the same engine again writes nothing; the registry of a database lists every provider
ever registered against it, from any process.
"""

from __future__ import annotations

import asyncio

from engramdb.core.events import EventEnvelope, MemoryProviderRegistered, ProducerRef
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.core.types import ProviderCapabilities
from engramdb.storage.backend import EventQuery, EventStore

#: Registration events are system-wide, not any tenant's.
SYSTEM_SCOPE = Scope(tenant="_system")
#: Where they are read from: that tenant alone, which a login bound to one tenant at a time
#: (PostgreSQL's service role) may read too.
SYSTEM_EVENTS = ScopeFilter(SYSTEM_SCOPE, ("tenant",))


def apply_registration(
    state: dict[str, ProviderCapabilities], envelope: EventEnvelope
) -> dict[str, ProviderCapabilities]:
    """Fold one registration event into ``state`` (pure)."""
    event = MemoryProviderRegistered.from_envelope(envelope)
    return {**state, event.provider_id: ProviderCapabilities.model_validate(event.capabilities)}


class ProviderRegistry:
    """Provider capabilities by id, loaded from and appended to an event store."""

    def __init__(
        self, events: EventStore | None = None, producer: ProducerRef | None = None
    ) -> None:
        self._events = events
        self._producer = producer or ProducerRef()
        self._state: dict[str, ProviderCapabilities] = {}
        self._position = 0
        self._lock = asyncio.Lock()

    async def refresh(self) -> dict[str, ProviderCapabilities]:
        """Fold registrations appended since the last refresh (by any process)."""
        if self._events is not None:
            query = EventQuery(
                event_types=(MemoryProviderRegistered.event_type,),
                scope=SYSTEM_EVENTS,
                after=self._position,
            )
            for envelope in await self._events.read(query):
                self._state = apply_registration(self._state, envelope)
                assert envelope.position is not None
                self._position = envelope.position
        return dict(self._state)

    def get(self, provider_id: str) -> ProviderCapabilities | None:
        """Capabilities of ``provider_id`` as last registered."""
        return self._state.get(provider_id)

    def all(self) -> dict[str, ProviderCapabilities]:
        """Every registered provider's capabilities."""
        return dict(self._state)

    async def register(self, capabilities: ProviderCapabilities) -> bool:
        """Record ``capabilities``; returns whether a registration event was appended."""
        async with self._lock:
            if self._state.get(capabilities.provider_id) == capabilities:
                return False
            await self.refresh()
            if self._state.get(capabilities.provider_id) == capabilities:
                return False
            event = MemoryProviderRegistered(
                provider_id=capabilities.provider_id,
                tier=capabilities.tier.value,
                capabilities=capabilities.model_dump(mode="json"),
            )
            envelope = event.to_envelope(scope=SYSTEM_SCOPE, producer=self._producer)
            if self._events is not None:
                (envelope,) = await self._events.append([envelope])
                assert envelope.position is not None
                self._position = max(self._position, envelope.position)
            self._state = apply_registration(self._state, envelope)
            return True
