"""SQLite's per-partition full-text statistics: the Python tokenizer is the index's own, the
``text_terms`` rows are what counting gives after any writes, and in a store of one partition
the scores are FTS5's ``bm25()`` exactly."""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import Delete, Put, Record, RecordQuery
from engramdb.storage.sqlite.backend import SqliteBackend
from engramdb.storage.sqlite.partition import partition_token
from engramdb.storage.sqlite.queries import text_candidates
from engramdb.storage.sqlite.text_scores import (
    PhraseScorer,
    TextStatistics,
    any_phrase,
    in_partitions,
    index_length,
    match_phrases,
    occurrences,
    partition_prefix,
    stem_prefix,
)
from engramdb.storage.sqlite.text_tokens import porter_stem, register_text_functions, tokens
from tests.conformance.test_backend_contract import record as contract_record

ALICE = Scope(tenant="acme", user="alice")
BOB = Scope(tenant="acme", user="bob")
WORDS = (
    "caresses ponies ties caress cats feed agreed plastered bled motoring sing conflated "
    "troubled sized hopping tanned falling hissing fizzed failing filing happy sky "
    "relational conditional rational valenci hesitanci digitizer conformabli radicalli "
    "differentli vileli analogousli vietnamization predication operator feudalism "
    "decisiveness hopefulness callousness formaliti sensitiviti sensibiliti triplicate "
    "formative formalize electriciti electrical hopeful goodness revival allowance "
    "inference airliner gyroscopic adjustable defensible irritant replacement adjustment "
    "dependent adoption homologou communism activate angulariti homologous effective "
    "bowdlerize probate rate cease controll roll living lives moved Lisbon yesterday "
    "Café naïve Ærø résumé 2026 x1 a ab abc generalizations oscillators"
).split()


def fts5_tokens(texts: list[str]) -> list[list[str]]:
    """What FTS5 itself indexes for each of ``texts``, in order."""
    conn = sqlite3.connect(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", enumerate(texts))
    # FTS5 stems bytes and may cut a character: read its terms as bytes.
    conn.text_factory = bytes
    found: list[dict[int, str]] = [{} for _ in texts]
    for doc, term, offset in conn.execute("SELECT doc, term, offset FROM v"):
        found[doc][offset] = term.decode("utf-8", errors="replace")
    return [[terms[at] for at in sorted(terms)] for terms in found]


def test_the_tokenizer_is_the_indexs_own_on_words_every_porter_step_changes() -> None:
    texts = [*WORDS, " ".join(WORDS), "user_id: don't STOP-gap (e.g. 3.14)"]
    assert [tokens(text) for text in texts] == fts5_tokens(texts)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(alphabet="abcdeilmnorstuyz", min_size=1, max_size=12), max_size=30))
def test_the_tokenizer_is_the_indexs_own_on_any_ascii_words(words: list[str]) -> None:
    text = " ".join(words)
    assert [tokens(text)] == fts5_tokens([text])


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="abcdeilmnorstuvyz", min_size=1, max_size=16))
def test_every_word_starts_with_the_prefix_of_its_stem(word: str) -> None:
    assert word.startswith(stem_prefix(porter_stem(word)))


def test_words_whose_stem_rewrote_their_end_start_with_its_prefix() -> None:
    for word in ("visibility", "happy", "rating", "relational", "sensibilities", *WORDS):
        folded = word.lower()
        if folded.isascii():
            assert folded.startswith(stem_prefix(porter_stem(folded)))


def test_a_docsize_row_counts_every_columns_terms() -> None:
    assert index_length(bytes([5, 1])) == 6
    assert index_length(bytes([0x81, 0x01, 1])) == 130
    assert index_length(None) == 0


def test_phrases_are_read_from_an_expression_as_the_index_tokenizes_them() -> None:
    assert match_phrases('"living" OR "Lisbon" OR "user_id" OR "_"') == [
        ("live",),
        ("lisbon",),
        ("user", "id"),
    ]
    assert match_phrases('text : (lives AND NOT "say ""hi""")') == [("live",), ("sai", "hi")]
    assert occurrences(["a", "b", "a", "b"], ("a", "b")) == 2
    assert occurrences(["a", "b", "a"], ("b",)) == 1


def test_an_expression_of_phrases_joined_by_or_is_read_as_its_phrases() -> None:
    assert any_phrase('"apple"') == ['"apple"']
    assert any_phrase(' "say ""hi""" OR "user city"  OR "_" ') == ['"say ""hi"""', '"user city"']
    for other in ('"apple" AND "pear"', "apple OR pear", '"a" OR', 'NEAR("a" "b")', ""):
        assert any_phrase(other) is None


