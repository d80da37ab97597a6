"""The full-text index's tokenizer in Python: ``porter unicode61 remove_diacritics 2``.

A partition's own BM25 statistics (``text_stats``, ``text_terms``) and the term counts of
each record whose text is costly to read again (``text_counts``: the candidates FTS5 finds are
scored from them) are kept by the write triggers, which call ``engram_text_terms``,
``engram_text_tokens`` and ``engram_text_counts``, functions registered on each connection
(``register_text_functions``). SQLite does not expose FTS5's tokenizer to SQL, so it is
rebuilt here: words are runs of letters, digits and private-use characters (a combining mark
inside a word is part of it), folded to lower case (Latin letters without their diacritics),
then Porter-stemmed as FTS5 stems them (only 3 to 64 bytes long; the steps below follow the
original algorithm's rules in FTS5's order). For ASCII text this is FTS5's tokenization
exactly; beyond ASCII, case folding and categories come from Python's Unicode tables, which
may differ from SQLite's on rare characters (a word then scores as absent or counts apart,
never breaks a search).
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections import Counter
from collections.abc import Callable
from functools import lru_cache

_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
#: Private-use characters, which the index holds as word characters too.
_PRIVATE = "\ue000-\uf8ff\U000f0000-\U000ffffd\U00100000-\U0010fffd"
_DIACRITICS = "\u0300-\u036f"
#: Runs of word characters (``\w``: Unicode letters and numbers, and the underscore, which
#: separates words), private-use characters and combining diacritics: one character class,
#: which the regular expression engine scans fastest; each run is then split at underscores.
_RUN = re.compile(rf"[\w{_PRIVATE}{_DIACRITICS}]+")
_LEADING_DIACRITICS = "".join(chr(c) for c in range(0x300, 0x370))
_MIN_STEMMED = 3
_MAX_STEMMED = 64


def _is_vowel(c: int, y_is_vowel: bool) -> bool:
    return c in b"aeiou" or (y_is_vowel and c == 0x79)


def _vowel_then_consonant(w: bytes, previous_consonant: bool) -> int:
    """The length of ``w``'s first vowels-then-consonant run (one Porter ``VC``), 0 if none."""
    consonant = previous_consonant
    i = 0
    while i < len(w):
        consonant = not _is_vowel(w[i], consonant)
        if not consonant:
            break
        i += 1
    i += 1
    while i < len(w):
        consonant = not _is_vowel(w[i], consonant)
        if consonant:
            return i + 1
        i += 1
    return 0


def _m_gt0(w: bytes) -> bool:
    return _vowel_then_consonant(w, False) > 0


def _m_gt1(w: bytes) -> bool:
    n = _vowel_then_consonant(w, False)
    return bool(n) and _vowel_then_consonant(w[n:], True) > 0


def _m_eq1(w: bytes) -> bool:
    n = _vowel_then_consonant(w, False)
    return bool(n) and _vowel_then_consonant(w[n:], True) == 0


def _o_star(w: bytes) -> bool:
    """Consonant, vowel, consonant at the end, the last not w, x or y."""
    if w[-1] in b"wxy":
        return False
    mask, consonant = 0, False
    for c in w:
        consonant = not _is_vowel(c, consonant)
        mask = (mask << 1) + consonant
    return mask & 7 == 5


def _has_vowel(w: bytes) -> bool:
    return any(_is_vowel(c, i > 0) for i, c in enumerate(w))


def _s_or_t_m_gt1(w: bytes) -> bool:
    return w[-1:] in (b"s", b"t") and _m_gt1(w)


