"""How a store item's namespace and key become one Engram record key, and back.

Every label and the key are percent-encoded (so none holds a ``/``, whitespace or a control
character) and joined with ``/``: ``("users", "alice")`` / ``"prefs"`` is
``users/alice/prefs``. The items of a namespace and of every namespace below it share the
record-key prefix ``users/alice/``, so a namespace prefix is a key-range scan.
"""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote, unquote

from engramdb.core.errors import InvalidKeyError

_SEPARATOR = "/"


def _encode(part: str) -> str:
    try:
        return quote(part, safe="")
    except UnicodeEncodeError as exc:  # a lone surrogate is no text a database can store
        raise InvalidKeyError(
            f"store namespace labels and keys must be valid Unicode text, got {part!r}"
        ) from exc


def namespace_prefix(namespace: Sequence[str]) -> str:
    """The record-key prefix of every item in ``namespace`` or below it (``""`` for all)."""
    return "".join(_encode(label) + _SEPARATOR for label in namespace)


def record_key(namespace: Sequence[str], key: str) -> str:
    """The record key of item ``key`` in ``namespace``."""
    return namespace_prefix(namespace) + _encode(key)


def split_record_key(encoded: str) -> tuple[tuple[str, ...], str]:
    """The namespace and key a record key stands for (inverse of :func:`record_key`)."""
    *labels, key = encoded.split(_SEPARATOR)
    return tuple(unquote(label) for label in labels), unquote(key)
