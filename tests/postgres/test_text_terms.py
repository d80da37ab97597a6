"""The ``text_terms`` and ``text_postings`` rows the write triggers keep are what counting the
records gives, after inserts, replaces, hides, deletes, a tenant's deletion and a rebuild (the
bound on the records scored per word is checked on every backend, in
``tests/conformance/test_search_paths.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from typing import Any

import psycopg

from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.backend import EventQuery
from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.schema import RECORD_TABLES, SERVICE_ROLE
from engramdb.storage.postgres.tenancy import tenant_uuid, user_uuid
from engramdb.storage.records import Delete, Hide, Put, Record, RecordQuery
from tests.postgres.conftest import ACME_ALICE, ACME_BOB, GLOBEX, NAMESPACES, T0, secret

_POSTINGS = (
    "SELECT tenant_uuid, engram_partition_key(namespace, tenant, user_id, agent, session, plan) "
    "AS part_key, lexeme, id, user_uuid FROM {table}, unnest(tsvector_to_array(tsv)) AS lexeme"
)
WORDS = ("apple", "pear", "plum", "fig", "kiwi", "lime")


def kept_and_counted(url: str) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    """The kept terms, their fresh count, the kept postings and the records' postings."""
    postings = " UNION ALL ".join(_POSTINGS.format(table=table) for table in RECORD_TABLES)
    with psycopg.connect(url) as conn:
        terms = conn.execute(
            "SELECT tenant_uuid, part_key, lexeme, user_uuid, docs FROM text_terms ORDER BY 1, 2, 3"
        ).fetchall()
        counted = conn.execute(
            f"SELECT tenant_uuid, part_key, lexeme, user_uuid, count(*) FROM ({postings}) AS p "
            "GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3"
        ).fetchall()
        kept = conn.execute(
            "SELECT tenant_uuid, part_key, lexeme, record_id, user_uuid FROM text_postings "
            "ORDER BY 1, 2, 3, 4"
        ).fetchall()
        fresh = conn.execute(f"SELECT * FROM ({postings}) AS p ORDER BY 1, 2, 3, 4").fetchall()
    return terms, counted, kept, fresh


def assert_kept(url: str) -> int:
    """The kept rows are the counted ones; returns how many terms there are."""
    terms, counted, kept, fresh = kept_and_counted(url)
    assert terms == counted
    assert kept == fresh
    return len(terms)


def fruit(namespace: str, scope: Scope, key: str, at: int) -> Put:
    """A record whose text holds some of ``WORDS``, different for each ``at``."""
    put = secret(namespace, scope, key)
    text = " ".join(WORDS[i % len(WORDS)] for i in range(at, at + 1 + at % 3))
    return Put(replace(put.record, text=f"{text} of {scope.label()}"))


async def test_the_kept_terms_are_the_counted_ones(backend: PostgresBackend, url: str) -> None:
    scopes = (ACME_ALICE, ACME_BOB, GLOBEX)
    await backend.commit(
        [
            fruit(ns, scope, key, at)
            for ns in NAMESPACES
            for scope in scopes
            for at, key in enumerate("abcd")
        ],
        [],
    )
    assert assert_kept(url) > len(NAMESPACES) * len(scopes)
    # Replaces with new words, with the same text, vectors set alone, a hide, deletes.
    await backend.commit(
        [
            fruit("episodic", ACME_ALICE, "a", 5),
            fruit("semantic", GLOBEX, "b", 1),
            Put(replace(fruit("plans", ACME_BOB, "c", 2).record, text="")),
            Hide("procedural", ACME_ALICE, "d", T0 + timedelta(days=1)),
        ],
        [],
    )
    ids = await backend.search.record_ids(RecordQuery("procedural", ACME_BOB))
    await backend.search.put_vectors("other-model", [(i, b"\x00" * 32) for i in ids], [])
    # One statement replacing one record's words and keeping another's.
    await backend.commit(
        [fruit("workspace", GLOBEX, "a", 0), fruit("workspace", GLOBEX, "b", 4)], []
    )
    await backend.commit(
        [Delete("plans", ACME_BOB, "a"), Delete("graph_entities", GLOBEX, "c")], []
    )
    assert_kept(url)
    # A tenant's deletion takes its rows away with its records.
    assert await backend.delete_tenant("globex")
    assert_kept(url)
    assert words_of(url, "globex") == (0, 0)


