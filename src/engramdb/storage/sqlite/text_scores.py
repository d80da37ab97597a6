"""Okapi BM25 from a partition's own statistics, for the hits FTS5 finds (pure).

FTS5's ``bm25()`` takes its document count, mean length and document frequencies from the
whole index, every tenant's records; these functions take them from ``text_stats`` and
``text_terms`` (``TextStatistics``), which the writes keep per partition. The formula is
FTS5's: each phrase of the expression scores ``idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b *
len / avglen))`` with ``idf = ln((N - df + 0.5) / (df + 0.5))`` (a common word's non-positive
idf becomes 1e-6), and a document's length counts its partition word too, as the index holds
it; so a store of one partition scores exactly as ``bm25()`` does.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from engramdb.core.scope import LEVELS, ScopeFilter
from engramdb.storage.sqlite.partition import partition_token
from engramdb.storage.sqlite.text_tokens import tokens

K1 = 1.2
B = 0.75
#: FTS5's idf for a word in more than half the documents.
MIN_IDF = 1e-6
#: A phrase of an FTS5 expression: a string (``""`` escapes a quote) or a bareword.
_PHRASE = re.compile(r'"((?:[^"]|"")*)"|([\w\x1a\u0080-\U0010ffff]+)(\s*:)?')
_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
_SEPARATOR = "\x1f"


def match_phrases(match: str) -> list[tuple[str, ...]]:
    """The phrases of the FTS5 expression ``match``, each as the terms the index holds for it
    (operators, column names and phrases without a word are left out)."""
    phrases = []
    for quoted, bare, column in _PHRASE.findall(match):
        if column or bare in _OPERATORS:
            continue
        words = tuple(tokens(bare or quoted.replace('""', '"')))
        if words:
            phrases.append(words)
    return phrases


@dataclass(frozen=True)
class TextStatistics:
    """The records, terms and per-phrase document frequencies of the partitions searched."""

    docs: int
    tokens: int
    frequencies: dict[tuple[str, ...], int] = field(default_factory=dict)

    def idf(self, phrase: tuple[str, ...]) -> float:
        docs = max(self.docs, 1)
        df = self.frequencies.get(phrase, 0)
        value = math.log((docs - df + 0.5) / (df + 0.5))
        return value if value > 0 else MIN_IDF

    @property
    def mean_length(self) -> float:
        # Every document also holds its partition's word (see the module docstring).
        docs = max(self.docs, 1)
        return max((self.tokens + self.docs) / docs, 1.0)


def occurrences(terms: Sequence[str], phrase: tuple[str, ...]) -> int:
    """How often ``phrase`` occurs in the term sequence ``terms``."""
    if len(phrase) == 1:
        return terms.count(phrase[0])
    width = len(phrase)
    return sum(
        1
        for at in range(len(terms) - width + 1)
        if terms[at] == phrase[0] and tuple(terms[at : at + width]) == phrase
    )


def bm25(
    text: str, phrases: Sequence[tuple[str, ...]], stats: TextStatistics, idf: Sequence[float]
) -> float:
    """``text``'s BM25 score for ``phrases`` (higher is better); ``idf`` is each phrase's."""
    terms = tokens(text)
    counts = Counter(terms)
    norm = K1 * (1 - B + B * (len(terms) + 1) / stats.mean_length)
    score = 0.0
    for phrase, weight in zip(phrases, idf, strict=True):
        tf = counts.get(phrase[0], 0) if len(phrase) == 1 else occurrences(terms, phrase)
        if tf:
            score += weight * tf * (K1 + 1) / (tf + norm)
    return score


def partition_prefix(namespace: str, scope: ScopeFilter | None) -> str:
    """The shared start of the partition tokens of ``namespace`` whose leading scope columns
    are those ``scope`` fixes (all of them, for a filter that fixes every level)."""
    fixed = dict(scope.conditions()) if scope is not None else {}
    leading: list[str] = []
    for level in LEVELS:
        if level not in fixed:
            break
        leading.append(fixed[level])
    return partition_token(namespace, (*leading, ""))


def in_partitions(part: str, namespace: str, scope: ScopeFilter | None) -> bool:
    """Whether the partition of token ``part`` is one of ``namespace`` that ``scope`` selects
    (scope columns never hold the separator, so the last five pieces are the scope)."""
    pieces = bytes.fromhex(part[1:]).decode("utf-8").split(_SEPARATOR)
    columns = pieces[-len(LEVELS) :]
    if _SEPARATOR.join(pieces[: -len(LEVELS)]) != namespace:
        return False
    if scope is None:
        return True
    return all(columns[LEVELS.index(level)] == value for level, value in scope.conditions())
