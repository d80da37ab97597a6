"""``StoredResponses``: the answers to writes sent with an idempotency key, kept for a day so
that a retried request gets the first answer instead of writing twice.

They are stored per tenant like every record, so a retry that reaches another service
instance is answered the same. Each answer keeps the fingerprint of the request it answered:
the same key with a different request is refused rather than replayed.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from engramdb.core.model import EngramModel
from engramdb.orchestrator.resources import resource_spec
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest

IDEMPOTENCY_SPEC = resource_spec("idempotency")
#: How long an answer is replayed: long enough for any sane retry policy.
DEFAULT_TTL_MS = 24 * 3600 * 1000


class StoredResponse(EngramModel):
    """One stored answer and the fingerprint of the request it answered."""

    fingerprint: str
    status: int = Field(ge=100, le=599)
    body: str
    media_type: str = "application/json"
    headers: dict[str, str] = Field(default_factory=dict)


class StoredResponses:
    """The stored answers of one tenant."""

    def __init__(self, provider: EventSourcedProvider, ttl_ms: int = DEFAULT_TTL_MS) -> None:
        self.provider = provider
        self.ttl_ms = ttl_ms

    async def find(self, slot: str) -> StoredResponse | None:
        """The answer stored under ``slot``, unless it has expired."""
        record = await self.provider.read_record(slot)
        return None if record is None else StoredResponse.model_validate(record.value)

    async def save(self, slot: str, response: StoredResponse) -> None:
        """Store ``response`` under ``slot`` for ``ttl_ms``."""
        value: dict[str, Any] = response.model_dump(mode="json")
        await self.provider.write_many(
            [WriteRequest(slot, value, "activity", {}, ttl_ms=self.ttl_ms)]
        )
