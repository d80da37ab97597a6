"""The ``text_stats`` rows the write triggers keep are what counting the records gives, after
inserts, replaces, vector updates, deletes and a tenant's deletion, for every memory table."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import psycopg

from engramdb.storage.postgres import PostgresBackend
from engramdb.storage.postgres.schema import RECORD_TABLES
from engramdb.storage.records import Delete, Put, RecordQuery
from tests.postgres.conftest import ACME_ALICE, ACME_BOB, GLOBEX, NAMESPACES, secret

_KEY = "namespace, tenant, user_id, agent, session, plan"


def stats(url: str) -> tuple[list[Any], list[Any]]:
    """The kept rows (partitions with records left) and a fresh count of the records."""
    counted = " UNION ALL ".join(
        f"SELECT {_KEY}, count(*), sum(length(tsv)) FROM {table} GROUP BY {_KEY}"
        for table in RECORD_TABLES
    )
    with psycopg.connect(url) as conn:
        kept = conn.execute(
            f"SELECT {_KEY}, docs, lexemes FROM text_stats WHERE docs > 0 ORDER BY {_KEY}"
        ).fetchall()
        fresh = conn.execute(f"SELECT * FROM ({counted}) AS c ORDER BY {_KEY}").fetchall()
    return kept, fresh


async def test_the_kept_statistics_are_the_counted_ones(backend: PostgresBackend, url: str) -> None:
    scopes = (ACME_ALICE, ACME_BOB, GLOBEX)
    await backend.commit(
        [secret(ns, scope, key) for ns in NAMESPACES for scope in scopes for key in "abc"], []
    )
    kept, fresh = stats(url)
    assert kept == fresh
    assert len(kept) == len(NAMESPACES) * len(scopes)
    # A replace with a longer text, a replace with the same text, vectors set alone, deletes.
    longer = Put(replace(secret("episodic", ACME_ALICE, "a").record, text="a far longer one"))
    await backend.commit([longer, secret("semantic", GLOBEX, "b")], [])
    ids = await backend.search.record_ids(RecordQuery("procedural", ACME_BOB))
    await backend.search.put_vectors("other-model", [(i, b"\x00" * 32) for i in ids], [])
    await backend.commit(
        [Delete("plans", ACME_BOB, "a"), Delete("graph_entities", GLOBEX, "c")], []
    )
    kept, fresh = stats(url)
    assert kept == fresh
    # A tenant's deletion takes its rows away with its records.
    assert await backend.delete_tenant("globex")
    kept, fresh = stats(url)
    assert kept == fresh
    assert all(row[1] != "globex" for row in kept)
