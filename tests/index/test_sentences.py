"""Sentence keys: where a remembered text is split for its sentence vectors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from engramdb.index.sentences import MAX_SENTENCES, sentence_keys, split_sentences


def test_a_turn_splits_at_sentence_ends_and_line_breaks() -> None:
    text = (
        "I was thinking of taking the train. My friend said it's only around $10.50!\n"
        "Would that be faster than a taxi?"
    )
    assert split_sentences(text) == [
        "I was thinking of taking the train.",
        "My friend said it's only around $10.50!",
        "Would that be faster than a taxi?",
    ]


def test_abbreviations_and_short_pieces_stay_with_their_sentence() -> None:
    text = "By the way, Dr. Smith saw me on March 3rd. Yes. It was fine, e.g. no fever."
    assert split_sentences(text) == [
        "By the way, Dr. Smith saw me on March 3rd. Yes.",
        "It was fine, e.g. no fever.",
    ]


def test_lowercase_after_a_period_is_not_a_new_sentence() -> None:
    assert split_sentences("Version 2.0 is out. see the notes.") == [
        "Version 2.0 is out. see the notes."
    ]


def test_one_sentence_needs_no_keys_of_its_own_and_long_texts_are_capped() -> None:
    assert sentence_keys("Just one thought here.") == []
    assert sentence_keys("") == []
    assert split_sentences("  \n ") == []
    many = " ".join(f"Sentence number {i} is here." for i in range(40))
    assert len(sentence_keys(many)) == MAX_SENTENCES
    assert sentence_keys(many)[0] == "Sentence number 0 is here."


@given(st.text(max_size=400))
def test_splitting_keeps_every_word_in_order(text: str) -> None:
    assert " ".join(split_sentences(text)).split() == text.split()
