"""Checks every write passes before anything is stored.

Values and metadata are stored as JSON, so they are normalised by one JSON round trip here:
what a write returns is exactly what a later read returns (tuples come back as lists).

Both backends accept the same inputs: a string anywhere (key, scope, value, metadata, query)
holding a NUL character or a lone surrogate is refused, since PostgreSQL cannot store the
first and no UTF-8 text can hold the second; a value nested deeper than ``MAX_JSON_DEPTH`` is
refused before any recursive code (JSON encoders, Pydantic) sees it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel

from engramdb.core.errors import (
    InvalidKeyError,
    InvalidValueError,
    ValidationError,
    ValueTooLargeError,
)

MAX_KEY_CHARS = 512
DEFAULT_MAX_VALUE_BYTES = 1_048_576
MAX_METADATA_BYTES = 65_536
#: A hundred years.
MAX_TTL_MS = 100 * 365 * 24 * 3600 * 1000
#: How deep a value or metadata may nest (far beyond any real record, far below the
#: interpreter's recursion limit).
MAX_JSON_DEPTH = 100
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
#: What the tree walk descends into.
_CONTAINERS = (dict, list, tuple)
_UNSTORABLE_WHY = "a NUL character or a lone surrogate, which no backend stores"
_KEY = re.compile(r"^[^\x00-\x1f\x7f\s](?:[^\x00-\x1f\x7f]*[^\x00-\x1f\x7f\s])?$")
_CONTENT_TYPE = re.compile(r"^[a-z][a-z0-9_.-]{0,63}$")
#: The same rules as regular expressions, for schemas that document them (OpenAPI).
KEY_PATTERN = _KEY.pattern
CONTENT_TYPE_PATTERN = _CONTENT_TYPE.pattern


def validate_key(key: object) -> str:
    """Return ``key`` if it is a valid memory key, else raise ``InvalidKeyError``.

    A key is 1-512 characters with no control characters and no whitespace at either end.
    """
    if not isinstance(key, str):
        raise InvalidKeyError(f"key must be a string, got {type(key).__name__}")
    if not key:
        raise InvalidKeyError("key must not be empty")
    if len(key) > MAX_KEY_CHARS:
        raise InvalidKeyError(
            f"key is {len(key)} characters; the limit is {MAX_KEY_CHARS}", length=len(key)
        )
    if not _KEY.fullmatch(key):
        raise InvalidKeyError(
            f"key {key!r} has control characters or surrounding whitespace", key=key
        )
    if not key.isascii() and _UNSTORABLE.search(key):
        raise InvalidKeyError(f"key {key!r} holds {_UNSTORABLE_WHY}", key=ascii(key))
    return key


def _has_nul(text: str) -> bool:
    return "\x00" in text  # a memchr: far faster than any regular expression


def _is_unstorable(text: str) -> bool:
    # An ASCII string (a flag CPython keeps) cannot hold a surrogate.
    return "\x00" in text if text.isascii() else _UNSTORABLE.search(text) is not None


def check_text(text: str, *, what: str, error: type[ValidationError] = InvalidValueError) -> str:
    """Return ``text`` unless it holds a NUL character or a lone surrogate (``error``)."""
    if _is_unstorable(text):
        raise error(f"{what} holds {_UNSTORABLE_WHY}", field=what)
    return text


def parse_json(text: str, *, what: str = "value") -> Any:
    """``text`` parsed as JSON, or an ``InvalidValueError`` (malformed, or nested so deep the
    parser gave up: it recurses). Check the result with ``check_json_tree`` before use."""
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _nesting(text) > MAX_JSON_DEPTH:
        # Refused before parsing: the parser recurses, and a RecursionError deep inside it
        # can leave the interpreter printing errors from its hooks on the way out.
        raise InvalidValueError(f"{what} nests deeper than {MAX_JSON_DEPTH} levels", field=what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidValueError(f"{what} is not valid JSON: {exc.msg}", field=what) from exc
    except RecursionError:
        # from None: the chained traceback would be as deep as the input.
        raise InvalidValueError(
            f"{what} nests deeper than {MAX_JSON_DEPTH} levels", field=what
        ) from None


def _nesting(text: str) -> int:
    """The deepest bracket nesting of JSON ``text`` (brackets inside strings not counted)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def check_json_tree(
    value: Any, *, what: str = "value", max_depth: int = MAX_JSON_DEPTH, surrogates: bool = False
) -> None:
    """Refuse ``value`` if it nests deeper than ``max_depth`` or a string in it (a dict key
    too) holds a NUL character, or with ``surrogates`` a lone surrogate. Iterative, so any depth
    is refused without recursion. Without ``surrogates``, lone surrogates are left to the UTF-8
    encoding that follows (``json_text``: one pass over the text)."""
    unstorable = _is_unstorable if surrogates else _has_nul
    if isinstance(value, str):
        if unstorable(value):
            raise InvalidValueError(f"{what} holds {_UNSTORABLE_WHY}", field=what)
        return
    # Containers wait on the stack with their depth; strings are checked as they are met.
    stack: list[tuple[Any, int]] = [(value, 0)] if isinstance(value, _CONTAINERS) else []
    while stack:
        node, depth = stack.pop()
        if depth >= max_depth:
            raise InvalidValueError(f"{what} nests deeper than {max_depth} levels", field=what)
        if isinstance(node, dict):
            for name in node:
                if isinstance(name, str) and unstorable(name):
                    raise InvalidValueError(f"{what} holds {_UNSTORABLE_WHY}", field=what)
            items: Any = node.values()
        else:
            items = node
        for item in items:
            if isinstance(item, str):
                if unstorable(item):
                    raise InvalidValueError(f"{what} holds {_UNSTORABLE_WHY}", field=what)
            elif isinstance(item, _CONTAINERS):
                stack.append((item, depth + 1))


