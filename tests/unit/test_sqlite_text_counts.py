"""Each record's stored term counts (``text_counts``, SQLite migration 0010): the writes keep
them, an older file is upgraded in place, and a search scores from them exactly as from the
text."""

from __future__ import annotations

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engramdb.storage.records import Delete, Put, RecordQuery
from engramdb.storage.sqlite import backend as sqlite_backend
from engramdb.storage.sqlite.backend import SqliteBackend
from engramdb.storage.sqlite.queries import text_candidates
from engramdb.storage.sqlite.schema import MIGRATIONS
from engramdb.storage.sqlite.text_scores import PhraseScorer, TextStatistics, match_phrases
from engramdb.storage.sqlite.text_tokens import counts_pay, tokens
from tests.unit.test_sqlite_text_scores import ALICE, BOB, NON_ASCII, record

TEXTS = [
    "I flew to Zanzibar with my sister, and Zanzibar again",
    "my sister lives in Lisbon and loves living there",
    "Café crawls in Zürich with my sister’s friends — naïve résumés",
    "nothing to see here",
    "A long plan for the trip: " + "we are living in Lisbon with my sister, " * 20,
]
MATCH = '"zanzibar" OR "sister" OR "living" OR "cafe" OR "resume"'


def stored_counts(path: Path) -> dict[str, dict[str, int]]:
    """Each record's stored counts, by key."""
    with sqlite3.connect(path) as conn:
        rows = conn.execute(
            "SELECT key, counts FROM records JOIN text_counts ON text_counts.record_id = records.id"
        ).fetchall()
        (orphans,) = conn.execute(
            "SELECT count(*) FROM text_counts WHERE record_id NOT IN (SELECT id FROM records)"
        ).fetchone()
    assert orphans == 0
    return {key: json.loads(counts) for key, counts in rows}


def counted(texts: dict[str, str]) -> dict[str, dict[str, int]]:
    """The counts stored for ``texts``: those of the long ones and those beyond ASCII."""
    return {key: dict(Counter(tokens(text))) for key, text in texts.items() if counts_pay(text)}


def test_counts_are_kept_for_texts_long_or_beyond_ascii_only() -> None:
    assert [counts_pay(text) for text in TEXTS] == [False, False, True, False, True]


async def search(path: Path, match: str = MATCH) -> list[tuple[str, float]]:
    backend = await SqliteBackend.open(path)
    try:
        hits = await backend.search.text(RecordQuery("ns", ALICE), match, 10)
    finally:
        await backend.close()
    return [(hit.key, score) for hit, score in hits]


async def test_the_counts_follow_puts_replaces_and_deletes(tmp_path: Path) -> None:
    path = tmp_path / "c.db"
    backend = await SqliteBackend.open(path)
    try:
        await backend.commit([Put(record(f"k{n}", t)) for n, t in enumerate(TEXTS)], [])
        await backend.commit([Put(record("b", "Bob lives in Porto", BOB))], [])
        await backend.commit([Put(record("k0", "moved to Porto, Porto again"))], [])
        await backend.commit([Delete("ns", ALICE, "k3"), Delete("ns", BOB, "b")], [])
    finally:
        await backend.close()
    assert stored_counts(path) == counted(
        {"k0": "moved to Porto, Porto again", "k1": TEXTS[1], "k2": TEXTS[2], "k4": TEXTS[4]}
    )
    assert set(stored_counts(path)) == {"k2", "k4"}


async def write(path: Path) -> None:
    backend = await SqliteBackend.open(path)
    try:
        await backend.commit([Put(record(f"k{n}", t)) for n, t in enumerate(TEXTS)], [])
    finally:
        await backend.close()


async def test_a_file_from_before_the_counts_is_upgraded_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = tmp_path / "old.db", tmp_path / "new.db"
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_backend, "MIGRATIONS", MIGRATIONS[:-1])
        await write(old)
    with sqlite3.connect(old) as conn:
        assert not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'text_counts'").fetchall()
    await write(new)
    assert await search(old) == await search(new)
    assert stored_counts(old) == counted({f"k{n}": t for n, t in enumerate(TEXTS)})


async def test_scores_from_counts_are_those_from_the_text(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    await write(path)
    before = await search(path)
    with sqlite3.connect(path) as conn:
        conn.execute("DELETE FROM text_counts")
    assert await search(path) == before
    assert len(before) == 4


async def test_the_counts_are_read_in_the_indexs_order_without_a_sort(tmp_path: Path) -> None:
    backend = await SqliteBackend.open(tmp_path / "n.db")
    try:
        await backend.commit(
            [Put(record(f"k{n}", f"apple {n} apple {'pie ' * 130}")) for n in range(5)], []
        )
    finally:
        await backend.close()
    query = RecordQuery("ns", ALICE)
    sql, params = text_candidates(query, [('text : "apple"', 2)], "key", ["appl", "pear"])
    with sqlite3.connect(tmp_path / "n.db") as conn:
        plan = " ".join(str(row[-1]) for row in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params))
        rows = conn.execute(sql, params).fetchall()
    assert [(key, text, apples, pears) for key, _, text, apples, pears in rows] == [
        ("k4", None, 2, None),
        ("k3", None, 2, None),
    ]
    assert "TEMP B-TREE" not in plan


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=f"abcdeilmnorstuyzAZ09 .,'_-{NON_ASCII}", min_size=1, max_size=80),
    st.lists(
        st.sampled_from(["cafe", "zurich", "alpha", "resume", "stair", "a", "中文", "is"]),
        min_size=1,
        max_size=4,
    ),
)
def test_a_score_from_the_counts_is_the_score_from_the_text(text: str, words: list[str]) -> None:
    phrases = match_phrases(" OR ".join(f'"{word}"' for word in words))
    stats = TextStatistics(docs=50, tokens=400, frequencies=dict.fromkeys(phrases, 3))
    scorer = PhraseScorer(phrases, stats)
    length = len(tokens(text)) + 1
    counts = Counter(tokens(text))
    assert scorer.score_counts(counts, length) == scorer.score(text, length)


async def test_a_text_filter_beside_the_match_names_the_records_text(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    await write(path)
    backend = await SqliteBackend.open(path)
    try:
        query = RecordQuery("ns", ALICE, text_any=("Lisbon",))
        hits = await backend.search.text(query, MATCH, 10)
    finally:
        await backend.close()
    assert sorted(hit.key for hit, _ in hits) == ["k1", "k4"]