async def test_a_words_newest_matches_are_read_in_the_indexs_order_without_a_sort(
    tmp_path: Path,
) -> None:
    backend = await SqliteBackend.open(tmp_path / "n.db")
    try:
        await backend.commit([Put(record(f"k{n}", f"apple {n}")) for n in range(5)], [])
    finally:
        await backend.close()
    sql, params = text_candidates(RecordQuery("ns", ALICE), [('text : "apple"', 2)], "key")
    with sqlite3.connect(tmp_path / "n.db") as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        assert [row[0] for row in conn.execute(sql, params)] == ["k4", "k3"]
    assert "TEMP B-TREE" not in plan


def test_a_prefix_range_and_decoding_select_the_partitions_a_filter_names() -> None:
    tenant_wide = ScopeFilter(ALICE, ("tenant",))
    prefix = partition_prefix("ns", tenant_wide)
    alice, bob = (partition_token("ns", s.columns()) for s in (ALICE, BOB))
    other = partition_token("ns", Scope(tenant="acme2", user="alice").columns())
    assert alice.startswith(prefix)
    assert bob.startswith(prefix)
    assert not other.startswith(prefix)
    assert in_partitions(alice, "ns", tenant_wide)
    assert in_partitions(bob, "ns", None)
    assert not in_partitions(bob, "ns", ScopeFilter(ALICE, ("tenant", "user")))
    assert not in_partitions(alice, "other", None)


def record(key: str, text: str, scope: Scope = ALICE) -> Record:
    return contract_record(key, scope, text=text)


def counted_terms(path: Path) -> tuple[list[tuple[str, str, int]], list[tuple[str, int, int]]]:
    """The ``text_terms`` and ``text_stats`` rows counting the records afresh would give."""
    with sqlite3.connect(path) as conn:
        register_text_functions(conn)
        rows = conn.execute("SELECT part, text FROM records").fetchall()
    terms: Counter[tuple[str, str]] = Counter()
    stats: dict[str, list[int]] = {}
    for part, text in rows:
        terms.update((part, term) for term in set(tokens(text)))
        entry = stats.setdefault(part, [0, 0])
        entry[0] += 1
        entry[1] += len(tokens(text))
    return (
        sorted((part, term, n) for (part, term), n in terms.items()),
        sorted((part, docs, total) for part, (docs, total) in stats.items()),
    )


def stored_terms(path: Path) -> tuple[list[tuple[str, str, int]], list[tuple[str, int, int]]]:
    with sqlite3.connect(path) as conn:
        return (
            sorted(conn.execute("SELECT part, term, docs FROM text_terms")),
            sorted(conn.execute("SELECT part, docs, tokens FROM text_stats WHERE docs > 0")),
        )


async def test_the_term_rows_follow_puts_replaces_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    backend = await SqliteBackend.open(path)
    try:
        await backend.commit(
            [Put(record(k, f"{k} living in Lisbon, lives alone")) for k in ("a", "b", "c")]
            + [Put(record("d", "Bob lives in Porto", BOB))],
            [],
        )
        await backend.commit([Put(record("a", "moved to Porto"))], [])
        await backend.commit([Delete("ns", ALICE, "b"), Delete("ns", BOB, "d")], [])
        assert stored_terms(path) == counted_terms(path)
        # A word no record holds any more leaves no row behind.
        terms = {term for _, term, _ in stored_terms(path)[0]}
        assert "lisbon" in terms
        assert "bob" not in terms
    finally:
        await backend.close()


