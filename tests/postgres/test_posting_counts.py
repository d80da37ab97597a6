"""Each posting keeps how often its record holds its word and how many words the record holds
(migration 0019), and the pruned full-text search scores its hits from those counts: the same
scores as reading each hit's words, within the bound on a word's records and beyond it, for
postings written before the migration as for those written after."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from engramdb.core.types import utc_now
from engramdb.storage.postgres import PostgresBackend, backend, migrate
from engramdb.storage.postgres.connection import Read
from engramdb.storage.postgres.schema import MIGRATIONS
from engramdb.storage.postgres.tenancy import ADMIN
from engramdb.storage.records import Hide, Put, RecordQuery
from engramdb.storage.search_backend import BestHits, WordPruning
from tests.postgres.conftest import ACME_ALICE, secret
from tests.postgres.database import scratch_database

#: Prunes no word: every word of the query is scored.
_EVERY_WORD = WordPruning(max_term_share=0.0, min_docs=1, max_scored_docs=0)


def _texts() -> Iterator[str]:
    """Texts where "apple" is held by 15 records, some twice, and "walnut" by two old ones."""
    yield "walnut apple apple cake"
    yield "walnut bread"
    for n in range(40):
        apples = ["apple"] * (1 + n % 2) if n % 3 == 0 else []
        yield " ".join([*apples, f"pie{n}", "of", "the", "day" if n % 2 else "night"])


async def _store(backend: PostgresBackend) -> None:
    await backend.commit(
        [
            Put(replace(secret("semantic", ACME_ALICE, key=f"k{n:02}").record, text=text))
            for n, text in enumerate(_texts())
        ],
        [],
    )
    await backend.commit([Hide("semantic", ACME_ALICE, "k05", utc_now())], [])


async def _same_scores(backend: PostgresBackend) -> None:
    """The pruned search's hits and scores are those of the general one, which reads each
    hit's words, with a word's records bounded at four and without a bound."""
    query = RecordQuery("semantic", ACME_ALICE, alive_at=utc_now())
    search = backend.search
    for bound in (4, 1000):
        search.scored_per_word = bound
        for terms in (["walnut", "apple"], ["apple", "pie7", "day"], ["walnut"]):
            pruned = await search.text_pruned(query, terms, _EVERY_WORD, 100, BestHits(None, 5))
            general = await search.text(query, " OR ".join(f'"{t}"' for t in terms), 100)
            assert pruned is not None
            assert [i for i, _ in pruned] == [r.id for r, _ in general]
            assert [s for _, s in pruned] == pytest.approx([s for _, s in general], rel=1e-12)
    # Beyond the bound (only the four newest apples are walked), the old record found by
    # "walnut" still counts its apples.
    search.scored_per_word = 4

    async def scores(*terms: str) -> dict[int, float]:
        found = await search.text_pruned(query, terms, _EVERY_WORD, 100, BestHits(None, 5))
        return dict(found or [])

    (k00,) = [r.id or 0 for r, _ in await search.text(query, '"cake"', 10)]
    assert (await scores("walnut", "apple"))[k00] > (await scores("walnut"))[k00]


async def test_pruned_scores_come_from_the_postings(backend: PostgresBackend) -> None:
    await _store(backend)
    await _same_scores(backend)


async def test_postings_stored_before_the_counts_get_theirs_from_their_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    counts = [m.name for m in MIGRATIONS].index("0019_posting_counts")
    with scratch_database("posting_counts") as url:
        monkeypatch.setattr(backend, "MIGRATIONS", MIGRATIONS[:counts])
        await migrate(url)
        older = await PostgresBackend.open(url)
        try:
            await _store(older)
        finally:
            await older.close()
        monkeypatch.setattr(backend, "MIGRATIONS", MIGRATIONS)
        assert await migrate(url) == ["0019_posting_counts"]
        opened = await PostgresBackend.open(url)
        try:
            counted = await opened._pool.read(
                ADMIN,
                Read(
                    """SELECT count(*), count(*) FILTER (WHERE p.tf = cardinality(w.positions)
                                                         AND p.dl = length(r.tsv))
                    FROM text_postings p JOIN semantic_memory r ON r.id = p.record_id
                    CROSS JOIN LATERAL unnest(r.tsv) AS w WHERE w.lexeme = p.lexeme"""
                ),
            )
            # Written after the migration: counted by the trigger.
            await opened.commit([secret("semantic", ACME_ALICE, key="later")], [])
            (later,) = await opened._pool.read(
                ADMIN,
                Read("SELECT count(*) FROM text_postings WHERE tf IS NULL OR dl IS NULL"),
            )
            await _same_scores(opened)
        finally:
            await opened.close()
    ((postings, right),) = counted
    assert postings == right > 40
    assert later == (0,)