def model_value(model: BaseModel, *, what: str, exclude: set[str] | None = None) -> dict[str, Any]:
    """``model`` as the JSON data a write stores, or an ``InvalidValueError``: checked before
    Pydantic's JSON mode, which would store a lone surrogate as U+FFFD without a word."""
    check_json_tree(model.model_dump(exclude=exclude), what=what, surrogates=True)
    return model.model_dump(mode="json", exclude=exclude)


def validate_content_type(content_type: object) -> str:
    """Return ``content_type`` if it is a lowercase identifier of at most 64 characters."""
    if not isinstance(content_type, str) or not _CONTENT_TYPE.fullmatch(content_type):
        raise InvalidValueError(
            f"content_type must be a lowercase identifier like 'fact', got {content_type!r}",
            field="content_type",
        )
    return content_type


def validate_ttl(ttl_ms: object) -> int | None:
    """Return ``ttl_ms`` if it is ``None`` or a positive integer of milliseconds, at most
    ``MAX_TTL_MS`` (an expiry time must stay a representable date)."""
    if ttl_ms is None:
        return None
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 < ttl_ms <= MAX_TTL_MS:
        raise InvalidValueError(
            f"ttl_ms must be a positive integer up to {MAX_TTL_MS}, got {ttl_ms!r}",
            field="ttl_ms",
        )
    return ttl_ms


def json_text(
    value: Any, *, what: str = "value", max_depth: int = MAX_JSON_DEPTH
) -> tuple[str, int]:
    """``value`` serialised canonically and the size of that text in UTF-8, or an
    ``InvalidValueError`` (see ``check_json_tree``)."""
    check_json_tree(value, what=what, max_depth=max_depth)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidValueError(f"{what} is not JSON-representable: {exc}", field=what) from exc
    try:
        return text, len(text.encode())
    except UnicodeEncodeError as exc:
        raise InvalidValueError(f"{what} holds {_UNSTORABLE_WHY}", field=what) from exc


def to_json(value: Any, *, what: str = "value") -> str:
    """Serialise ``value`` canonically, or raise ``InvalidValueError``."""
    return json_text(value, what=what)[0]


def normalize_value(value: Any, *, max_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> tuple[Any, str]:
    """The stored form of ``value`` and its JSON text, or a typed error.

    Raises:
        InvalidValueError: ``value`` is ``None`` or not JSON-representable.
        ValueTooLargeError: its JSON form is larger than ``max_bytes``.
    """
    if value is None:
        raise InvalidValueError("value must not be None; delete the key instead", field="value")
    text, size = json_text(value)
    if size > max_bytes:
        raise ValueTooLargeError(
            f"value is {size} bytes as JSON; the limit is {max_bytes}", size=size, limit=max_bytes
        )
    return json.loads(text), text


def normalize_metadata(metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The stored form of ``metadata``: a JSON object with string keys, at most 64 KiB."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict) or not all(isinstance(k, str) for k in metadata):
        raise InvalidValueError("metadata must be a dict with string keys", field="metadata")
    text, size = json_text(metadata, what="metadata")
    if size > MAX_METADATA_BYTES:
        raise ValueTooLargeError(
            f"metadata is larger than {MAX_METADATA_BYTES} bytes as JSON", field="metadata"
        )
    loaded: dict[str, Any] = json.loads(text)
    return loaded
