"""The one place where errors become HTTP answers.

``STATUS`` maps the error tree to status codes, most specific first; every answer has the
``ErrorBody`` shape (``error``, ``message``, ``details``), whatever raised it: an
``EngramError`` from the engine, FastAPI's request validation, Starlette's routing (404,
405), or a bug (500, with nothing of the exception in the body).
"""

from __future__ import annotations

import logging
import math
from typing import Any

from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from engramdb.core.errors import (
    AuthenticationError,
    ConflictError,
    DuplicateProviderError,
    EngramError,
    EngramRuntimeError,
    EntityNotFoundError,
    NotFoundError,
    PermissionDeniedError,
    ProviderNotFoundError,
    RecallError,
    RelationNotFoundError,
    StorageError,
    UsageError,
    ValidationError,
    ValueTooLargeError,
)
from engramdb.service.models import ErrorBody

log = logging.getLogger("engramdb.service")

#: Error class → HTTP status, most specific first (the first ``isinstance`` match wins).
STATUS: tuple[tuple[type[EngramError], int], ...] = (
    (AuthenticationError, 401),
    (PermissionDeniedError, 403),
    (NotFoundError, 404),
    (EntityNotFoundError, 404),
    (RelationNotFoundError, 404),
    (ProviderNotFoundError, 404),
    (ConflictError, 409),
    (DuplicateProviderError, 409),
    (ValueTooLargeError, 413),
    (ValidationError, 422),
    (UsageError, 400),
    (EngramRuntimeError, 503),
)

#: The error codes of HTTP statuses raised by routing rather than by Engram.
_HTTP_CODES = {404: "not_found", 405: "method_not_allowed"}

#: What the OpenAPI schema lists for every operation.
ERROR_RESPONSES: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorBody, "description": description}
    for status, description in (
        (400, "The request is wrong in a way no other status names"),
        (401, "No credentials, or credentials that do not verify"),
        (403, "Valid credentials without the right to this request"),
        (404, "No such resource"),
        (
            409,
            "The id is taken, the resource is no longer the If-Match version, or a request "
            "with this idempotency key is in flight",
        ),
        (413, "The request body or a value is too large"),
        (422, "The request failed validation; nothing was written"),
        (
            503,
            "The storage or a model failed, or the server is too busy to answer in time; "
            "the request may succeed later",
        ),
    )
}
#: A 503 says how long to wait when the server knows: a model server asked for a pause, or
#: every provider of a recall ran out of time.
ERROR_RESPONSES[503]["headers"] = {
    "Retry-After": {
        "description": "Seconds to wait before sending the request again",
        "schema": {"type": "string", "pattern": "^[0-9]+$"},
    }
}


def status_of(exc: EngramError) -> int:
    """The HTTP status of an Engram error."""
    for kind, status in STATUS:
        if isinstance(exc, kind):
            return status
    return 500


#: What a storage failure may tell a caller: its driver's words name the database's user,
#: host, database or file, which are the operator's to read (in the log), not the caller's.
_STORAGE_DETAILS = frozenset({"sqlstate", "waited_s"})
STORAGE_MESSAGE = "the storage failed to answer; the request may succeed later"


def _names(kind: type[EngramError]) -> frozenset[str]:
    return frozenset({kind.__name__}).union(*(_names(sub) for sub in kind.__subclasses__()))


_STORAGE_ERRORS = _names(StorageError)


def public_failure(failure: dict[str, str]) -> dict[str, str]:
    """A recall's provider failure as a caller may see it (a storage failure's own words
    are replaced, as for ``StorageError`` answers)."""
    if failure.get("error") in _STORAGE_ERRORS:
        return {**failure, "message": STORAGE_MESSAGE}
    return failure


def _public(exc: EngramError) -> tuple[str, dict[str, Any]]:
    """The message and details of ``exc`` that its answer may carry."""
    if isinstance(exc, StorageError):
        details = {k: v for k, v in exc.details.items() if k in _STORAGE_DETAILS}
        return STORAGE_MESSAGE, details
    failures = exc.details.get("failures")
    if isinstance(exc, RecallError) and isinstance(failures, list):
        shown = [public_failure(f) for f in failures]
        if shown != failures:  # the message quotes each failure: say less
            return "recall failed in every provider it asked", {**exc.details, "failures": shown}
    return exc.message, exc.details


def error_response(exc: EngramError) -> JSONResponse:
    """The answer to an Engram error."""
    status = status_of(exc)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    wait = exc.details.get("retry_after_s")
    if status == 503 and isinstance(wait, int | float) and not isinstance(wait, bool):
        # A model server asked for a pause: pass its wait on to our own caller.
        headers["Retry-After"] = str(max(0, math.ceil(wait)))
    message, details = _public(exc)
    body = ErrorBody(error=exc.code, message=message, details=jsonable_encoder(details))
    if status >= 500:
        log.warning("request failed: %s", exc.message)
    return JSONResponse(body.model_dump(), status_code=status, headers=headers)


async def _engram(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, EngramError)
    return error_response(exc)


async def _validation(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", "")), "type": e.get("type", "")}
        for e in exc.errors()
    ]
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    where = ".".join(str(part) for part in first["loc"])
    body = ErrorBody(
        error=ValidationError.code,
        message=f"{where}: {first['msg']}" if where else str(first["msg"]),
        details={"errors": errors},
    )
    return JSONResponse(body.model_dump(), status_code=422)


async def _http(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    body = ErrorBody(error=_HTTP_CODES.get(exc.status_code, "http_error"), message=str(exc.detail))
    return JSONResponse(body.model_dump(), status_code=exc.status_code, headers=exc.headers)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    body = ErrorBody(error="internal_error", message="the server failed to answer this request")
    return JSONResponse(body.model_dump(), status_code=500)


def install(app: FastAPI) -> None:
    """Route every kind of error of ``app`` through this module."""
    app.add_exception_handler(EngramError, _engram)
    app.add_exception_handler(RequestValidationError, _validation)
    app.add_exception_handler(StarletteHTTPException, _http)
    app.add_exception_handler(Exception, _unexpected)
