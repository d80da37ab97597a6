"""SQL building, row mapping, migrations and target parsing, without a database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

import engramdb
from engramdb.core.errors import MigrationError, UnsupportedTargetError, ValidationError
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.backend import EventQuery
from engramdb.storage.migrations import Migration, pending
from engramdb.storage.records import Record, RecordQuery
from engramdb.storage.registry import split_target
from engramdb.storage.rows import event_read_sql, like_pattern, record_row, row_record, time_text
from engramdb.storage.sqlite.queries import json_path, prefix_bounds, record_where


def test_record_where_fixes_every_level_of_an_exact_scope() -> None:
    where, params = record_where(RecordQuery("ns", Scope(tenant="t", user="u")))
    assert where == (
        "namespace = ? AND tenant = ? AND user_id = ? AND agent = ? AND session = ? AND plan = ?"
        " AND hidden_at IS NULL"
    )
    assert params == ["ns", "t", "u", "", "", ""]


def test_record_where_with_a_filter_and_options() -> None:
    moment = datetime(2026, 1, 1, tzinfo=UTC)
    where, params = record_where(
        RecordQuery(
            "ns",
            ScopeFilter(Scope(tenant="t"), ("tenant",)),
            prefix="ab",
            content_types=("fact",),
            metadata={"k": 1},
            text_any=("x_y",),
            alive_at=moment,
        )
    )
    assert "key >= ? AND key < ?" in where
    assert params[:4] == ["ns", "t", "ab", "ac"]
    assert "x\\_y" in params[-2]
    assert params[-1] == "2026-01-01T00:00:00.000000+00:00"


def test_unscoped_query_spans_tenants_only_when_asked() -> None:
    where, _ = record_where(RecordQuery("ns", None, hidden=None))
    assert where == "namespace = ?"


def test_helpers() -> None:
    assert prefix_bounds("user.") == ("user.", "user/")
    assert prefix_bounds("") is None
    assert like_pattern("50%_off\\") == "%50\\%\\_off\\\\%"
    assert json_path("a.b") == '$."a.b"'
    with pytest.raises(ValidationError):
        json_path('a"b')
    assert (
        time_text(datetime(2026, 1, 1, 1, tzinfo=timezone(timedelta(hours=1))))
        == "2026-01-01T00:00:00.000000+00:00"
    )
    with pytest.raises(ValueError, match="naive"):
        time_text(datetime(2026, 1, 1))


def test_record_rows_round_trip() -> None:
    record = Record(
        "ns",
        Scope(tenant="t", session="s"),
        "k",
        {"v": [1, "ü"]},
        "fact",
        {"m": None},
        datetime(2026, 1, 1, tzinfo=UTC),
        None,
        5,
        datetime(2026, 1, 2, tzinfo=UTC),
        "k v",
    )
    assert row_record(record_row(record)) == record


def test_pending_migrations() -> None:
    known = [Migration("0001_a", ()), Migration("0002_b", ())]
    assert pending(known, []) == known
    assert pending(known, ["0001_a"]) == known[1:]
    assert pending(known, ["0001_a", "0002_b"]) == []
    with pytest.raises(MigrationError, match="newer"):
        pending(known, ["0001_a", "0003_future"])
    with pytest.raises(MigrationError):
        pending([*known, Migration("0001_a", ())], [])


async def test_migrations_are_recorded_and_a_newer_database_is_refused(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "m.db"
    async with engramdb.open(path):
        pass
    with sqlite3.connect(path) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM engram_migrations ORDER BY rowid")]
        assert names == [
            "0001_event_log",
            "0002_records",
            "0003_search_indexes",
            "0004_forgetting",
            "0005_fts_partitions",
            "0006_part_vectors",
            "0007_record_versions",
            "0008_text_stats",
            "0009_text_terms",
            "0010_text_counts",
        ]
        conn.execute("INSERT INTO engram_migrations VALUES ('9999_future', 'x')")
    with pytest.raises(MigrationError):
        async with engramdb.open(path):
            pass


def test_targets() -> None:
    assert split_target("memory.db") == ("sqlite", "memory.db")
    assert split_target(":memory:") == ("sqlite", ":memory:")
    assert split_target("sqlite:///rel.db") == ("sqlite", "rel.db")
    assert split_target("sqlite:////abs/x.db") == ("sqlite", "/abs/x.db")
    assert split_target("postgresql+psycopg://h/db")[0] == "postgresql"


async def test_unknown_targets_are_typed_errors() -> None:
    with pytest.raises(UnsupportedTargetError, match="known: postgresql, sqlite"):
        await engramdb.open("redis://localhost")
    with pytest.raises(UnsupportedTargetError):
        await engramdb.open("sqlite://")


def test_the_event_read_statement_orders_and_limits_for_each_driver() -> None:
    where, params = "tenant = ?", ["acme"]
    assert event_read_sql("SELECT * FROM events", where, params, EventQuery(), "?") == (
        "SELECT * FROM events WHERE tenant = ? ORDER BY position ASC",
        ["acme"],
    )
    newest = EventQuery(newest_first=True, limit=5)
    assert event_read_sql("SELECT 1", "true", [], newest, "%s") == (
        "SELECT 1 WHERE true ORDER BY position DESC LIMIT %s",
        [5],
    )
    assert params == ["acme"]  # the caller's parameters are left as they were