Rule = tuple[bytes, Callable[[bytes], bool], bytes]
# Each step: the first rule whose suffix ends the word (with more before it) decides; its
# condition on the stem then says whether it applies.
_STEP2: tuple[Rule, ...] = tuple(
    (suffix.encode(), _m_gt0, out.encode())
    for suffix, out in (
        ("ational", "ate"), ("tional", "tion"), ("enci", "ence"), ("anci", "ance"),
        ("izer", "ize"), ("logi", "log"), ("bli", "ble"), ("alli", "al"), ("entli", "ent"),
        ("eli", "e"), ("ousli", "ous"), ("ization", "ize"), ("ation", "ate"), ("ator", "ate"),
        ("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
        ("aliti", "al"), ("iviti", "ive"), ("biliti", "ble"),
    )
)  # fmt: skip
_STEP3: tuple[Rule, ...] = tuple(
    (suffix.encode(), _m_gt0, out.encode())
    for suffix, out in (
        ("ical", "ic"), ("ness", ""), ("icate", "ic"), ("iciti", "ic"), ("ful", ""),
        ("ative", ""), ("alize", "al"),
    )
)  # fmt: skip
_STEP4: tuple[Rule, ...] = tuple(
    (suffix.encode(), _s_or_t_m_gt1 if suffix == "ion" else _m_gt1, b"")
    for suffix in (
        "al", "ance", "ence", "er", "ic", "able", "ible", "ant", "ement", "ment", "ent",
        "ion", "ou", "ism", "ate", "iti", "ous", "ive", "ize",
    )
)  # fmt: skip


def _apply(w: bytes, rules: tuple[Rule, ...]) -> bytes:
    for suffix, condition, out in rules:
        if len(w) > len(suffix) and w.endswith(suffix):
            stem = w[: -len(suffix)]
            return stem + out if condition(stem) else w
    return w


def _step1(w: bytes) -> bytes:
    if w.endswith(b"s"):
        if w[-2:-1] == b"e":
            if (len(w) > 4 and w[-4:-2] == b"ss") or (len(w) > 3 and w[-3:-2] == b"i"):
                w = w[:-2]
            else:
                w = w[:-1]
        elif w[-2:-1] != b"s":
            w = w[:-1]
    stripped = False
    if len(w) > 3 and w.endswith(b"eed"):
        if _m_gt0(w[:-3]):
            w = w[:-1]
    elif len(w) > 2 and w.endswith(b"ed"):
        if _has_vowel(w[:-2]):
            w, stripped = w[:-2], True
    elif len(w) > 3 and w.endswith(b"ing") and _has_vowel(w[:-3]):
        w, stripped = w[:-3], True
    if stripped:
        if len(w) > 2 and w[-2:] in (b"at", b"bl", b"iz"):
            w += b"e"
        elif len(w) > 1 and not _is_vowel(w[-1], False) and w[-1] not in b"lsz" and w[-1] == w[-2]:
            w = w[:-1]
        elif _m_eq1(w) and _o_star(w):
            w += b"e"
    if w.endswith(b"y") and _has_vowel(w[:-1]):
        w = w[:-1] + b"i"
    return w


@lru_cache(maxsize=65_536)
def porter_stem(word: str) -> str:
    """``word`` (already folded) as FTS5's porter tokenizer stems it."""
    w = word.encode("utf-8")
    if not _MIN_STEMMED <= len(w) <= _MAX_STEMMED:
        return word
    w = _apply(_apply(_apply(_step1(w), _STEP2), _STEP3), _STEP4)
    if w.endswith(b"e") and (_m_gt1(w[:-1]) or (_m_eq1(w[:-1]) and not _o_star(w[:-1]))):
        w = w[:-1]
    if len(w) > 1 and w.endswith(b"ll") and _m_gt1(w[:-1]):
        w = w[:-1]
    # FTS5 stems bytes: undoubling a final "consonant" can drop the last byte of a character
    # whose encoding ends in two equal bytes ("\ue000\ue000ing" -> b"\xee\x80\x80\xee\x80").
    # The index keeps those bytes; here the cut character reads as U+FFFD, a key that stays
    # valid text for the statistics tables.
    return w.decode("utf-8", errors="replace")


def _is_token_char(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category[0] in "LN" or category == "Co"


def _is_diacritic(ch: str) -> bool:
    return 0x300 <= ord(ch) <= 0x36F


@lru_cache(maxsize=4096)
def _fold(ch: str) -> str:
    """``ch`` in lower case without its diacritics (empty for a lone combining mark)."""
    if _is_diacritic(ch):
        return ""
    folded = ch.casefold()
    lower = folded if len(folded) == 1 else ch.lower()
    # Only Latin letters lose their diacritics (as FTS5's table has it): "é" is "e", "ά" stays.
    base = "".join(c for c in unicodedata.normalize("NFD", lower) if not unicodedata.combining(c))
    return base if base.isascii() and base else lower


def folded_words(text: str) -> list[str]:
    """``text``'s words, folded, before stemming."""
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    words = []
    for run in _RUN.findall(text):
        for piece in run.split("_"):
            # A combining mark joins the word before it; with none before, it is no word.
            word = piece.lstrip(_LEADING_DIACRITICS)
            if not word:
                continue
            folded = word.lower() if word.isascii() else "".join(map(_fold, word))
            if folded:
                words.append(folded)
    return words


def tokens(text: str) -> list[str]:
    """The terms the full-text index holds for ``text``, in order."""
    return list(map(porter_stem, folded_words(text)))


#: An ASCII text up to this many characters is scored from itself as fast as from stored term
#: counts (one regular expression finds the words that may match): it is given none.
SCORED_FROM_TEXT = 500


def counts_pay(text: str) -> bool:
    """Whether ``text`` is scored faster from stored term counts than from itself: a long
    text, or one beyond ASCII (whose words are folded one character at a time)."""
    return len(text) > SCORED_FROM_TEXT or not text.isascii()


@lru_cache(maxsize=64)
def _counted(text: str) -> tuple[str, int, str | None]:
    """``text``'s distinct terms as a JSON array, how many terms it holds, and each term's
    count as a JSON object when stored counts pay (``counts_pay``): a trigger asks for all of
    the same text, one after the other, and it is tokenized once."""
    terms = tokens(text)
    counts = Counter(terms)
    # Terms are word characters only: written unescaped, a JSON path finds them as they are.
    counted = (
        json.dumps(counts, ensure_ascii=False, separators=(",", ":")) if counts_pay(text) else None
    )
    return json.dumps(sorted(counts)), len(terms), counted


def _terms_json(text: object) -> str:
    """The distinct terms of ``text`` as a JSON array (for the write triggers)."""
    return _counted(text)[0] if isinstance(text, str) else "[]"


def _token_count(text: object) -> int:
    """How many terms ``text`` holds (for the write triggers)."""
    return _counted(text)[1] if isinstance(text, str) else 0


def _term_counts_json(text: object) -> str | None:
    """How often ``text`` holds each of its terms, as a JSON object, when stored counts pay
    (for the write triggers; else ``None``)."""
    return _counted(text)[2] if isinstance(text, str) else None


def register_text_functions(conn: sqlite3.Connection) -> None:
    """Make the functions the ``text_terms`` and ``text_counts`` triggers call known to
    ``conn``: every connection that writes records needs them."""
    conn.create_function("engram_text_terms", 1, _terms_json, deterministic=True)
    conn.create_function("engram_text_tokens", 1, _token_count, deterministic=True)
    conn.create_function("engram_text_counts", 1, _term_counts_json, deterministic=True)
