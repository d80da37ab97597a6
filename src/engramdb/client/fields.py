"""Request bodies from keyword arguments, shared by every part of the client."""

from __future__ import annotations

from datetime import datetime
from typing import Any


def given(**fields: Any) -> dict[str, Any]:
    """The keyword arguments that were given (``None`` means "leave as it is"), times as
    ISO 8601 text."""
    return {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in fields.items()
        if value is not None
    }
