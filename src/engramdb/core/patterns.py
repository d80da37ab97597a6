"""Regular expressions written by users (procedural rule triggers ``regex:<pattern>``), run by
RE2: its automata take time linear in the text whatever the pattern, so no pattern can stall
the event loop by backtracking (``(a+)+$`` on a run of ``a`` and a ``!`` is one pass).

RE2 has no backreferences and no lookaround; a pattern that needs them, is longer than
``MAX_PATTERN_CHARS`` or would compile to a program over ``_MAX_PROGRAM_BYTES`` is refused
with ``InvalidPatternError`` when it is written. Patterns match case-insensitively.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2

from engramdb.core.errors import InvalidPatternError, InvalidValueError
from engramdb.core.validation import check_text

MAX_PATTERN_CHARS = 512
#: The memory one compiled pattern may take (RE2's default is 8 MiB): a pattern of 512
#: characters that needs more is a repetition bomb, not a trigger.
_MAX_PROGRAM_BYTES = 1 << 20


def _options() -> Any:
    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # a refused pattern is the caller's error, not a log line
    options.max_mem = _MAX_PROGRAM_BYTES
    return options


_OPTIONS = _options()


#: Compiled patterns kept for the next recall: each may hold up to ``_MAX_PROGRAM_BYTES``
#: (its program and the automata built while matching), so the cache is bounded in memory too.
_CACHED = 128


@lru_cache(maxsize=_CACHED)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _OPTIONS)


def compile_pattern(pattern: str) -> Any:
    """The compiled form of a user's ``pattern`` (cached).

    Raises:
        InvalidPatternError: the pattern is too long, holds a NUL character or a lone
            surrogate, does not compile, or needs backreferences or lookaround.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise InvalidPatternError(
            f"pattern is {len(pattern)} characters; the limit is {MAX_PATTERN_CHARS}",
            pattern=pattern[:MAX_PATTERN_CHARS],
            reason="too long",
        )
    try:
        check_text(pattern, what="pattern")
    except InvalidValueError as exc:
        raise InvalidPatternError(
            exc.message, pattern=ascii(pattern), reason="unstorable characters"
        ) from None
    try:
        return _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else "does not compile"
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise InvalidPatternError(
            f"pattern {pattern!r} is not supported: {reason} (backreferences and lookaround "
            "are not available)",
            pattern=pattern,
            reason=str(reason),
        ) from exc


def pattern_search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches anywhere in ``text`` (case-insensitively), in time linear
    in ``text``.

    Raises:
        InvalidPatternError: see ``compile_pattern``.
    """
    # Lone surrogates (text the caller decoded leniently) become U+FFFD: RE2 reads UTF-8.
    return compile_pattern(pattern).search(text.encode("utf-8", "replace")) is not None
