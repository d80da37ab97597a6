"""``OpenAIEmbedder``: an ``Embedder`` over any OpenAI-compatible ``/embeddings`` endpoint.

Speaks the common protocol (OpenAI, Azure-style gateways, vLLM, Ollama, LiteLLM, …)::

    POST {base_url}/embeddings
    Authorization: Bearer {api_key}
    {"model": "...", "input": ["text", ...]}
    -> {"data": [{"index": 0, "embedding": [...]}, ...]}

Rows are put back in input order by their ``index`` and L2-normalised, whatever the server
does. A busy or flaky server (429, 5xx, timeouts, refused connections) is retried under the
embedder's ``RetryPolicy``, honouring ``Retry-After``; once it gives up the failure is an
``EmbedderUnavailableError`` (writes then store their memories and embed them later). Every
other failure (an error status such as 401, a malformed body) becomes an ``EmbedderError`` at
this boundary, with ``status_code`` when the server answered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import numpy as np

from engramdb.core.errors import EmbedderError, EmbedderUnavailableError
from engramdb.core.http_client import JsonEndpoint
from engramdb.core.retry import RetryPolicy
from engramdb.index.embedder import FloatArray, check_texts, empty_matrix, l2_normalize

DEFAULT_BASE_URL = "https://api.openai.com/v1"
# OpenAI accepts up to 2,048 inputs a request; smaller requests keep each one well under the
# server's token-per-request limit for chat-length texts and retry cheaply.
DEFAULT_BATCH_SIZE = 128
DEFAULT_TIMEOUT = httpx.Timeout(30.0, connect=5.0)
#: A write waits this long at most for a busy server before storing without its vector.
DEFAULT_RETRY = RetryPolicy(attempts=6, base_delay_s=0.5, max_delay_s=8.0, max_elapsed_s=30.0)


class OpenAIEmbedder(JsonEndpoint):
    """Embeds texts through an OpenAI-compatible embeddings endpoint.

    Args:
        model: the model name the server expects, e.g. ``text-embedding-3-small``.
        dimensions: length of the vectors the model returns (1536 for text-embedding-3-small);
            every answer is checked against it.
        base_url: the API root; ``/embeddings`` is appended.
        api_key: sent as ``Authorization: Bearer …``; ``None`` sends no such header (local
            servers often need none).
        batch_size: texts per request; requests of one call are sent one after another.
        timeout: seconds (or an ``httpx.Timeout``) per request.
        send_dimensions: also send ``dimensions`` in the request, for models that can shorten
            their vectors (text-embedding-3-*). Off by default: other servers reject it.
        headers: extra headers for every request.
        client: an ``httpx.AsyncClient`` to use; it stays the caller's to close. Without one
            the embedder creates its own on first use and closes it in ``aclose()``.
        retry: how a busy or unreachable server is retried before the request gives up.

    Raises:
        ValueError: a setting is out of range.
    """

    def __init__(
        self,
        model: str,
        *,
        dimensions: int,
        base_url: str = DEFAULT_BASE_URL,
        api_key: str | None = None,
        batch_size: int = DEFAULT_BATCH_SIZE,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        send_dimensions: bool = False,
        headers: Mapping[str, str] | None = None,
        client: httpx.AsyncClient | None = None,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        if not model:
            raise ValueError("model must not be empty")
        if dimensions < 1:
            raise ValueError("dimensions must be at least 1")
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        super().__init__(
            base_url.rstrip("/") + "/embeddings",
            error=EmbedderError,
            unavailable=EmbedderUnavailableError,
            what="embeddings",
            retry=retry,
            timeout=timeout,
            api_key=api_key,
            headers=headers,
            client=client,
        )
        self._model = model
        self._dimensions = dimensions
        self._batch_size = batch_size
        self._send_dimensions = send_dimensions

    @property
    def model_id(self) -> str:
        """The model name, with ``@dimensions`` when the request shortens the vectors."""
        if self._send_dimensions:
            return f"{self._model}@{self._dimensions}"
        return self._model

    @property
    def dimensions(self) -> int:
        """Length of every returned vector."""
        return self._dimensions

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts`` with as many requests as ``batch_size`` requires.

        Raises:
            InvalidValueError: an item of ``texts`` is not a string.
            EmbedderUnavailableError: the server stayed busy or unreachable through every retry.
            EmbedderError: the server answered an error status that retrying cannot fix
                (``status_code`` in ``details``) or a malformed answer.
        """
        wanted = check_texts(texts)
        if not wanted:
            return empty_matrix(self._dimensions)
        batches = [
            await self._request(wanted[start : start + self._batch_size])
            for start in range(0, len(wanted), self._batch_size)
        ]
        return l2_normalize(np.concatenate(batches, axis=0))

    async def embed_one(self, text: str) -> FloatArray:
        """Embed one text; returns shape ``(dimensions,)``."""
        matrix = await self.embed([text])
        row: FloatArray = matrix[0]
        return row

    async def _request(self, texts: list[str]) -> FloatArray:
        payload: dict[str, Any] = {"model": self._model, "input": texts}
        if self._send_dimensions:
            payload["dimensions"] = self._dimensions
        response = await self._post(payload)
        rows = self._indexed(response, "data", len(texts), "row")
        try:
            matrix = np.array([rows[i].get("embedding") for i in range(len(texts))], np.float32)
        except (TypeError, ValueError) as exc:
            raise self._malformed(response, "an embedding is not a list of numbers") from exc
        if matrix.shape != (len(texts), self._dimensions):
            raise self._malformed(
                response, f"vectors of shape {matrix.shape[1:]}, expected ({self._dimensions},)"
            )
        if not np.isfinite(matrix).all():
            raise self._malformed(response, "an embedding holds NaN or infinity")
        return matrix
