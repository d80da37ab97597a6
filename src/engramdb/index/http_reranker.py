"""``HttpReranker``: a ``Reranker`` over the common ``/rerank`` endpoint.

Speaks the protocol of Cohere, Jina, vLLM and LiteLLM (and of the gateways in front of them)::

    POST {base_url}/rerank
    Authorization: Bearer {api_key}
    {"model": "...", "query": "...", "documents": ["text", ...], "top_n": n}
    -> {"results": [{"index": 0, "relevance_score": 0.93}, ...]}

Results come back best first; they are put back in input order by ``index``. A busy server is
retried briefly (search is waiting, and does without reranking); every failure (transport,
timeout, HTTP status, malformed body) becomes a ``RerankError`` at this boundary, with
``status_code`` when the server answered (``RerankUnavailableError`` once retries gave up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import httpx

from engramdb.core.errors import RerankError, RerankUnavailableError
from engramdb.core.http_client import JsonEndpoint
from engramdb.core.retry import RetryPolicy

DEFAULT_TIMEOUT = httpx.Timeout(10.0, connect=5.0)
#: A search waits this long at most for a busy reranker before keeping its own order.
DEFAULT_RETRY = RetryPolicy(attempts=2, base_delay_s=0.2, max_delay_s=1.0, max_elapsed_s=2.0)


class HttpReranker(JsonEndpoint):
    """Reranks through a ``/rerank`` endpoint.

    Args:
        model: the model name the server expects, e.g. ``BAAI/bge-reranker-v2-m3``.
        base_url: the API root; ``/rerank`` is appended.
        api_key: sent as ``Authorization: Bearer …``; ``None`` sends no such header.
        timeout: seconds (or an ``httpx.Timeout``) per request.
        headers: extra headers for every request.
        client: an ``httpx.AsyncClient`` to use; it stays the caller's to close. Without one
            the reranker creates its own on first use and closes it in ``aclose()``.
        retry: how a busy or unreachable server is retried before the request gives up.

    Raises:
        ValueError: ``model`` or ``base_url`` is empty.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        if not model:
            raise ValueError("model must not be empty")
        if not base_url:
            raise ValueError("base_url must not be empty")
        super().__init__(
            base_url.rstrip("/") + "/rerank",
            error=RerankError,
            unavailable=RerankUnavailableError,
            what="rerank",
            retry=retry,
            timeout=timeout,
            api_key=api_key,
            headers=headers,
            client=client,
        )
        self._model = model

    @property
    def model_id(self) -> str:
        """The model name."""
        return self._model

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance per document, in input order (one request for all of them).

        Raises:
            RerankError: the request failed, timed out, got an error status (``status_code``
                and ``retryable`` in ``details``) or a malformed answer.
        """
        if not documents:
            return []
        payload: dict[str, Any] = {
            "model": self._model,
            "query": query,
            "documents": list(documents),
            "top_n": len(documents),
        }
        response = await self._post(payload)
        results = self._indexed(response, "results", len(documents), "result")
        scores = []
        for index in range(len(documents)):
            score = results[index].get("relevance_score")
            if isinstance(score, bool) or not isinstance(score, int | float):
                raise self._malformed(response, f"relevance_score {score!r} is not a number")
            if not math.isfinite(score):
                raise self._malformed(response, "a relevance_score is NaN or infinity")
            scores.append(float(score))
        return scores
