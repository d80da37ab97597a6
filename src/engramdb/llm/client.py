"""``ChatClient``: one-shot chat completions from any OpenAI-compatible endpoint.

Speaks the common protocol (OpenAI, vLLM, Ollama, llama.cpp's server, LiteLLM, …)::

    POST {base_url}/chat/completions
    Authorization: Bearer {api_key}
    {"model": "...", "temperature": 0,
     "messages": [{"role": "system", "content": ...}, {"role": "user", "content": ...}]}
    -> {"choices": [{"message": {"role": "assistant", "content": "..."}}]}

Temperature 0 makes answers as repeatable as the server allows. A busy or flaky server
(429, 5xx, timeouts, refused connections) is retried under ``LLMConfig.retry``, honouring
``Retry-After``; once it gives up the failure is an ``LLMUnavailableError``. Every other
failure (an error status such as 401, a malformed body) becomes an ``LLMError`` at this
boundary, with ``status_code`` when the server answered and ``retryable`` telling whether the
same request may succeed later. The default policy is short: the callers that only polish
(summaries) have a cheap deterministic fallback, which beats making an agent wait.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import httpx

from engramdb.core.errors import LLMError, LLMUnavailableError
from engramdb.core.http_client import JsonEndpoint
from engramdb.core.retry import RetryPolicy

__all__ = ["ChatClient", "ChatModel", "LLMConfig"]

# A server that does not even accept the connection in this time is down, whatever the
# overall timeout allows for a slow generation.
_CONNECT_TIMEOUT_S = 5.0
#: Three tries within ten seconds: enough for a rate limit's short wait, short for an agent.
DEFAULT_RETRY = RetryPolicy(attempts=3, base_delay_s=0.5, max_delay_s=4.0, max_elapsed_s=10.0)


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers a system + user prompt with text; ``ChatClient`` is one."""

    async def complete(self, system: str, user: str) -> str:
        """The model's answer to ``user`` under the ``system`` instructions.

        Raises:
            LLMError: the model could not answer.
        """
        ...


@dataclass(frozen=True)
class LLMConfig:
    """Where and how to reach a chat model.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:11434/v1``; ``/chat/completions`` is appended.
        model: the model name the server expects.
        api_key: sent as ``Authorization: Bearer …``; ``None`` sends no such header (local
            servers often need none). Kept out of ``repr`` so it never reaches a log.
        timeout_s: seconds for the whole request (connecting takes at most 5 of them).
        retry: how a busy or unreachable server is retried (``NO_RETRIES`` tries once).

    Raises:
        ValueError: ``base_url`` or ``model`` is empty, or ``timeout_s`` is not positive.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    retry: RetryPolicy = DEFAULT_RETRY

    def __post_init__(self) -> None:
        if not self.base_url.strip():
            raise ValueError("base_url must not be empty")
        if not self.model.strip():
            raise ValueError("model must not be empty")
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be positive")

    @property
    def url(self) -> str:
        """The full endpoint URL requests go to."""
        return self.base_url.strip().rstrip("/") + "/chat/completions"


class ChatClient(JsonEndpoint):
    """Asks an OpenAI-compatible chat-completions endpoint for one answer at a time.

    Args:
        config: the endpoint, model, key and timeout.
        client: an ``httpx.AsyncClient`` to use; it stays the caller's to close. Without one
            the client creates its own on first use and closes it in ``aclose()``.
    """

    def __init__(self, config: LLMConfig, *, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(
            config.url,
            error=LLMError,
            unavailable=LLMUnavailableError,
            what="chat",
            retry=config.retry,
            timeout=httpx.Timeout(
                config.timeout_s, connect=min(_CONNECT_TIMEOUT_S, config.timeout_s)
            ),
            api_key=config.api_key,
            headers={"Accept": "application/json"},
            client=client,
        )
        self._config = config

    @property
    def config(self) -> LLMConfig:
        """The settings this client was made with."""
        return self._config

    async def complete(self, system: str, user: str) -> str:
        """The model's answer to ``user`` under the ``system`` instructions.

        Raises:
            LLMUnavailableError: the server stayed busy or unreachable through every retry.
            LLMError: the server answered an error status retrying cannot fix
                (``status_code`` in ``details``) or an answer without a message text.
        """
        payload: dict[str, Any] = {
            "model": self._config.model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
        }
        return self._parse(await self._post(payload))

    def _parse(self, response: httpx.Response) -> str:
        body = self._body(response, retryable=False)
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._malformed(response, "no 'choices'", retryable=False)
        message = choices[0].get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if not isinstance(content, str):
            raise self._malformed(
                response, "the first choice has no message content", retryable=False
            )
        return content
