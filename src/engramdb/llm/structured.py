"""Structured answers: ask a chat model for JSON that fits a pydantic model, and get exactly
that back — or a typed error, never an empty or half-read result.

Three ways of asking, best first, and the client remembers the best one its server accepts:

- ``json_schema``: OpenAI's structured outputs (``response_format`` with the model's JSON
  schema), which vLLM, llama.cpp's server, Ollama and LiteLLM also speak;
- ``json_object``: JSON mode, the schema given in the instructions;
- ``prompt``: the instructions alone, for servers that reject ``response_format``.

Local models wrap their JSON in reasoning (``<think>…</think>``), code fences and polite prose,
or stop mid-object. ``read_json`` strips the first three and repairs what is left with
``json-repair``; what still does not fit the schema is shown to the model with the reason, and
asked again, a bounded number of times.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticValidationError

__all__ = [
    "JsonMode",
    "UnreadableAnswer",
    "read_json",
    "read_json_value",
    "schema_instructions",
    "strip_reasoning",
]

M = TypeVar("M", bound=BaseModel)
JsonMode = Literal["json_schema", "json_object", "prompt"]
#: Each way of asking, and the one to fall back to when the server rejects it.
NEXT_MODE: dict[JsonMode, JsonMode | None] = {
    "json_schema": "json_object",
    "json_object": "prompt",
    "prompt": None,
}
#: Statuses by which servers refuse a ``response_format`` they do not support.
UNSUPPORTED_STATUSES = frozenset({400, 415, 422, 501})

_REASONING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
_UNCLOSED = re.compile(r"<(think|thinking|reasoning)>", re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)(?:```|$)", re.DOTALL)
_EXCERPT = 200


class UnreadableAnswer(ValueError):
    """An answer holds no JSON that fits the schema; ``empty`` when it holds no text at all."""

    def __init__(self, reason: str, *, empty: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.empty = empty


def strip_reasoning(text: str) -> str:
    """``text`` without the model's reasoning blocks; a reasoning block that never closes
    (the answer was cut off while thinking) leaves nothing."""
    text = _REASONING.sub("", text)
    unclosed = _UNCLOSED.search(text)
    return text[: unclosed.start()] if unclosed else text


def _candidate(text: str) -> str:
    """The part of an answer that should be the JSON: inside its code fence, if it has one."""
    fenced = _FENCE.search(text)
    return fenced.group(1).strip() if fenced else text.strip()


def _decode(text: str) -> Any:
    """The JSON value in ``text``: all of it, the first value in it (prose around it is
    ignored), or, failing both, what ``json-repair`` makes of it."""
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    starts = [i for i in (text.find("{"), text.find("[")) if i >= 0]
    if starts:
        try:
            value, _ = json.JSONDecoder().raw_decode(text, min(starts))
            return value
        except json.JSONDecodeError:
            pass
    from json_repair import repair_json  # only broken answers need it

    repaired = repair_json(text, return_objects=True, skip_json_loads=True)
    if not isinstance(repaired, dict | list) or not repaired:
        raise UnreadableAnswer("no JSON object in the answer")
    return repaired


def read_json_value(answer: str | None) -> Any:
    """The JSON object or array a model's answer holds, after removing reasoning, code fences
    and prose, and repairing broken JSON.

    Raises:
        UnreadableAnswer: the answer is empty or holds no JSON.
    """
    text = _candidate(strip_reasoning(answer or ""))
    if not text:
        raise UnreadableAnswer("the answer is empty", empty=True)
    return _decode(text)


def read_json(answer: str | None, schema: type[M]) -> M:
    """The ``schema`` instance a model's answer holds (see ``read_json_value``).

    Raises:
        UnreadableAnswer: the answer is empty, holds no JSON, or its JSON does not fit.
    """
    value = read_json_value(answer)
    try:
        return schema.model_validate(value)
    except PydanticValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'the value'}: {error['msg']}"
            for error in exc.errors()[:5]
        )
        raise UnreadableAnswer(f"the JSON does not fit the schema ({problems})") from exc


def schema_instructions(schema: type[BaseModel]) -> str:
    """The instruction that asks for one JSON value fitting ``schema``."""
    return (
        "Answer with one JSON object and nothing else: no prose, no code fence. "
        "It must match this JSON schema:\n"
        + json.dumps(schema.model_json_schema(), separators=(",", ":"))
    )


def request_format(mode: JsonMode, schema: type[BaseModel]) -> dict[str, Any] | None:
    """The ``response_format`` of a request in ``mode``."""
    if mode == "json_schema":
        return {
            "type": "json_schema",
            "json_schema": {
                "name": schema.__name__,
                "schema": schema.model_json_schema(),
                # Strict mode needs every field required and no extra keys, which ordinary
                # pydantic models do not declare; validation here is what enforces the schema.
                "strict": False,
            },
        }
    if mode == "json_object":
        return {"type": "json_object"}
    return None


def with_instructions(
    messages: Sequence[Mapping[str, str]], mode: JsonMode, schema: type[BaseModel]
) -> list[dict[str, str]]:
    """``messages`` with the schema spelled out when the server is not given it."""
    asked = [dict(m) for m in messages]
    if mode != "json_schema":
        asked.append({"role": "system", "content": schema_instructions(schema)})
    return asked


def correction(answer: str | None, problem: UnreadableAnswer) -> list[dict[str, str]]:
    """The turns that show the model its unusable answer and ask again."""
    return [
        {"role": "assistant", "content": (answer or "")[:4000]},
        {
            "role": "user",
            "content": f"That answer cannot be used: {problem.reason}. "
            "Answer again with only the JSON object, matching the schema.",
        },
    ]


def excerpt(answer: str | None) -> str:
    """The start of an answer, for error details."""
    return (answer or "")[:_EXCERPT]
