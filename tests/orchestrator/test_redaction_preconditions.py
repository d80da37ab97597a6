"""Redaction preconditions: a default rule skipped by its precondition would have replaced
nothing, so every rule, and the default policy, give the same text and counts as the same
rules without preconditions — on generated near-misses (digit counts around each rule's
threshold, keywords in every case and with the non-ASCII letters ``re.IGNORECASE`` folds,
Unicode digits, key prefixes, separators) and on known positives. A custom rule runs on every
text unless it brings a precondition of its own."""

from __future__ import annotations

import dataclasses
import re
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.orchestrator.redaction import (
    DEFAULT_RULES,
    Redacted,
    RedactionPolicy,
    RedactionRule,
    default_policy,
)
from engramdb.orchestrator.redaction_preconditions import ASCII_FOLDS

PLAIN_RULES = tuple(dataclasses.replace(rule, precondition=None) for rule in DEFAULT_RULES)
PLAIN = RedactionPolicy(PLAIN_RULES)
HYPOTHESIS = settings(max_examples=400, deadline=None)

KEYWORDS = [
    *("password", "passwd", "passphrase", "pwd", "secret", "token", "credentials"),
    *("authorization", "api_key", "api-key", "apikey", "access_key", "client_secret", "x-api-key"),
    *("bearer", "passport", "passport number", "passport no.", "passport #", "ssn"),
    *("social security number", "basic", "key", "pass", "auth"),
]
# The letters re.IGNORECASE matches beyond A-Z and a-z: a keyword spelled with one of them is
# still a keyword to the patterns.
ODD_CASES = {"i": ["\u0130", "\u0131", "I"], "k": ["\u212a", "K"], "s": ["\u017f", "S"]}


@st.composite
def keywords(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(KEYWORDS))
    return "".join(
        draw(st.sampled_from([char, char.upper(), *ODD_CASES.get(char, [])])) for char in word
    )


def digit_runs(max_size: int) -> st.SearchStrategy[str]:
    # ASCII digits mostly, and the Unicode digits that ``\d`` matches and [0-9] does not.
    return st.text(alphabet=st.sampled_from([*"0123456789", "٣", "５", "߁"]), max_size=max_size)


POSITIVES = [
    # At each digit threshold: a 13-digit card, a 7-digit phone, an IBAN with 2 digits, a
    # 9-digit SSN, a passport number and a bearer token with one digit.
    "4222222222222",
    "+1234567",
    "GB14ABCDEFGHIJK",
    "123 45 6789",
    "passport ABCDEF1",
    "bearer abcdefg1",
    # Secret words with the letters re.IGNORECASE folds to i, k and s.
    "to\u212aen=abc123",
    "pa\u017fsword: hunter2",
    "credent\u0130als=abc",
    "AUTHOR\u0131ZATION: Basic abc",
    "4111 1111 1111 1111",
    "4111111111111111",
    "4111-1111-1111-1111 123",
    "123-45-6789",
    "SSN: 123456789",
    "+44 20 7946 0958",
    "+1234567",
    "(555) 123-4567",
    "06 12 34 56 78",
    "DE89 3704 0044 0532 0130 00",
    "alice@example.com",
    "Bearer abcdef123456",
    "password=hunter2",
    '"api_key": "abc123"',
    "passport number X1234567",
    "eyJhbGciOiJ.eyJzdWIiOi.c2ln",
    "https://user:pa55@host.example",
    "sk-abcdefghijklmnop1234",
    "sk_live_abcdefghij12",
    "ghp_abcdefghijklmnopqrst1234",
    "xoxb-1234567890-abc",
    "AKIAABCDEFGHIJKLMNOP",
    "AIza" + "a" * 35,
    "hf_" + "a" * 30,
    "npm_" + "a" * 36,
    "glpat-abcdefghijklmnopqrst",
    "whsec_abcdefghijklmnop",
    "github_pat_abcdefghijklmnopqrst",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIBOg==\n-----END RSA PRIVATE KEY-----",
    "[SECRET]",
    "[CARD]",
]
PIECES = st.one_of(
    keywords(),
    digit_runs(20),
    st.sampled_from(POSITIVES),
    st.sampled_from(
        [
            *("=", ":", " ", "  ", "\t", "\n", "-", ".", "/", "(", ")", "(0)", "+", "00", "@"),
            *("://", '"', "'", "#", ",", ";", "&", "**", "=>", ":=", "\\n", "is ", "é", "日"),
            *("sk", "_live_", "_test_", "gh", "xox", "AKIA", "ASIA", "AIza", "eyJ", "hf_"),
            *("-----BEGIN ", "PRIVATE KEY-----", "-----END ", "DE", "GB", "[SECRET]"),
        ]
    ),
    st.text(alphabet=string.ascii_letters + string.digits + "_-", max_size=12),
)
SEPARATORS = st.sampled_from(
    ["=", ": ", " = ", "=>", ":=", '": "', "': '", ":** ", " is ", "\t= ", "'\t :", "s: ", "_x="]
)
VALUES = st.text(alphabet=string.ascii_letters + string.digits + "_-+/.", min_size=1, max_size=12)
# A keyword, spelled in any case, assigned a value: what the secret, bearer and passport rules
# look for, and what a keyword precondition that missed a spelling would let through.
ASSIGNMENTS = st.tuples(keywords(), SEPARATORS, VALUES).map("".join)
# Text around a single positive with no digit of its own, so that the positive's digits are
# all the text's digits: a digit threshold one too high would skip the rule.
NO_DIGITS = st.lists(
    st.one_of(keywords(), st.sampled_from([" ", ", ", ": ", "\n", "é", "-", "("])), max_size=4
).map("".join)
TEXTS = st.one_of(
    st.lists(PIECES | ASSIGNMENTS, max_size=25).map("".join),
    st.tuples(NO_DIGITS, st.sampled_from(POSITIVES), NO_DIGITS).map("".join),
    st.tuples(NO_DIGITS, ASSIGNMENTS, NO_DIGITS).map("".join),
)


