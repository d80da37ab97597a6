"""``ServiceSettings``: how ``engram serve`` runs — where the data is, how callers
authenticate, and the limits it enforces."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from engramdb.core.errors import UsageError

#: The tenant of local development mode (the service spec's default tenant).
LOCAL_TENANT = "00000000-0000-0000-0000-000000000000"
LOCAL_TENANT_NAME = "Default Tenant"

AuthMode = Literal["local", "production"]

_NATS_URL = re.compile(r"(?:nats|tls|ws|wss)://[A-Za-z0-9._~%!$&'()*+,;=:@\[\]-]+(?:/[^\s\x00]*)?")


@dataclass(frozen=True)
class ServiceSettings:
    """Settings of one service instance.

    Attributes:
        auth: ``local`` serves one tenant with no credentials (development); ``production``
            requires an API key or a JWT on every request.
        jwt_secret: the HS256 secret JWTs are signed with (production mode; without it only
            API keys are accepted).
        jwt_audience: the ``aud`` claim JWTs must carry, if set.
        local_tenant: the tenant of local mode.
        max_body_bytes: larger request bodies are refused with 413.
        idempotency_ttl_s: how long an answer to a write with an ``Idempotency-Key`` is
            replayed.
        idempotency_lease_s: how long a request holds its ``Idempotency-Key`` while it runs;
            a retry within it gets 409, after it (the request's instance died) runs again.
        nats_url: when set, the event log is published to NATS JetStream at this address
            (``engramdb.bridge``), and ``/healthz`` reports the bridge.
        nats_stream: the JetStream stream the events go to.
    """

    auth: AuthMode = "local"
    jwt_secret: str | None = None
    jwt_audience: str | None = None
    local_tenant: str = LOCAL_TENANT
    max_body_bytes: int = 2 * 1024 * 1024
    idempotency_ttl_s: int = 24 * 3600
    idempotency_lease_s: int = 5 * 60
    nats_url: str | None = None
    nats_stream: str = "ENGRAM"

    def __post_init__(self) -> None:
        if self.auth not in ("local", "production"):
            raise UsageError(f"auth must be 'local' or 'production', got {self.auth!r}")
        if self.jwt_secret is not None and len(self.jwt_secret) < 32:
            # PyJWT warns below 32 bytes for HS256: a short secret can be brute-forced.
            raise UsageError("the JWT secret must be at least 32 characters")
        if self.max_body_bytes < 1024:
            raise UsageError("max_body_bytes must be at least 1024")
        if self.idempotency_ttl_s < 1 or self.idempotency_lease_s < 1:
            raise UsageError("idempotency_ttl_s and idempotency_lease_s must be at least 1")
        if self.nats_url is not None and not _NATS_URL.fullmatch(self.nats_url):
            # Checked here: a bridge given a malformed address would only log, for ever.
            raise UsageError(
                f"the NATS address must be nats://, tls://, ws:// or wss:// host[:port], "
                f"got {self.nats_url!r}"
            )
