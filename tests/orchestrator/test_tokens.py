"""The token counter: the default WordPiece counter on the carried tokenizer (offline), the
BPE adapter on a byte-level encoding, and the contract every ``TokenCounter`` keeps."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.core.errors import ModelIntegrityError
from engramdb.orchestrator.tokens import (
    DEFAULT_COUNTER,
    EncodingCounter,
    TokenCounter,
    WordPieceCounter,
    count_tokens,
    count_tokens_many,
    truncate_to_tokens,
)

# Text from every corner hypothesis knows: emoji, combining marks, CJK, controls, whitespace.
TEXTS = st.text(max_size=300)
LIMITS = st.integers(min_value=0, max_value=80)


class ByteEncoding:
    """A byte-level BPE without merges: every UTF-8 byte is a token (cuts inside characters)."""

    def encode_ordinary(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode_bytes(self, tokens: Sequence[int]) -> bytes:
        return bytes(tokens)


def test_counts_known_texts() -> None:
    assert count_tokens("") == 0
    assert count_tokens("hello") == 1
    assert count_tokens("Hello, world!") == 4  # hello , world !
    assert count_tokens("I adopted a dog named Rex.") == 7
    # Case and accents do not change the count (BERT uncased normalises them away).
    assert count_tokens("NAÏVE Café") == count_tokens("naive cafe") == 2
    # Whitespace of any kind only separates.
    assert count_tokens("  a \n\t b  ") == 2


def test_an_unknown_word_counts_its_utf8_bytes() -> None:
    # An emoji is [UNK] in BERT's vocabulary; a byte-level BPE would spend up to 4 tokens on it.
    assert count_tokens("😀") == 4
    assert count_tokens("party 😀😀") == 1 + 8
    # A word longer than WordPiece's 100 characters is one [UNK] too.
    assert count_tokens("ab" * 60) == 120


def test_count_is_additive_over_whitespace() -> None:
    # The summarizer relies on this to add up parts instead of re-counting joined text.
    parts = ["- [2023-05-30] user:", "I adopted a dog named Rex.", "He is 3 years old 🐶.", "Ok"]
    assert count_tokens("\n".join(parts)) == sum(count_tokens(p) for p in parts)


def test_truncate_keeps_a_text_that_fits() -> None:
    text = "I adopted a dog named Rex."
    assert truncate_to_tokens(text, 7) == text
    assert truncate_to_tokens(text, 100) == text


def test_truncate_cuts_on_token_boundaries() -> None:
    text = "I adopted a dog named Rex."
    assert truncate_to_tokens(text, 3) == "I adopted a"
    assert truncate_to_tokens(text, 1) == "I"
    assert truncate_to_tokens(text, 0) == ""
    assert truncate_to_tokens(text, -5) == ""
    assert truncate_to_tokens("", 5) == ""
    # A text of no tokens fits any limit that is not negative.
    assert truncate_to_tokens(" \n\x00 ", 0) == " \n\x00 "
    assert truncate_to_tokens(" ", -1) == ""


def test_truncate_never_splits_a_word_at_an_internal_window_edge() -> None:
    # The counter tokenizes a window of the text, not all of it; a word cut by the window edge
    # must not be taken as a shorter word.
    text = "word " * 20_000
    for limit in (1, 7, 63, 64, 65, 500):
        cut = truncate_to_tokens(text, limit)
        assert cut == " ".join(["word"] * limit)


def test_truncate_looks_further_when_the_first_window_holds_too_few_tokens() -> None:
    text = "a" + " " * 5000 + "b c d"
    assert truncate_to_tokens(text, 3) == text[: text.index("c") + 1]
    assert truncate_to_tokens(text, 4) == text


def test_truncate_cuts_inside_a_first_word_too_long_for_the_limit() -> None:
    # One emoji is 4 tokens: 7 keeps one, 3 keeps nothing.
    assert truncate_to_tokens("😀😀😀 party", 7) == "😀"
    assert truncate_to_tokens("😀😀😀 party", 3) == ""
    # A megabyte-long "word" is cut without tokenizing all of it.
    cut = truncate_to_tokens("x" * 1_000_000, 10)
    assert cut
    assert set(cut) == {"x"}
    assert count_tokens(cut) <= 10


def test_truncate_stops_before_an_unknown_word_that_does_not_fit() -> None:
    assert truncate_to_tokens("hello 😀😀 world", 5) == "hello"
    assert truncate_to_tokens("hello 😀😀 world", 9) == "hello 😀😀"


@settings(max_examples=300, deadline=None)
@given(text=TEXTS, limit=LIMITS)
def test_truncate_keeps_the_contract(text: str, limit: int) -> None:
    cut = truncate_to_tokens(text, limit)
    assert text.startswith(cut)
    assert count_tokens(cut) <= max(limit, 0)
    if count_tokens(text) <= limit:
        assert cut == text


@settings(max_examples=150, deadline=None)
@given(text=TEXTS, limit=st.integers(min_value=0, max_value=60))
def test_truncation_is_monotone_in_the_limit(text: str, limit: int) -> None:
    shorter, longer = truncate_to_tokens(text, limit), truncate_to_tokens(text, limit + 1)
    assert longer.startswith(shorter)
    assert count_tokens(shorter) <= count_tokens(longer) <= limit + 1


SECOND_COUNTER = WordPieceCounter()  # loads its own copy of the tokenizer


@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_count_is_deterministic_and_never_negative(text: str) -> None:
    first = count_tokens(text)
    assert first >= 0
    assert count_tokens(text) == first
    assert SECOND_COUNTER.count(text) == first


def test_counts_thousands_of_short_texts_quickly() -> None:
    # A sanity check of the cached tokenizer, not a benchmark: no time is asserted, since CI
    # machines vary. Typical: ~15,000 chat-sized texts a second on one core.
    texts = [f"On day {i} the user said they walked the dog in the park." for i in range(3000)]
    started = time.perf_counter()
    counts = [count_tokens(text) for text in texts]
    elapsed = time.perf_counter() - started
    assert set(counts) == {14, 15}  # numbers of 4 digits are 2 pieces
    print(f"counted {len(texts)} texts in {elapsed:.3f} s")


def test_default_counter_is_a_token_counter() -> None:
    assert isinstance(DEFAULT_COUNTER, TokenCounter)
    assert isinstance(WordPieceCounter(), TokenCounter)
    assert isinstance(EncodingCounter(ByteEncoding()), TokenCounter)


def test_a_tokenizer_file_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "tokenizer.json"
    fake.write_text("{}", encoding="utf-8")
    with pytest.raises(ModelIntegrityError):
        WordPieceCounter(tokenizer_path=fake).count("hello")


# -- EncodingCounter (the adapter for tiktoken-style BPE encodings) -------------------------


def test_encoding_counter_counts_tokens() -> None:
    counter = EncodingCounter(ByteEncoding())
    assert counter.count("") == 0
    assert counter.count("abc") == 3
    assert counter.count("é") == 2


def test_encoding_counter_never_cuts_inside_a_character() -> None:
    counter = EncodingCounter(ByteEncoding())
    assert counter.truncate("aé😀", 1) == "a"
    assert counter.truncate("aé😀", 2) == "a"  # 2 bytes would end inside é
    assert counter.truncate("aé😀", 3) == "aé"
    assert counter.truncate("aé😀", 6) == "aé"
    assert counter.truncate("aé😀", 7) == "aé😀"
    assert counter.truncate("😀", 3) == ""
    assert counter.truncate("abc", 0) == ""


@settings(max_examples=200, deadline=None)
@given(text=TEXTS, limit=LIMITS)
def test_encoding_counter_keeps_the_contract(text: str, limit: int) -> None:
    counter = EncodingCounter(ByteEncoding())
    cut = counter.truncate(text, limit)
    assert text.startswith(cut)
    assert counter.count(cut) <= limit


def test_encoding_counter_with_cl100k_when_installed() -> None:
    # bpe-openai is not a dependency (see the tokens module doc); where it is installed, the
    # adapter gives exact cl100k counts.
    bpe_openai = pytest.importorskip("bpe_openai")
    counter = EncodingCounter(bpe_openai.get_encoding("cl100k_base"))
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # plain text, not the special token
    cut = counter.truncate("😀😀😀 party", 3)
    assert "😀😀😀 party".startswith(cut)
    assert counter.count(cut) <= 3


@settings(max_examples=60, deadline=None)
@given(st.lists(TEXTS, max_size=8))
def test_counting_a_batch_equals_counting_each(texts: list[str]) -> None:
    assert count_tokens_many(texts) == [count_tokens(text) for text in texts]