async def test_a_rebuild_recounts_its_namespace_and_leaves_the_others_alone(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.db"
    carol = Scope(tenant="acme", user="carol")
    # A namespace that extends "ns" with the separator shares its tokens' prefix.
    neighbours = ("other", "ns\x1fx")
    backend = await SqliteBackend.open(path)
    try:
        await backend.commit(
            [Put(record(k, f"{k} living in Lisbon")) for k in ("a", "b")]
            + [Put(replace(record("c", "moved to Porto", BOB), namespace=n)) for n in neighbours],
            [],
        )
        kept = [*await backend.scan(RecordQuery("ns", ALICE))]
        with sqlite3.connect(path) as conn:
            # Statistics that drifted from the records (as no write leaves them): a count off,
            # a partition of this namespace and one of each neighbour that hold no record.
            conn.execute("UPDATE text_stats SET docs = docs + 5")
            for namespace in ("ns", *neighbours):
                part = partition_token(namespace, carol.columns())
                conn.execute("INSERT INTO text_stats (part, docs) VALUES (?, 3)", (part,))
                conn.execute(
                    "INSERT INTO text_terms (part, term, docs) VALUES (?, 'x', 3)", (part,)
                )
        before = stored_terms(path)
        source = EventQuery(provider_id="ns")
        assert await backend.rebuild("ns", None, source, lambda events: kept) == 2
    finally:
        await backend.close()
    mine = partition_token("ns", ALICE.columns())
    after = stored_terms(path)
    assert [row for row in after[1] if row[0] == mine] == [
        row for row in counted_terms(path)[1] if row[0] == mine
    ]
    assert [row for row in after[0] if row[0] == mine] == [
        row for row in counted_terms(path)[0] if row[0] == mine
    ]
    # The neighbours' rows, drifted or not, are as they were; this namespace's empty one went.
    others = [row for row in before[1] if not in_partitions(row[0], "ns", None)]
    assert [row for row in after[1] if row[0] != mine] == others
    assert [row for row in after[0] if row[0] != mine] == [
        row for row in before[0] if not in_partitions(row[0], "ns", None)
    ]


async def test_one_partition_alone_scores_as_fts5s_bm25(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    backend = await SqliteBackend.open(path)
    texts = [
        "I flew to Zanzibar with my sister",
        "my sister lives in Lisbon and loves living there",
        "Zanzibar Zanzibar again, and a kayak",
        "we cooked pasta with my sister's friends",
        "nothing to see here",
    ]
    match = '"zanzibar" OR "sister" OR "living" OR "kayak"'
    try:
        await backend.commit([Put(record(f"k{n}", t)) for n, t in enumerate(texts)], [])
        hits = await backend.search.text(RecordQuery("ns", ALICE), match, 10)
    finally:
        await backend.close()
    with sqlite3.connect(path) as conn:
        expected = dict(
            conn.execute(
                "SELECT records.key, -bm25(records_fts, 1.0, 0.0) FROM records_fts "
                "JOIN records ON records.id = records_fts.rowid WHERE records_fts MATCH ?",
                (f"text : ({match})",),
            ).fetchall()
        )
    assert len(hits) == len(expected) == 4
    for hit, score in hits:
        assert score == pytest.approx(expected[hit.key], rel=1e-12)


#: Characters beyond ASCII that conversations hold: accented Latin letters, typographic
#: quotes and dashes, Greek, CJK, an emoji, a combining accent and a private-use character.
NON_ASCII = "éàüñøçÉÀß’“”—…άλφα中文😀\u0301\ue000"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=f"abcdeilmnorstuyzAZ09 .,'_-{NON_ASCII}", min_size=1, max_size=80))
def test_the_tokenizer_is_the_indexs_own_on_text_beyond_ascii(text: str) -> None:
    assert [tokens(text)] == fts5_tokens([text])


def test_text_beyond_ascii_is_split_folded_and_stemmed_as_the_index_does() -> None:
    texts = [
        "I’m planning a trip to Zürich — café crawls, naïve résumés… and “fondue”!",
        "Ærø’s ferries: 3½ hours; ΆΛΦΑ άλφα; 中文 words; 😀 emoji; e\u0301clair; \ue000x",
        # Stemming undoubles a final byte pair and cuts these characters (FTS5 stems bytes).
        "ab乹乹ing ab\ue000\ue000ing",
    ]
    assert [tokens(text) for text in texts] == fts5_tokens(texts)


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=f"abcdeilmnorstuyzAZ .,'_-{NON_ASCII}", min_size=1, max_size=80),
    st.lists(
        st.sampled_from(["cafe", "zurich", "alpha", "resume", "stair", "naive", "中文"]),
        min_size=1,
        max_size=3,
    ),
)
def test_only_the_words_that_may_match_are_stemmed_and_the_score_is_unchanged(
    text: str, words: list[str]
) -> None:
    phrases = [tuple(tokens(word)) for word in words]
    stats = TextStatistics(docs=50, tokens=400, frequencies=dict.fromkeys(phrases, 3))
    pruned, every_word = PhraseScorer(phrases, stats), PhraseScorer(phrases, stats)
    every_word._pattern = None  # stems every word of the text
    length = len(tokens(text)) + 1
    assert pruned.score(text, length) == every_word.score(text, length)
