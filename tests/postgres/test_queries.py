"""The PostgreSQL backend's pure parts, without a database: SQL building, tenancy contexts,
the pgvector wire format."""

from __future__ import annotations

import uuid

import numpy as np
import pytest

from engramdb.core.scope import Scope, ScopeFilter
from engramdb.storage.postgres.connection import redacted_url
from engramdb.storage.postgres.queries import (
    VectorSets,
    match_words,
    nearest_select,
    record_select_text,
    record_where,
    text_search,
)
from engramdb.storage.postgres.schema import ADMIN_ROLE, SERVICE_ROLE, table_for
from engramdb.storage.postgres.tenancy import (
    ADMIN,
    NOBODY,
    Context,
    context_for,
    tenant_uuid,
    user_uuid,
)
from engramdb.storage.postgres.vectors import (
    StoredVector,
    VectorDumper,
    VectorLoader,
    hnsw_index_name,
    hnsw_index_sql,
)
from engramdb.storage.postgres.word_pruning import pruned_text_search
from engramdb.storage.records import RecordQuery
from engramdb.storage.search_backend import WordPruning

ALICE = Scope(tenant="acme", user="alice", agent="helper")


@pytest.mark.parametrize(
    ("match", "words"),
    [
        ('"apple" OR "pie"', ["apple", "pie"]),
        ('"Lisbon" OR "lisbon" OR "moved"', ["lisbon", "moved"]),
        ('"say ""hi""" OR "x"', ["say", "hi", "x"]),
        ("apple AND NOT pear", ["apple", "pear"]),
        ('"" OR "  "', []),
    ],
)
def test_match_words_reads_fts5_expressions(match: str, words: list[str]) -> None:
    assert match_words(match) == words


def test_text_search_quotes_every_word_as_an_alternative() -> None:
    _, params = text_search(RecordQuery("episodic", ALICE), ["lives", "lisbon"], 5)
    assert params[0] == "lives lisbon"
    assert '"lives" or "lisbon"' in params
    assert params[-1] == 5


def test_namespaces_map_to_their_memory_tables() -> None:
    assert table_for("episodic") == "episodic_memory"
    assert table_for("semantic_public") == "semantic_memory"
    assert table_for("workspace") == "working_memory"
    assert table_for("task_context") == "task_context"
    assert table_for("graph_entities") == "memory_records"


def test_record_where_compares_metadata_as_typed_json() -> None:
    where, params = record_where(RecordQuery("ns", ALICE, metadata={"n": True}, keys=("a",)))
    assert "metadata::jsonb -> %s = %s::jsonb" in where
    assert params[-2:] == ["n", "true"]
    assert ["a"] in params


def test_context_follows_the_one_tenant_a_call_touches() -> None:
    bob = ALICE.model_copy(update={"user": "bob"})
    tenant_wide = ScopeFilter(Scope(tenant="acme"), ("tenant",))
    assert context_for([ALICE, ALICE]) == Context(SERVICE_ROLE, "acme", "alice")
    assert context_for([ALICE, bob]) == Context(SERVICE_ROLE, "acme", None)
    assert context_for([tenant_wide]) == Context(SERVICE_ROLE, "acme", None)
    assert context_for([ALICE, Scope(tenant="globex")]) == ADMIN
    assert context_for([None]) == ADMIN
    assert context_for([]) == NOBODY
    assert ADMIN.role == ADMIN_ROLE


def test_context_settings_are_uuids_or_empty() -> None:
    tenant, user = Context(SERVICE_ROLE, "acme", "alice").settings()
    assert tenant == str(tenant_uuid("acme"))
    assert user == str(user_uuid("acme", "alice"))
    assert uuid.UUID(user).version == 8
    assert Context(SERVICE_ROLE, "acme").settings()[1] == ""
    assert NOBODY.settings() == ("", "")


def test_vector_wire_format_round_trips() -> None:
    vector = np.asarray([0.5, -1.25, 3e-8], dtype="<f4").tobytes()
    wire = bytes(VectorDumper(StoredVector).dump(StoredVector(vector)))
    assert wire[:4] == b"\x00\x03\x00\x00"
    assert VectorLoader(0).load(wire) == vector


def test_hnsw_index_is_named_and_typed_per_model() -> None:
    sql = hnsw_index_sql("semantic_memory", "it's-a-model", 384)
    assert hnsw_index_name("semantic_memory", "it's-a-model") in sql
    assert "vector(384)" in sql
    assert "'it''s-a-model'" in sql


def test_urls_lose_their_password() -> None:
    assert redacted_url("postgresql://me:secret@db:5433/engram") == "postgresql://me@db:5433/engram"


def test_searches_reading_their_best_hits_take_the_same_parameters() -> None:
    query = RecordQuery("episodic", ALICE)
    sets = VectorSets("m'odel", 30)
    plain_sql, plain = nearest_select(query, "m'odel", 3, 10, 5000)
    best_sql, best = nearest_select(query, "m'odel", 3, 10, 5000, sets)
    assert best == plain
    assert best_sql.count("%s") == plain_sql.count("%s")
    assert "row_number() OVER (ORDER BY 1 - distance DESC, id) <= 30" in best_sql
    assert "r.embedding_model = 'm''odel'" in best_sql
    _, text_plain = text_search(query, ["lives", "lisbon"], 5)
    _, text_best = text_search(query, ["lives", "lisbon"], 5, sets=sets)
    assert text_best == text_plain


def test_binary_rows_read_json_and_times_as_text() -> None:
    columns = record_select_text("r").split(", ")
    assert "r.metadata::text AS metadata" in columns
    assert "r.created_at::text AS created_at" in columns
    assert "r.key" in columns
    assert columns[-1] == "r.id"


def test_pruned_text_search_takes_the_words_from_the_statement() -> None:
    rule = WordPruning(0.05, 100, 4000)
    sql, params = pruned_text_search(
        RecordQuery("episodic", ALICE), ["lives", "lisbon"], rule, 5, tenant_uuid("acme")
    )
    assert params[0] == ['"lives"', '"lisbon"']
    assert params[8] == ["lives", "lisbon"]
    assert "lives lisbon" not in params
    assert sql.count("%s") == len(params)