@HYPOTHESIS
@given(TEXTS)
def test_each_rule_replaces_the_same_with_or_without_its_precondition(text: str) -> None:
    for rule, plain in zip(DEFAULT_RULES, PLAIN_RULES, strict=True):
        assert rule.apply(text) == plain.apply(text), rule.name


@HYPOTHESIS
@given(TEXTS)
def test_the_default_policy_redacts_as_its_rules_without_preconditions(text: str) -> None:
    assert default_policy().redact(text) == PLAIN.redact(text)


@pytest.mark.parametrize("text", POSITIVES)
def test_known_positives_pass_their_preconditions(text: str) -> None:
    redacted = default_policy().redact(f"note: {text} ok")
    assert redacted == PLAIN.redact(f"note: {text} ok")
    if not text.startswith("["):
        assert redacted.counts


def test_every_character_ignorecase_folds_to_an_ascii_letter_is_folded() -> None:
    # The keyword preconditions fold the text with ASCII_FOLDS and lower(); a character that
    # re.IGNORECASE matches to a letter but the folding missed would let a keyword through.
    everything = "".join(map(chr, range(0x110000)))
    for letter in string.ascii_lowercase:
        for char in set(re.findall(letter, everything, re.IGNORECASE)):
            assert char.translate(ASCII_FOLDS).lower() == letter, hex(ord(char))


def test_a_custom_rule_without_a_precondition_runs_on_every_text() -> None:
    ticket = RedactionRule("ticket", re.compile(r"\bTICKET-\d+\b"), "[TICKET]")
    assert ticket.precondition is None
    # "٣" is a digit to \d: nothing may skip the rule for holding no ASCII digit.
    assert RedactionPolicy((ticket,)).redact("see TICKET-٣٣") == Redacted(
        "see [TICKET]", {"ticket": 1}
    )


def test_a_custom_precondition_that_says_no_skips_its_rule() -> None:
    ticket = RedactionRule(
        "ticket",
        re.compile(r"\bTICKET-\d+\b"),
        "[TICKET]",
        precondition=lambda text: "TICKET-" in text,
    )
    assert ticket.apply("see TICKET-12") == ("see [TICKET]", 1)
    # A precondition is trusted: one that wrongly says no leaves the text as it is.
    wrong = dataclasses.replace(ticket, precondition=lambda text: False)
    assert wrong.apply("see TICKET-12") == ("see TICKET-12", 0)
