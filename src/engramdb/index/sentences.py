"""Splitting a remembered text into sentences, the extra keys its vectors are computed for (pure).

A chat turn often carries one fact in passing ("By the way, I got my car serviced on the 3rd")
inside talk about something else; one vector for the whole turn mostly says what the turn is
about, so a question about that fact misses it. Each sentence of a multi-sentence text gets a
vector of its own as well, and a search scores the text by its best one. The split is
rule-based: end punctuation followed by a capital or digit, and line breaks, with common
abbreviations ("Dr.", "e.g.") and very short pieces kept with the sentence before them.
"""

from __future__ import annotations

import functools
import re

#: Pieces shorter than this are joined to the sentence before (``"Yes."``, ``"Ok!"``).
MIN_SENTENCE_CHARS = 12
#: At most this many sentence keys per text (the first ones): a long document's vectors would
#: cost more to compute and store than its recall gains.
MAX_SENTENCES = 16

_BOUNDARY = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])|\n+")
_ABBREVIATION = re.compile(
    r"\b(?:Mr|Mrs|Ms|Dr|Prof|St|Sr|Jr|vs|etc|e\.g|i\.e|No|Inc|Ltd|Co|Mt|approx)\.$",
    re.IGNORECASE,
)


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, in order, stripped; ``[]`` for blank text."""
    return list(_split(text))


# A write asks for its text's sentences more than once (whether it owes part vectors, which
# ones); the split is the costly part of that.
@functools.lru_cache(maxsize=64)
def _split(text: str) -> tuple[str, ...]:
    sentences: list[str] = []
    for piece in _BOUNDARY.split(text):
        piece = piece.strip() if piece else ""
        if not piece:
            continue
        if sentences and (len(piece) < MIN_SENTENCE_CHARS or _ABBREVIATION.search(sentences[-1])):
            sentences[-1] += " " + piece
        else:
            sentences.append(piece)
    return tuple(sentences)


def sentence_keys(text: str, limit: int = MAX_SENTENCES) -> list[str]:
    """The sentences of ``text`` that get vectors of their own: none for a single sentence
    (its whole-text vector is the same thing), else the first ``limit``."""
    sentences = split_sentences(text)
    return sentences[:limit] if len(sentences) > 1 else []
