"""How the HTTP clients of OpenAI-compatible endpoints (embeddings, chat) send a request and
read an error answer: the server's own reason, and whether the same request may succeed
later."""

from __future__ import annotations

import json
from typing import Any

import httpx

from engramdb.core.errors import EngramRuntimeError
from engramdb.core.retry import parse_retry_after

#: Statuses worth retrying besides every 5xx: timeout, conflict, rate limit.
RETRYABLE_STATUSES = frozenset({408, 409, 429})
_EXCERPT = 300


def is_retryable(status: int) -> bool:
    """Whether a request that got ``status`` may succeed if sent again."""
    return status in RETRYABLE_STATUSES or status >= 500


def error_reason(body: str, reason_phrase: str) -> str:
    """The server's reason for an error status, from its body, short enough for a message."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return body[:_EXCERPT] or reason_phrase
    # OpenAI's shape is {"error": {"message": ...}}; some servers send {"error": "..."}.
    error = data.get("error") if isinstance(data, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])[:_EXCERPT]
    if isinstance(error, str):
        return error[:_EXCERPT]
    return body[:_EXCERPT]


async def post_json(
    client: httpx.AsyncClient,
    url: str,
    payload: dict[str, Any],
    *,
    headers: dict[str, str],
    http_timeout: httpx.Timeout,
    error: type[EngramRuntimeError],
    what: str,
) -> httpx.Response:
    """POST ``payload`` to an OpenAI-compatible endpoint; every failure (timeout, connection,
    error status) becomes ``error`` with ``url``, ``retryable`` and, when the server answered,
    ``status_code`` (and ``retry_after_s`` when it sent ``Retry-After``) in its details.
    ``what`` names the request in messages ("chat")."""
    try:
        response = await client.post(url, json=payload, headers=headers, timeout=http_timeout)
    except httpx.TimeoutException as exc:
        raise error(
            f"{what} request to {url} timed out ({type(exc).__name__})", url=url, retryable=True
        ) from exc
    except httpx.HTTPError as exc:
        raise error(f"{what} request to {url} failed: {exc}", url=url, retryable=True) from exc
    if response.status_code >= 400:
        details: dict[str, Any] = {
            "url": url,
            "status_code": response.status_code,
            "retryable": is_retryable(response.status_code),
        }
        wait = parse_retry_after(response.headers.get("Retry-After"))
        if wait is not None:
            details["retry_after_s"] = wait
        raise error(
            f"{what} endpoint {url} answered {response.status_code}: "
            f"{error_reason(response.text, response.reason_phrase)}",
            **details,
        )
    return response
