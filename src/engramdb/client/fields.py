"""Request bodies from keyword arguments, shared by every part of the client."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlencode


def given(**fields: Any) -> dict[str, Any]:
    """The keyword arguments that were given (``None`` means "leave as it is"), times as
    ISO 8601 text."""
    return {
        name: value.isoformat() if isinstance(value, datetime) else value
        for name, value in fields.items()
        if value is not None
    }


def segment(value: str) -> str:
    """``value`` as one segment of a URL path: every character that means something in a
    URL escaped, and a bare ``.`` or ``..`` too, so that no key or id reaches another path
    (``a?b``, ``x/../plans/p1`` and ``..`` are themselves). A lone surrogate travels as
    its UTF-8-style bytes, for the service to refuse as it refuses one in a body."""
    escaped = quote(value, safe="", errors="surrogatepass")
    return escaped.replace(".", "%2E") if escaped in (".", "..") else escaped


def raw_param(raw: bool) -> dict[str, str]:
    """The query parameter asking for memories as stored, without redaction (only sent when
    asked for, so that readers' requests stay valid)."""
    return {"raw": "true"} if raw else {}


def query_string(params: Mapping[str, Any]) -> str:
    """``params`` as a URL query, as httpx writes one (``None`` left out, a list repeated,
    booleans as ``true`` / ``false``), but with a lone surrogate carried as its UTF-8-style
    bytes, for the service to refuse as it refuses one in a body (httpx cannot encode it)."""
    pairs = [
        (name, ("true" if one else "false") if isinstance(one, bool) else str(one))
        for name, value in params.items()
        for one in (value if isinstance(value, list | tuple) else [value])
        if one is not None
    ]
    return urlencode(pairs, errors="surrogatepass")
