"""Free-form forget instructions, translated to the forget grammar by a chat model.

Without a model, ``forget`` reads the grammar and its phrasings in words (``forget_phrases``).
With one, text the exact grammar rejects ("drop what I said about my previous work") is first
sent to the model, whose answer must itself parse; when the model fails or its answer does
not parse, the rule-based reading of the text stands, and text neither reads is refused with
the grammar's own error, so nothing is forgotten by guesswork.
"""

from __future__ import annotations

from engramdb.core.errors import LLMError
from engramdb.llm.client import ChatModel
from engramdb.orchestrator.forget_grammar import (
    GRAMMAR_HELP,
    ForgetInstruction,
    ForgetInstructionError,
    parse_forget,
)

SYSTEM = (
    "You translate a request to forget memories into exactly one instruction of this "
    "grammar, and answer with that instruction alone, nothing else:\n" + GRAMMAR_HELP
)


async def translate_forget(text: str, model: ChatModel | None) -> ForgetInstruction:
    """``text`` parsed by the grammar, else translated by ``model`` and parsed, else read by
    the grammar's phrasings.

    Raises:
        ForgetInstructionError: none of these reads the text.
    """
    if model is None or not isinstance(text, str) or not text.strip():
        return parse_forget(text)
    try:
        return parse_forget(text, phrases=False)  # exact grammar never goes to the model
    except ForgetInstructionError:
        pass
    try:
        answer = await model.complete(SYSTEM, text)
    except LLMError:
        return parse_forget(text)
    # Models like to wrap answers in code fences: take the first line with content.
    lines = [found for line in answer.splitlines() if (found := line.strip().strip("`").strip())]
    try:
        return parse_forget(lines[0]) if lines else parse_forget(text)
    except ForgetInstructionError:
        return parse_forget(text)
