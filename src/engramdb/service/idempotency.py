"""Idempotent writes: a POST, PUT or DELETE sent with an ``Idempotency-Key`` header (1-255
printable ASCII characters) is done once; sending it again (same key, same caller, same
request) replays the first answer, marked ``Idempotent-Replayed: true``.

A key is checked after the caller's access, never before: the request must be one its
credentials may make (their tenant, their user, a writer's role for a write), else it is
refused (401, 403) without looking the key up. Keys belong to the holder of the credentials
(an API key, a JWT's role and subject) and the scope it acts in: the same key sent by
anyone else is a new request of theirs, run if they may run it, and never answered with
another's stored answer.

Answers are kept in the database (``StoredResponses``), so a retry that reaches another
instance replays too. The same key with a different request is refused (422), and a retry
that arrives while the first is still running gets 409, whichever instance it reaches: the
key is claimed in the database before the request runs. Only successful answers are kept:
a refused request wrote nothing, lets go of its claim, and may be retried as it is. A claim
lapses after ``idempotency_lease_s`` (an instance that died mid-request does not hold the
key for ever).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute

from engramdb.core.errors import ConflictError, ValidationError
from engramdb.core.events import new_id
from engramdb.core.scope import Scope
from engramdb.engine import Engine
from engramdb.orchestrator.idempotency import IDEMPOTENCY_SPEC, StoredResponse, StoredResponses
from engramdb.service.auth import request_access, write_access

HEADER = "idempotency-key"
REPLAYED = "Idempotent-Replayed"
MAX_KEY = 255
_KEY = re.compile(rf"[ -~]{{1,{MAX_KEY}}}")
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_SCOPE_HEADERS = ("x-user-id", "x-agent-id", "x-session-id")
#: Answer headers worth keeping for the replay.
_KEPT = ("location",)


def _depends_on(dependant: Dependant, call: Callable[..., Any]) -> bool:
    return dependant.call is call or any(_depends_on(d, call) for d in dependant.dependencies)


def _digest(*parts: bytes | str) -> str:
    """SHA-256 of ``parts``, each ended by a NUL byte; a part's own NUL and SOH bytes are
    escaped first (SOH as SOH STX, NUL as SOH ETX), so that no two lists of parts hash alike
    (a path may hold an escaped NUL, a body anything). Parts without either byte, as every
    header, URL query and JSON body, hash unescaped: stored answers keep their keys."""
    hashed = hashlib.sha256()
    for part in parts:
        raw = part.encode() if isinstance(part, str) else part
        hashed.update(raw.replace(b"\1", b"\1\2").replace(b"\0", b"\1\3"))
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
        #: Whether the route asks for a writer (a POST may read: recall, graph search).
        self.writes = _depends_on(self.dependant, write_access)

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
            # Access first: a stored answer is only ever replayed to who may make the request.
            caller = await request_access(request, write=self.writes)
            principal = caller.principal
            engine: Engine = request.app.state.engine
            settings = request.app.state.settings
            store = StoredResponses(
                engine.provider(IDEMPOTENCY_SPEC, Scope(tenant=principal.tenant)),
                ttl_ms=settings.idempotency_ttl_s * 1000,
                lease_ms=settings.idempotency_lease_s * 1000,
                user_id=caller.user,
            )
            # Keys are per holder of the credentials and the scope the request acts in.
            acting = [request.headers.get(h, "") for h in _SCOPE_HEADERS]
            slot = _digest(*principal.identity, *acting, key)
            fingerprint = _digest(
                request.method, request.url.path, request.url.query, await request.body()
            )
            claim_id = new_id()
            held = await store.claim(slot, fingerprint, claim_id)
            if held is not None:
                if held.fingerprint != fingerprint:
                    raise ValidationError(
                        "this Idempotency-Key was used for a different request", field=HEADER
                    )
                if held.pending:
                    raise ConflictError("a request with this Idempotency-Key is in flight")
                return Response(
                    held.body,
                    status_code=held.status,
                    media_type=held.media_type,
                    headers={**held.headers, REPLAYED: "true"},
                )
            try:
                response = await handler(request)
            except BaseException:
                await store.release(slot, claim_id)
                raise
            if not 200 <= response.status_code < 300:
                await store.release(slot, claim_id)
                return response
            await store.save(
                slot,
                StoredResponse(
                    fingerprint=fingerprint,
                    status=response.status_code,
                    body=bytes(response.body).decode(),
                    media_type=response.media_type or "application/json",
                    headers={h: response.headers[h] for h in _KEPT if h in response.headers},
                ),
            )
            return response

        return idempotent
