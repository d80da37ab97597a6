"""``StoredResponses``: the answers to writes sent with an idempotency key, kept for a day so
that a retried request gets the first answer instead of writing twice.

They are stored per tenant like every record, so a retry that reaches another service
instance is answered the same. Each answer keeps the fingerprint of the request it answered:
the same key with a different request is refused rather than replayed. Before a request runs
its key is claimed with a pending answer, created inside a transaction, so that of two
instances receiving one key at once only one runs it; a claim lapses after its lease, so a
key whose instance died with it can be used again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import Field

from engramdb.core.errors import ConflictError
from engramdb.core.model import EngramModel
from engramdb.orchestrator.resources import resource_spec
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest


def _no_words(key: str, value: Any, occurred_at: datetime | None) -> str:
    """Stored answers are found by their slot, never by their words: they have no full-text
    key. (Indexed, every write request's claim and answer kept words in one tenant-wide
    partition, whose counts every concurrent writer of the tenant then waited to update.)"""
    return ""


IDEMPOTENCY_SPEC = resource_spec("idempotency", _no_words)
#: How long an answer is replayed: long enough for any sane retry policy.
DEFAULT_TTL_MS = 24 * 3600 * 1000
#: How long a claim holds a key while its request runs.
DEFAULT_LEASE_MS = 5 * 60 * 1000


class StoredResponse(EngramModel):
    """One stored answer and the fingerprint of the request it answered; ``pending`` while
    that request still runs (a claim, ``claim_id`` naming its holder: no answer yet)."""

    fingerprint: str
    status: int = Field(ge=100, le=599)
    body: str
    media_type: str = "application/json"
    headers: dict[str, str] = Field(default_factory=dict)
    pending: bool = False
    claim_id: str = ""


class StoredResponses:
    """The stored answers of one tenant."""

    def __init__(
        self,
        provider: EventSourcedProvider,
        ttl_ms: int = DEFAULT_TTL_MS,
        lease_ms: int = DEFAULT_LEASE_MS,
        user_id: str | None = None,
    ) -> None:
        """``user_id`` is the user whose requests these answers are (so that erasing the
        user erases them)."""
        self.provider = provider
        self.ttl_ms = ttl_ms
        self.lease_ms = lease_ms
        self.metadata = {"user_id": user_id} if user_id else {}

    async def find(self, slot: str) -> StoredResponse | None:
        """The answer stored under ``slot``, unless it has expired."""
        record = await self.provider.read_record(slot)
        return None if record is None else StoredResponse.model_validate(record.value)

    async def save(self, slot: str, response: StoredResponse) -> None:
        """Store ``response`` under ``slot`` for ``ttl_ms``."""
        value: dict[str, Any] = response.model_dump(mode="json")
        await self.provider.write_many(
            [WriteRequest(slot, value, "activity", self.metadata, ttl_ms=self.ttl_ms)]
        )

    async def claim(self, slot: str, fingerprint: str, claim_id: str) -> StoredResponse | None:
        """Claim ``slot`` as ``claim_id`` for a request that is about to run: ``None`` if
        this caller now holds it (for ``lease_ms``), else what holds it already — a stored
        answer, or a pending claim of a request still running (``pending``)."""
        claim = StoredResponse(
            fingerprint=fingerprint, status=202, body="", pending=True, claim_id=claim_id
        )
        request = WriteRequest(
            slot,
            claim.model_dump(mode="json"),
            "activity",
            self.metadata,
            ttl_ms=self.lease_ms,
            create=True,
        )
        for _ in range(3):
            try:
                await self.provider.write_many([request])
            except ConflictError:
                held = await self.find(slot)
                if held is not None:
                    return held
                continue  # let go between the two calls (its request failed): claim again
            return None
        raise ConflictError("this Idempotency-Key is being claimed by another request")

    async def release(self, slot: str, claim_id: str) -> None:
        """Let go of the claim ``claim_id`` whose request failed, so that it may be retried
        as it was; a claim that lapsed and was taken over, or answered, is left alone."""
        held = await self.find(slot)
        if held is not None and held.pending and held.claim_id == claim_id:
            await self.provider.forget(slot, "hard", purge=False)
