"""Idempotent writes: a POST, PUT or DELETE sent with an ``Idempotency-Key`` header (1-255
printable ASCII characters) is done once; sending it again (same key, same caller, same
request) replays the first answer, marked ``Idempotent-Replayed: true``.

Answers are kept in the database (``StoredResponses``), so a retry that reaches another
instance replays too. The same key with a different request is refused (422), and a retry
that arrives while the first is still running gets 409 (within one instance; two instances
racing on one key may both run it). Only successful answers are kept: a refused request
wrote nothing and may be retried as it is.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.routing import APIRoute

from engramdb.core.errors import ConflictError, ValidationError
from engramdb.core.scope import Scope
from engramdb.engine import Engine
from engramdb.orchestrator.idempotency import IDEMPOTENCY_SPEC, StoredResponse, StoredResponses
from engramdb.service.auth import authenticate

HEADER = "idempotency-key"
REPLAYED = "Idempotent-Replayed"
MAX_KEY = 255
_KEY = re.compile(rf"[ -~]{{1,{MAX_KEY}}}")
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SCOPE_HEADERS = ("x-user-id", "x-agent-id", "x-session-id")
#: Answer headers worth keeping for the replay.
_KEPT = ("location",)


def _digest(*parts: bytes | str) -> str:
    hashed = hashlib.sha256()
    for part in parts:
        hashed.update(part.encode() if isinstance(part, str) else part)
        hashed.update(b"\0")
    return hashed.hexdigest()


#: How the header appears in the OpenAPI schema of every write.
PARAMETER: dict[str, Any] = {
    "name": "Idempotency-Key",
    "in": "header",
    "required": False,
    "description": "Send a retried write with the same key: it is done once, and the first "
    "answer is replayed (marked Idempotent-Replayed: true)",
    "schema": {"type": "string", "minLength": 1, "maxLength": MAX_KEY, "pattern": "^[ -~]+$"},
}


class IdempotentRoute(APIRoute):
    """A route whose writes honour ``Idempotency-Key`` (see the module docstring)."""

    def __init__(self, path: str, endpoint: Callable[..., Any], **options: Any) -> None:
        if set(options.get("methods") or ()) & _WRITES:
            extra = dict(options.get("openapi_extra") or {})
            extra["parameters"] = [*extra.get("parameters", []), PARAMETER]
            options["openapi_extra"] = extra
        super().__init__(path, endpoint, **options)

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        """The route's handler, wrapped for idempotency when the route writes."""
        handler = super().get_route_handler()
        if not ((self.methods or set()) & _WRITES):
            return handler

        async def idempotent(request: Request) -> Response:
            key = request.headers.get(HEADER)
            if key is None:
                return await handler(request)
            if not _KEY.fullmatch(key):
                raise ValidationError(
                    f"Idempotency-Key must be 1-{MAX_KEY} printable ASCII characters",
                    field=HEADER,
                )
            principal = await authenticate(request)
            engine: Engine = request.app.state.engine
            store = StoredResponses(
                engine.provider(IDEMPOTENCY_SPEC, Scope(tenant=principal.tenant)),
                ttl_ms=request.app.state.settings.idempotency_ttl_s * 1000,
            )
            # Keys are per caller: the credentials' user and the scope the request acts in.
            acting = [request.headers.get(h, "") for h in _SCOPE_HEADERS]
            slot = _digest(principal.user or "", *acting, key)
            fingerprint = _digest(
                request.method, request.url.path, request.url.query, await request.body()
            )
            in_flight: set[tuple[str, str]] = request.app.state.in_flight
            if (principal.tenant, slot) in in_flight:
                raise ConflictError("a request with this Idempotency-Key is in flight")
            in_flight.add((principal.tenant, slot))
            try:
                stored = await store.find(slot)
                if stored is not None:
                    if stored.fingerprint != fingerprint:
                        raise ValidationError(
                            "this Idempotency-Key was used for a different request", field=HEADER
                        )
                    return Response(
                        stored.body,
                        status_code=stored.status,
                        media_type=stored.media_type,
                        headers={**stored.headers, REPLAYED: "true"},
                    )
                response = await handler(request)
                if 200 <= response.status_code < 300:
                    await store.save(
                        slot,
                        StoredResponse(
                            fingerprint=fingerprint,
                            status=response.status_code,
                            body=bytes(response.body).decode(),
                            media_type=response.media_type or "application/json",
                            headers={
                                h: response.headers[h] for h in _KEPT if h in response.headers
                            },
                        ),
                    )
                return response
            finally:
                in_flight.discard((principal.tenant, slot))

        return idempotent
