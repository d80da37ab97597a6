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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from engramdb.core.scope import LEVELS, ScopeFilter
from engramdb.storage.sqlite.partition import partition_token
from engramdb.storage.sqlite.text_tokens import folded_words, porter_stem, tokens

K1 = 1.2
B = 0.75
#: FTS5's idf for a word in more than half the documents.
MIN_IDF = 1e-6
#: A phrase of an FTS5 expression: a string (``""`` escapes a quote) or a bareword.
_PHRASE = re.compile(r'"((?:[^"]|"")*)"|([\w\x1a\u0080-\U0010ffff]+)(\s*:)?')
_OPERATORS = frozenset({"AND", "OR", "NOT", "NEAR"})
_QUOTED = r'"(?:[^"]|"")*"'
#: An expression that is nothing but quoted phrases joined by OR (as hybrid recall asks).
_ANY_PHRASE = re.compile(rf"\s*{_QUOTED}(?:\s+OR\s+{_QUOTED})*\s*")
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


def any_phrase(match: str) -> list[str] | None:
    """The quoted phrases of ``match`` when it finds the records holding any of them (phrases
    joined by OR; those without a word are left out), else ``None``."""
    if not _ANY_PHRASE.fullmatch(match):
        return None
    return [quoted for quoted in re.findall(_QUOTED, match) if match_phrases(quoted)]


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


def stem_prefix(term: str) -> str:
    """What every ASCII word that stems to ``term`` starts with: Porter only rewrites a word's
    end, and where it writes letters the word did not have (a "y" read as "i", an "e" added,
    "bility" as "ble") the term's last letter is the one that may differ."""
    return term[:-1] if term[-1:] in ("e", "i") or term.endswith("bl") else term


def single_words(phrases: Sequence[tuple[str, ...]]) -> list[str] | None:
    """The distinct words of ``phrases`` when each is one word, else ``None``."""
    if all(len(phrase) == 1 for phrase in phrases):
        return list(dict.fromkeys(phrase[0] for phrase in phrases))
    return None


class PhraseScorer:
    """BM25 of documents for one query's ``phrases`` under ``stats``.

    A query of single words scores a document from its stored count of each (``words``,
    ``score_counts``), if it has any (``counts_pay``). Otherwise its text is read:
    not all its words are stemmed, only those that may stem to a query term (an ASCII word
    starting with a term's ``stem_prefix``, found in ASCII text by one regular expression, or
    any word beyond ASCII) are stemmed and counted. The document's length is the index's own
    count (``records_fts_docsize``).
    """

    def __init__(self, phrases: Sequence[tuple[str, ...]], stats: TextStatistics) -> None:
        self.phrases = list(phrases)
        self.idf = [stats.idf(phrase) for phrase in self.phrases]
        self._weighted = list(zip(self.phrases, self.idf, strict=True))
        self.mean_length = stats.mean_length
        #: The query's distinct words, when every phrase is one word (else ``None``).
        self.words = single_words(self.phrases)
        prefixes = {stem_prefix(p[0]) for p in self.phrases}
        self._pattern: re.Pattern[str] | None = None
        self._prefixes = tuple(sorted(prefixes))
        # A phrase of several terms is matched in the whole term sequence, and a very short
        # prefix would find most words anyway: then every word is stemmed.
        if self.words is not None and all(len(p) > 1 for p in prefixes):
            alternatives = "|".join(sorted(prefixes, key=lambda p: (-len(p), p)))
            self._pattern = re.compile(rf"(?<![a-z0-9])(?:{alternatives})[a-z0-9]*")

    def score(self, text: str, length: int) -> float:
        """``text``'s score (higher is better); ``length`` counts its terms as the index does
        (its partition word included)."""
        if self._pattern is None:
            terms = tokens(text)
            return self._total(Counter(terms), length, terms)
        if text.isascii():
            found = self._pattern.findall(text.lower())
        else:
            found = [
                w for w in folded_words(text) if w.startswith(self._prefixes) or not w.isascii()
            ]
        # Counted by hand: a Counter costs more than the few words that may match.
        counts: dict[str, int] = {}
        for word in found:
            term = porter_stem(word)
            counts[term] = counts.get(term, 0) + 1
        return self._total(counts, length, ())

    def score_counts(self, counts: Mapping[str, int], length: int) -> float:
        """The score of a document holding each of ``words`` ``counts`` times (absent: never)
        and ``length`` terms as the index counts them; for a query of single words only."""
        return self._total(counts, length, ())

    def _total(self, counts: Mapping[str, int], length: int, terms: Sequence[str]) -> float:
        """BM25 of a document of ``length`` terms from its ``counts`` of single words (and its
        ``terms`` in order, for a phrase of several)."""
        norm = K1 * (1 - B + B * length / self.mean_length)
        score = 0.0
        for phrase, weight in self._weighted:
            tf = counts.get(phrase[0], 0) if len(phrase) == 1 else occurrences(terms, phrase)
            if tf:
                score += weight * tf * (K1 + 1) / (tf + norm)
        return score


def index_length(sizes: bytes | None) -> int:
    """A document's term count over every column, from FTS5's ``docsize`` row (one varint per
    column); 0 when it has none."""
    total, value, shift = 0, 0, 0
    for byte in sizes or b"":
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            total, value, shift = total + value, 0, 0
    return total


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
