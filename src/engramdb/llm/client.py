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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import httpx
from pydantic import BaseModel

from engramdb.core.errors import (
    LLMEmptyAnswerError,
    LLMError,
    LLMOutputError,
    LLMUnavailableError,
)
from engramdb.core.http_client import JsonEndpoint
from engramdb.core.retry import RetryPolicy
from engramdb.llm.structured import (
    NEXT_MODE,
    UNSUPPORTED_STATUSES,
    JsonMode,
    UnreadableAnswer,
    correction,
    excerpt,
    read_json,
    request_format,
    with_instructions,
)

__all__ = ["ChatClient", "ChatModel", "LLMConfig"]

M = TypeVar("M", bound=BaseModel)

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
        json_attempts: how many answers ``complete_json`` asks for before it gives up on a
            model whose answers do not fit the schema.

    Raises:
        ValueError: ``base_url`` or ``model`` is empty, or ``timeout_s`` or
            ``json_attempts`` is not positive.
    """

    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 30.0
    retry: RetryPolicy = DEFAULT_RETRY
    json_attempts: int = 3

    def __post_init__(self) -> None:
        if not self.base_url.strip():
            raise ValueError("base_url must not be empty")
        if not self.model.strip():
            raise ValueError("model must not be empty")
        if not self.timeout_s > 0:
            raise ValueError("timeout_s must be positive")
        if self.json_attempts < 1:
            raise ValueError("json_attempts must be at least 1")

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
        # The best way of asking for JSON this server has not refused yet.
        self._json_mode: JsonMode = "json_schema"

    @property
    def config(self) -> LLMConfig:
        """The settings this client was made with."""
        return self._config

    @property
    def json_mode(self) -> JsonMode:
        """How ``complete_json`` asks this server for JSON (it steps down when refused)."""
        return self._json_mode

    async def complete(self, system: str, user: str) -> str:
        """The model's answer to ``user`` under the ``system`` instructions.

        Raises:
            LLMUnavailableError: the server stayed busy or unreachable through every retry.
            LLMEmptyAnswerError: the answer has no text.
            LLMError: the server answered an error status retrying cannot fix
                (``status_code`` in ``details``) or an answer without a message text.
        """
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        response = await self._post(self._payload(messages))
        content = self._content(response)
        if content is None:
            raise self._malformed(
                response, "the first choice has no message content", retryable=False
            )
        if not content.strip():
            raise LLMEmptyAnswerError(
                f"chat model at {self.url} answered with no text", url=self.url, retryable=False
            )
        return content

    async def complete_json(
        self,
        messages: Sequence[Mapping[str, str]],
        *,
        schema: type[M],
        attempts: int | None = None,
    ) -> M:
        """The model's answer to ``messages`` as an instance of ``schema``.

        Asks for JSON against the schema (structured outputs where the server has them),
        reads the answer past reasoning tags, code fences and prose, repairs broken JSON,
        validates it, and asks again (showing the model what was wrong) up to ``attempts``
        times (default ``LLMConfig.json_attempts``).

        Raises:
            LLMEmptyAnswerError: every answer was empty (or reasoning only).
            LLMOutputError: no answer held JSON fitting the schema (``details``: ``attempts``,
                ``reason``, ``excerpt`` of the last answer).
            LLMUnavailableError: the server stayed busy or unreachable through every retry.
            LLMError: the server refused the request or sent a malformed response.
        """
        tries = attempts if attempts is not None else self._config.json_attempts
        if tries < 1:
            raise ValueError("attempts must be at least 1")
        conversation = [dict(m) for m in messages]
        problems: list[UnreadableAnswer] = []
        answer: str | None = None
        for _ in range(tries):
            answer = await self._ask_json(conversation, schema)
            try:
                return read_json(answer, schema)
            except UnreadableAnswer as problem:
                problems.append(problem)
                conversation += correction(answer, problem)
        error = LLMEmptyAnswerError if all(p.empty for p in problems) else LLMOutputError
        reason = problems[-1].reason
        raise error(
            f"chat model at {self.url} gave no usable {schema.__name__} in {tries} "
            f"{'answer' if tries == 1 else 'answers'}: {reason}",
            url=self.url,
            retryable=False,
            attempts=tries,
            reason=reason,
            excerpt=excerpt(answer),
        )

    async def _ask_json(
        self, messages: list[dict[str, str]], schema: type[BaseModel]
    ) -> str | None:
        """One answer asked for as JSON, stepping down to a plainer way of asking while the
        server refuses ``response_format``."""
        while True:
            mode = self._json_mode
            payload = self._payload(with_instructions(messages, mode, schema))
            response_format = request_format(mode, schema)
            if response_format is not None:
                payload["response_format"] = response_format
            try:
                return self._content(await self._post(payload))
            except LLMError as exc:
                plainer = NEXT_MODE[mode]
                if plainer is None or exc.details.get("status_code") not in UNSUPPORTED_STATUSES:
                    raise
                self._json_mode = plainer

    def _payload(self, messages: Sequence[Mapping[str, str]]) -> dict[str, Any]:
        return {"model": self._config.model, "temperature": 0, "messages": list(messages)}

    def _content(self, response: httpx.Response) -> str | None:
        """The first choice's message text (``None`` when the server sent none)."""
        body = self._body(response, retryable=False)
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise self._malformed(response, "no 'choices'", retryable=False)
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise self._malformed(response, "the first choice has no message", retryable=False)
        content = message.get("content")
        if content is not None and not isinstance(content, str):
            raise self._malformed(response, "the message content is not text", retryable=False)
        return content
