"""What tools answer: memories as plain JSON for a model, redacted by the scope's policy."""

from __future__ import annotations

from typing import Any

from engramdb.core.intent import MemoryItem
from engramdb.engine import ScopedMemory

#: Fields of a remembered item a model has no use for.
_LEFT_OUT = {"score_breakdown"}


def item_json(item: MemoryItem) -> dict[str, Any]:
    """One memory item as JSON, without empty fields."""
    data = item.model_dump(mode="json", exclude_none=True, exclude=_LEFT_OUT)
    return {k: v for k, v in data.items() if v not in ([], {}, False)}


def redacted(memory: ScopedMemory, answer: dict[str, Any]) -> dict[str, Any]:
    """``answer`` with every string in it passed through the scope's redaction policy, so a
    model never reads an email address or card number it was not meant to."""
    clean, _counts = memory.redaction.redact_value(answer)
    assert isinstance(clean, dict)  # a mapping stays a mapping
    return clean
