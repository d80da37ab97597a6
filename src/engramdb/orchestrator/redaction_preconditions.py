"""Preconditions of the default redaction rules: cheap tests of a whole text that prove a
rule cannot replace anything in it (the text, its digits, its words), so the rule's pattern is
not run. Each is derived from its rule's pattern and validator and errs towards running the
rule; a property test compares every rule with and without its precondition."""

from __future__ import annotations

import functools
from collections.abc import Callable

__all__ = [
    "ASCII_FOLDS",
    "digits_at_least",
    "holds",
    "may_assign_secret",
    "may_hold_api_key",
    "names_with_digit",
]

_ASCII_DIGITS = b"0123456789"

# The characters other than A-Z and a-z that ``re.IGNORECASE`` matches to an ASCII letter (a
# test checks every code point), each mapped to its letter: a word test on the folded text then
# finds every spelling that the patterns' ``(?i)`` finds ("toKen" with a Kelvin sign too).
ASCII_FOLDS = str.maketrans({"\u0130": "i", "\u0131": "i", "\u017f": "s", "\u212a": "k"})


# One entry: the rules that ask run one after another on the same text, so a text is counted
# and folded once per pass.
@functools.lru_cache(maxsize=1)
def _digit_count(text: str) -> int:
    """How many ASCII digits ``text`` holds: what the patterns' ``[0-9]`` and ``_digits``
    count (not ``\\d``, which also matches digits such as '٣')."""
    # UTF-8 writes every other character with bytes >= 0x80, so the bytes 0-9 are exactly the
    # ASCII digits, and deleting them is done in C.
    data = text.encode("utf-8", "surrogatepass")
    return len(data) - len(data.translate(None, _ASCII_DIGITS))


@functools.lru_cache(maxsize=1)
def _folded(text: str) -> str:
    """``text`` lower-cased after ``ASCII_FOLDS``. ``str.lower`` alone would miss the Kelvin
    sign and may lengthen a character (İ becomes two), splitting a word the pattern matches."""
    # Translating a non-ASCII text is slow; the characters it maps are rare.
    if not text.isascii() and any(char in text for char in "\u0130\u0131\u017f\u212a"):
        text = text.translate(ASCII_FOLDS)
    return text.lower()


def holds(needle: str) -> Callable[[str], bool]:
    """A precondition: the text holds ``needle`` (case-sensitive)."""
    return lambda text: needle in text


def digits_at_least(count: int) -> Callable[[str], bool]:
    """A precondition: the text holds at least ``count`` ASCII digits."""
    return lambda text: _digit_count(text) >= count


def names_with_digit(word: str) -> Callable[[str], bool]:
    """A precondition: the text holds ``word`` in any case, and an ASCII digit."""
    return lambda text: _digit_count(text) > 0 and word in _folded(text)


def may_hold_api_key(text: str) -> bool:
    # Each alternative's literal start ("_live_" and "_test_" for Stripe's three); those with
    # a "_" or a "-" are only looked for when the text has one.
    return (
        any(prefix in text for prefix in ("AKIA", "ASIA", "AIza"))
        or ("-" in text and any(prefix in text for prefix in ("sk-", "xox", "glpat-")))
        or (
            "_" in text
            and any(
                prefix in text
                for prefix in (
                    *("_live_", "_test_", "whsec_", "ghp_", "gho_", "ghs_", "ghu_", "ghr_"),
                    *("github_pat_", "hf_", "npm_"),
                )
            )
        )
    )


# How each secret word ends ("credentials" is "credential" and an "s"), and what may stand
# between the word and its "=" or ":".
_SECRET_ENDINGS = (
    *("password", "passwd", "passphrase", "pwd", "secret", "token", "credential"),
    *("authorization", "key"),
)


def may_assign_secret(text: str) -> bool:
    """Whether a secret word stands right before ``=`` or ``:`` (after an optional quote and
    spaces or tabs), as the pattern needs. Long texts (code, configuration) often hold such a
    word and a colon, but seldom one after the other."""
    if "=" not in text and ":" not in text:
        return False
    folded = _folded(text)
    for word in _SECRET_ENDINGS:
        found = folded.find(word)
        while found >= 0:
            end = found + len(word)
            if word == "credential" and folded.startswith("s", end):
                end += 1
            if folded.startswith(("'", '"'), end):
                end += 1
            while folded.startswith((" ", "\t"), end):
                end += 1
            if folded.startswith(("=", ":"), end):
                return True
            found = folded.find(word, found + 1)
    return False
