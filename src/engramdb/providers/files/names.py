"""Which names may become part of a memory file's path or a block heading.

Scope levels and categories name folders and files; keys name blocks inside a file. None of
them may lead out of the provider's root, so each is refused (``UnsafePathError``, before
anything is written) unless it is already in Unicode NFKC form (a name that normalises to
something else could look like one file and open another), holds no path separator, NUL,
control, format (bidi overrides such as U+202E, zero-width joiners), surrogate, private-use or
unassigned character, and is not ``.`` or ``..``. Folder and file names may not start with a
dot either: the provider keeps its own state in a dot-folder.
"""

from __future__ import annotations

import unicodedata

from engramdb.core.errors import UnsafePathError

#: Unicode categories no name may hold: controls, format characters (bidi overrides,
#: zero-width characters), surrogates, private use, unassigned, line and paragraph separators.
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp"})
_SEPARATORS = frozenset("/\\\x00")
MAX_COMPONENT_BYTES = 200


def _problem(name: str) -> str | None:
    if not name:
        return "is empty"
    if unicodedata.normalize("NFKC", name) != name:
        return "is not in NFKC normal form"
    if any(ch in _SEPARATORS for ch in name):
        return "holds a path separator or NUL"
    if name in (".", ".."):
        return "is a relative path"
    for ch in name:
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            return f"holds the character U+{ord(ch):04X} ({unicodedata.category(ch)})"
    return None


def check_key(key: str) -> str:
    """``key`` if it may name a block of a memory file, else ``UnsafePathError``."""
    problem = _problem(key)
    if problem is not None:
        raise UnsafePathError(f"key {key!r} {problem}", key=key)
    return key


def check_component(kind: str, name: str) -> str:
    """``name`` if it may name a folder or file under the root, else ``UnsafePathError``.

    ``kind`` says what the name is (``tenant``, ``user``, ``category``) in the error.
    """
    if not isinstance(name, str):
        raise UnsafePathError(f"{kind} must be a string", field=kind)
    problem = _problem(name)
    if problem is None and name.startswith("."):
        problem = "starts with a dot"
    if problem is None and len(name.encode()) > MAX_COMPONENT_BYTES:
        problem = f"is longer than {MAX_COMPONENT_BYTES} bytes"
    if problem is not None:
        raise UnsafePathError(f"{kind} {name!r} {problem}", field=kind, value=name)
    return name