def words_of(url: str, tenant: str) -> tuple[int, int]:
    """How many terms and postings of ``tenant`` are stored."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM text_terms WHERE tenant_uuid = %(t)s), "
            "(SELECT count(*) FROM text_postings WHERE tenant_uuid = %(t)s)",
            {"t": tenant_uuid(tenant)},
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


async def test_a_deleted_tenant_leaves_no_words_even_miscounted_ones(
    backend: PostgresBackend, url: str
) -> None:
    await backend.commit([fruit("episodic", GLOBEX, "a", 1)], [])
    with psycopg.connect(url) as conn:
        # Rows no record accounts for (as a bug in counting would leave) go with the tenant.
        conn.execute(
            "INSERT INTO text_terms (tenant_uuid, part_key, lexeme, user_uuid, docs) "
            "VALUES (%s, 'stray:', 'stray', NULL, 3)",
            (tenant_uuid("globex"),),
        )
        conn.execute(
            "INSERT INTO text_postings (tenant_uuid, part_key, lexeme, record_id, user_uuid) "
            "VALUES (%s, 'stray:', 'stray', -1, NULL)",
            (tenant_uuid("globex"),),
        )
    assert words_of(url, "globex") > (1, 1)
    assert await backend.delete_tenant("globex")
    assert words_of(url, "globex") == (0, 0)


async def test_a_rebuild_keeps_the_terms_of_what_it_stored(
    backend: PostgresBackend, url: str
) -> None:
    await backend.commit(
        [
            fruit("episodic", scope, k, at)
            for scope in (ACME_ALICE, ACME_BOB)
            for at, k in enumerate("abc")
        ],
        [],
    )
    # Rebuild Alice's partition to one record: its writes keep the terms, as any write does.

    def fold(events: Iterator[EventEnvelope]) -> list[Record]:
        return [fruit("episodic", ACME_ALICE, "new", 4).record]

    only_alice = ScopeFilter(ACME_ALICE)
    await backend.rebuild("episodic", only_alice, EventQuery(scope=only_alice), fold)

    def same(events: Iterator[EventEnvelope]) -> list[Record]:
        return [fruit("episodic", ACME_BOB, k, at).record for at, k in enumerate("abc")]

    only_bob = ScopeFilter(ACME_BOB)
    await backend.rebuild("episodic", only_bob, EventQuery(scope=only_bob), same)
    assert assert_kept(url) > 0
    assert await backend.search.document_frequencies("episodic", ACME_ALICE, ["kiwi", "apple"]) == {
        "kiwi": 1,
        "apple": 0,
    }


async def test_a_users_words_are_hidden_from_another_user_of_its_tenant(
    backend: PostgresBackend, url: str
) -> None:
    await backend.commit(
        [fruit("episodic", scope, "a", 0) for scope in (ACME_ALICE, ACME_BOB, GLOBEX)], []
    )
    alice = user_uuid("acme", "alice")
    for table in ("text_terms", "text_postings"):
        with psycopg.connect(url) as conn:
            conn.execute(f"SET LOCAL ROLE {SERVICE_ROLE}")
            conn.execute(
                "SELECT set_config('app.current_tenant', %s, true)", (str(tenant_uuid("acme")),)
            )
            conn.execute("SELECT set_config('app.current_user', %s, true)", (str(alice),))
            users = conn.execute(f"SELECT DISTINCT user_uuid FROM {table}").fetchall()
        assert users == [(alice,)]


async def test_a_writes_words_are_looked_up_by_key_however_small_the_tables_were(
    backend: PostgresBackend, url: str
) -> None:
    """A connection keeps the trigger's plans from its first write: made while the words'
    tables were small, they must still look a write's words up by key, not read every row of
    every tenant, once the tables have grown."""
    await backend.commit([fruit("episodic", ACME_ALICE, k, at) for at, k in enumerate("ab")], [])
    rewrite = "UPDATE episodic_memory SET text = %s WHERE key = 'a'"
    seq_scans = (
        "SELECT pg_stat_get_xact_numscans('text_terms'::regclass), "
        "pg_stat_get_xact_numscans('text_postings'::regclass)"
    )
    others = (tenant_uuid("globex"),)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(rewrite, ("fig kiwi",))
        conn.execute(
            "INSERT INTO text_terms (tenant_uuid, part_key, lexeme, user_uuid, docs) "
            "SELECT %s, 'other:', 'w' || n, NULL, 1 FROM generate_series(1, 5000) AS n",
            others,
        )
        with conn.transaction():
            before = conn.execute(seq_scans).fetchone()
            conn.execute(rewrite, ("plum lime",))
            assert conn.execute(seq_scans).fetchone() == before
        conn.execute("DELETE FROM text_terms WHERE tenant_uuid = %s", others)
    assert assert_kept(url) > 0
