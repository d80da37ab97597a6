"""The full-text index's partition token: the same word in SQL and in Python, searches that
stay inside their partition, and an upgrade of a file written before the token existed."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

import engramdb
from engramdb import EngineConfig, MemoryItem
from engramdb.core.scope import Scope
from engramdb.index.search_config import SearchConfig
from engramdb.storage.migrations import Migration
from engramdb.storage.sqlite import backend as sqlite_backend
from engramdb.storage.sqlite.partition import partition_token
from engramdb.storage.sqlite.schema import MIGRATIONS
from engramdb.storage.sqlite.text_tokens import register_text_functions

COLUMNS = (
    ("episodic", "acme", "alice", "", "s-1", ""),
    ("procedural", "ácme", "ünïcode user", "helper", "", "plan 7"),
    ("semantic", "t", "", "", "", ""),
)


def test_python_token_equals_the_stored_column(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "t.db")
    register_text_functions(conn)
    for migration in MIGRATIONS:
        for statement in migration.statements:
            conn.execute(statement)
    for row in COLUMNS:
        conn.execute(
            "INSERT INTO records (namespace, tenant, user_id, agent, session, plan, key, value, "
            "content_type, metadata, text, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?, 'k', '1', 'text', '{}', 'x', 't', 't')",
            row,
        )
    stored = [r[0] for r in conn.execute("SELECT part FROM records ORDER BY id")]
    assert stored == [partition_token(row[0], row[1:]) for row in COLUMNS]
    # Each token is one word to the index: it finds exactly its own document.
    for row in COLUMNS:
        token = partition_token(row[0], row[1:])
        hits = conn.execute(
            "SELECT count(*) FROM records_fts WHERE records_fts MATCH ?", (f"part : {token}",)
        ).fetchone()
        assert hits == (1,)


async def test_search_stays_in_its_partition_among_many_others(tmp_path: Path) -> None:
    async with engramdb.open(tmp_path / "p.db", config=EngineConfig(embedder=None)) as engram:
        for user in ("alice", "bob", "carol"):
            mem = engram.scope(tenant="acme", user=user)
            await mem.episodic.memorize_many(
                [MemoryItem(text=f"{user} talked about the harbour ferry {i}") for i in range(30)]
            )
            await mem.procedural.memorize(MemoryItem(text=f"When asked about ferries, {user}"))
        hits = await engram.scope(tenant="acme", user="bob").procedural.remember("ferry")
        assert [h.text for h in hits] == ["When asked about ferries, bob"]
        hits = await engram.scope(tenant="acme", user="carol").episodic.remember("ferry", limit=50)
        assert len(hits) == 30
        assert all(h.text.startswith("carol") for h in hits)


async def test_a_file_from_before_the_token_is_upgraded_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    config = EngineConfig(embedder=None)
    older = [m for m in MIGRATIONS if m.name < "0005"]
    # Today's code writes record versions: the old file has the column while it is written,
    # and loses it before the upgrade, as a file from before had none.
    versions = next(m for m in MIGRATIONS if m.name == "0007_record_versions")
    older[-1] = Migration(older[-1].name, (*older[-1].statements, *versions.statements))
    with monkeypatch.context() as patch:
        patch.setattr(sqlite_backend, "MIGRATIONS", tuple(older))
        async with engramdb.open(path, config=config) as engram:
            mem = engram.scope(tenant="acme", user="alice")
            await mem.episodic.memorize(MemoryItem(text="the lighthouse keeper retired"))
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE records DROP COLUMN version")
        assert "part" not in [r[1] for r in conn.execute("PRAGMA table_xinfo(records)")]
    async with engramdb.open(path, config=config) as engram:
        mem = engram.scope(tenant="acme", user="alice")
        assert [h.text for h in await mem.episodic.remember("lighthouse")] == [
            "the lighthouse keeper retired"
        ]


async def test_the_most_common_words_give_way_when_too_many_documents_would_be_scored(
    tmp_path: Path,
) -> None:
    texts = [f"the harbour ferry left at {i}" for i in range(30)]
    texts += ["a lighthouse by the ferry pier", "the old lighthouse keeper"]

    async def found(budget: int) -> list[str]:
        config = EngineConfig(
            embedder=None, search=SearchConfig(max_term_share=0, max_scored_docs=budget)
        )
        async with engramdb.open(tmp_path / f"b{budget}.db", config=config) as engram:
            mem = engram.scope(tenant="acme", user="alice")
            await mem.episodic.memorize_many([MemoryItem(text=t) for t in texts])
            return [h.text for h in await mem.episodic.remember("ferry lighthouse", limit=10)]

    everything = await found(0)
    assert len(everything) == 10
    assert any(t.startswith("the harbour ferry") for t in everything)
    # 32 documents would be scored for both words; within 5 only the rarer word is asked.
    assert sorted(await found(5)) == sorted(
        ["a lighthouse by the ferry pier", "the old lighthouse keeper"]
    )


@st.composite
def partitions(draw: st.DrawFn) -> tuple[str, tuple[str, ...]]:
    """A namespace (which may hold the separator) and the five scope columns of a valid
    scope, cut from one short list of pieces so that different cuts spell alike."""
    pieces = draw(st.lists(st.sampled_from(["", "a", "b", "a:b", "é"]), min_size=6, max_size=9))
    namespace, columns = "\x1f".join(pieces[:-5]), tuple(pieces[-5:])
    assume(columns[0] != "")  # a scope always has its tenant
    return namespace, Scope.from_columns(*columns).columns()


@given(first=partitions(), second=partitions())
@example(first=("a", ("b:c", "", "", "", "")), second=("a:b", ("c", "", "", "", "")))
@example(first=("a", ("bc", "", "", "", "")), second=("ab", ("c", "", "", "", "")))
@example(first=("a\x1fb", ("c", "d", "", "", "")), second=("a", ("b", "c", "d", "", "")))
def test_no_two_partitions_share_a_token(
    first: tuple[str, tuple[str, ...]], second: tuple[str, tuple[str, ...]]
) -> None:
    if first != second:
        assert partition_token(*first) != partition_token(*second)
