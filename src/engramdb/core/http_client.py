"""``JsonEndpoint``: what Engram's clients of remote JSON endpoints (chat, embeddings, rerank)
share — one ``httpx`` client, headers with an optional bearer key, a POST retried under a
``RetryPolicy`` whose failures become the client's own error type (its ``unavailable`` type
once the retries are spent), and the checks on an answer's JSON body."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Self

import httpx

from engramdb.core.errors import EngramRuntimeError, ModelUnavailableError
from engramdb.core.http_errors import post_json
from engramdb.core.retry import RetryPolicy, retrying


class JsonEndpoint:
    """Posts JSON to one URL and reads JSON answers.

    Args:
        url: the full endpoint URL.
        error: the error type every failure becomes (``details``: ``url``, ``retryable``,
            ``status_code`` when the server answered).
        unavailable: the error type a retryable failure becomes once ``retry`` gives up.
        retry: how a retryable failure (timeout, connection, 408/409/429, 5xx) is retried.
        what: names the request in messages ("chat", "embeddings", "rerank").
        timeout: seconds (or an ``httpx.Timeout``) per request.
        api_key: sent as ``Authorization: Bearer …``; ``None`` sends no such header.
        headers: extra headers for every request.
        client: an ``httpx.AsyncClient`` to use; it stays the caller's to close. Without one
            the endpoint creates its own on first use and closes it in ``aclose()``.
    """

    def __init__(
        self,
        url: str,
        *,
        error: type[EngramRuntimeError],
        unavailable: type[ModelUnavailableError],
        what: str,
        retry: RetryPolicy,
        timeout: float | httpx.Timeout,
        api_key: str | None = None,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._url = url
        self._error = error
        self._unavailable = unavailable
        self._retry = retry
        self._what = what
        self._timeout = timeout if isinstance(timeout, httpx.Timeout) else httpx.Timeout(timeout)
        self._headers = dict(headers or {})
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._client = client
        self._owns_client = client is None

    @property
    def url(self) -> str:
        """The full endpoint URL requests go to."""
        return self._url

    @property
    def retry(self) -> RetryPolicy:
        """How retryable failures are retried."""
        return self._retry

    async def _post(
        self, payload: dict[str, Any], *, retry: RetryPolicy | None = None
    ) -> httpx.Response:
        """The answer to ``payload``, retried under ``retry`` (default: the endpoint's)."""
        if self._client is None:
            self._client = httpx.AsyncClient()
            self._owns_client = True
        client = self._client

        async def once() -> httpx.Response:
            return await post_json(
                client,
                self._url,
                payload,
                headers=self._headers,
                http_timeout=self._timeout,
                error=self._error,
                what=self._what,
            )

        return await retrying(
            once, retry or self._retry, unavailable=self._unavailable, what=self._what
        )

    def _malformed(
        self, response: httpx.Response, reason: str, **details: Any
    ) -> EngramRuntimeError:
        """The error for an answer that does not say what the protocol promises."""
        return self._error(
            f"{self._what} endpoint {self._url} sent a malformed answer: {reason}",
            url=self._url,
            status_code=response.status_code,
            **details,
        )

    def _body(self, response: httpx.Response, **details: Any) -> Any:
        """The answer's JSON body."""
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise self._malformed(response, "not JSON", **details) from exc

    def _indexed(
        self, response: httpx.Response, key: str, expected: int, noun: str
    ) -> dict[int, dict[str, Any]]:
        """The objects listed under ``key`` by their ``index``: exactly one for each of
        ``0 .. expected - 1``, in any order (``noun`` names them in messages)."""
        body = self._body(response)
        rows = body.get(key) if isinstance(body, dict) else None
        if not isinstance(rows, list) or len(rows) != expected:
            count = len(rows) if isinstance(rows, list) else "no"
            raise self._malformed(response, f"{count} {noun}s in '{key}' for {expected} inputs")
        by_index: dict[int, dict[str, Any]] = {}
        for row in rows:
            index = row.get("index") if isinstance(row, dict) else None
            if not isinstance(index, int) or not 0 <= index < expected or index in by_index:
                raise self._malformed(
                    response, f"{noun} index {index!r} is missing, out of range or repeated"
                )
            by_index[index] = row
        return by_index

    async def aclose(self) -> None:
        """Close the HTTP client if this endpoint created it."""
        client, self._client = self._client, None
        if client is not None and self._owns_client:
            await client.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
