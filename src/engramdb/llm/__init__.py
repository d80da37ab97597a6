"""Chat models Engram can ask for help (abstractive summaries, structured extraction), over
OpenAI-compatible HTTP.

Nothing in Engram needs a model: every caller has a deterministic path to fall back to when
one is not configured or fails (``LLMError``; ``LLMUnavailableError`` when the server stayed
busy through every retry, ``LLMOutputError`` when its answers did not fit the schema).
"""

from engramdb.core.errors import (
    LLMEmptyAnswerError,
    LLMError,
    LLMOutputError,
    LLMUnavailableError,
)
from engramdb.llm.client import ChatClient, ChatModel, LLMConfig

__all__ = [
    "ChatClient",
    "ChatModel",
    "LLMConfig",
    "LLMEmptyAnswerError",
    "LLMError",
    "LLMOutputError",
    "LLMUnavailableError",
]
