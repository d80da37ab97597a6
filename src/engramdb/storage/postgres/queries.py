"""Pure SQL building for the PostgreSQL backend (tested without a database).

Rows keep the shared record layout of ``storage.rows``; on top of it each memory table carries
the UUIDs of its tenant and user replicas (what row-level security and the cascades key on),
a generated ``tsvector`` and an optional pgvector embedding.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from engramdb.core.scope import LEVELS, Level, Scope, ScopeFilter
from engramdb.core.validation import to_json
from engramdb.storage.backend import EventQuery
from engramdb.storage.postgres.schema import PARTITION_WORDS, TEXT_CONFIG, table_for
from engramdb.storage.records import RecordQuery, as_filter
from engramdb.storage.rows import (
    EVENT_COLUMNS,
    RECORD_COLUMNS,
    RECORD_SELECTED,
    like_pattern,
    time_text,
)
from engramdb.storage.search_backend import SCORED_PER_WORD

#: Scope level → column: the five scope columns of the shared record layout.
LEVEL_COLUMNS: dict[Level, str] = dict(zip(LEVELS, RECORD_COLUMNS[1:6], strict=True))
PARTITION = (
    "namespace = %s AND tenant = %s AND user_id = %s AND agent = %s AND session = %s AND plan = %s"
)
#: Columns a write sets: the replica ids, the record, the embedding, its model and the part
#: embeddings (float32 bytes).
WRITTEN_COLUMNS = (
    "tenant_uuid",
    "user_uuid",
    *RECORD_COLUMNS,
    "embedding",
    "embedding_model",
    "embedding_parts",
)
_UPDATED = (
    "value",
    "content_type",
    "metadata",
    "text",
    "ttl_ms",
    "expires_at",
    "occurred_at",
    "hidden_at",
    "embedding",
    "embedding_model",
    "embedding_parts",
)
EVENT_SELECT = f"SELECT position, {', '.join(EVENT_COLUMNS)} FROM events"
# No conflict target: the id derives from the name, so the name's unique key meets the same
# row, and two first writes of a tenant racing from two processes must both pass (with a
# target, the loser fails on the key that is not its target).
UPSERT_TENANT = "INSERT INTO tenants (id, name) VALUES (%s, %s) ON CONFLICT DO NOTHING"
UPSERT_USER = (
    "INSERT INTO users (id, tenant_uuid, username) VALUES (%s, %s, %s) ON CONFLICT DO NOTHING"
)
#: BM25 parameters, as SQLite's FTS5 uses them.
BM25_K1 = 1.2
BM25_B = 0.75


def record_select_list(alias: str = "r") -> str:
    """The columns of a whole record (``RECORD_SELECTED`` order) from table alias ``alias``."""
    return ", ".join(f"{alias}.{column}" for column in RECORD_SELECTED)


#: The record columns whose binary form is not the text the shared row mapping parses.
_AS_TEXT = frozenset({"value", "metadata", "created_at", "updated_at", "expires_at"})
_AS_TEXT |= {"occurred_at", "hidden_at"}


def record_select_text(alias: str = "r") -> str:
    """``record_select_list`` for rows read in binary: JSON and times cast to their text."""
    return ", ".join(
        f"{alias}.{column}::text AS {column}" if column in _AS_TEXT else f"{alias}.{column}"
        for column in RECORD_SELECTED
    )


def _values(columns: int, rows: int) -> str:
    """``rows`` parenthesised lists of ``columns`` placeholders, for a multi-row VALUES."""
    row = f"({', '.join(['%s'] * columns)})"
    return ", ".join([row] * rows)


def insert_events_sql(rows: int) -> str:
    """An INSERT of ``rows`` events (each its tenant id, then ``EVENT_COLUMNS``), returning
    each one's event id and position."""
    return (
        f"INSERT INTO events (tenant_uuid, {', '.join(EVENT_COLUMNS)}) "
        f"VALUES {_values(len(EVENT_COLUMNS) + 1, rows)} RETURNING event_id, position"
    )


def _on_key(namespace: str, then: str, rows: int) -> str:
    """INSERT … ON CONFLICT of ``rows`` records into ``namespace``'s table
    (``WRITTEN_COLUMNS`` order, no key twice) that replaces each stored one's fields and does
    ``then`` too, returning them."""
    updates = ", ".join(f"{column} = excluded.{column}" for column in _UPDATED)
    return (
        f"INSERT INTO {table_for(namespace)} AS r ({', '.join(WRITTEN_COLUMNS)}) "
        f"VALUES {_values(len(WRITTEN_COLUMNS), rows)} "
        "ON CONFLICT (namespace, tenant, user_id, agent, session, plan, key) DO UPDATE SET "
        f"{updates}, version = r.version + 1, {then} RETURNING {record_select_list()}"
    )


def upsert_record(namespace: str, rows: int = 1) -> str:
    """A write of ``rows`` records with distinct keys, returning them as stored; a replace
    keeps ``created_at``."""
    return _on_key(namespace, "updated_at = excluded.created_at", rows)


def create_record(namespace: str, rows: int = 1) -> str:
    """:func:`upsert_record` for ``Put(if_absent=True)``: returns no row for a record whose
    key a live record holds (an expired one is replaced as if new)."""
    return _on_key(
        namespace,
        "created_at = excluded.created_at, updated_at = NULL "
        "WHERE r.expires_at IS NOT NULL AND r.expires_at <= excluded.created_at",
        rows,
    )


def scope_clauses(scope: ScopeFilter | None) -> tuple[list[str], list[Any]]:
    """Equality conditions on the scope columns a filter fixes."""
    if scope is None:
        return [], []
    conditions = scope.conditions()
    return [f"{LEVEL_COLUMNS[level]} = %s" for level, _ in conditions], [v for _, v in conditions]


def record_where(query: RecordQuery) -> tuple[str, list[Any]]:
    """WHERE clause (without the keyword) and parameters for ``query``."""
    clauses = ["namespace = %s"]
    params: list[Any] = [query.namespace]
    scope_sql, scope_params = scope_clauses(None if query.scope is None else as_filter(query.scope))
    clauses += scope_sql
    params += scope_params
    if query.keys is not None:
        clauses.append("key = ANY(%s)")
        params.append(list(query.keys))
    if query.prefix:
        clauses.append("starts_with(key, %s)")
        params.append(query.prefix)
    if query.content_types is not None:
        clauses.append("content_type = ANY(%s)")
        params.append(list(query.content_types))
    for name, value in query.metadata.items():
        # jsonb equality tells true from 1 and "1" from 1; a missing member is NULL.
        clauses.append("metadata::jsonb -> %s = %s::jsonb")
        params += [name, to_json(value, what="metadata filter")]
    if query.text_any:
        clauses.append("(" + " OR ".join("text ILIKE %s" for _ in query.text_any) + ")")
        params += [like_pattern(term) for term in query.text_any]
    if query.value_equals is not None:
        # Values are stored as canonical JSON text (json keeps it), so equal values match.
        clauses.append("value::text = %s")
        params.append(to_json(query.value_equals))
    if query.hidden is not None:
        clauses.append("hidden_at IS NOT NULL" if query.hidden else "hidden_at IS NULL")
    if query.ids is not None:
        clauses.append("id = ANY(%s)")
        params.append(list(query.ids))
    if query.occurred_after is not None:
        clauses.append("coalesce(occurred_at, created_at) >= %s")
        params.append(time_text(query.occurred_after))
    if query.occurred_before is not None:
        clauses.append("coalesce(occurred_at, created_at) < %s")
        params.append(time_text(query.occurred_before))
    if query.alive_at is not None:
        clauses.append("(expires_at IS NULL OR expires_at > %s)")
        params.append(time_text(query.alive_at))
    if query.expired_at is not None:
        clauses.append("expires_at IS NOT NULL AND expires_at <= %s")
        params.append(time_text(query.expired_at))
    return " AND ".join(clauses), params


def record_select(query: RecordQuery, columns: str | None = None) -> tuple[str, list[Any]]:
    """SELECT of ``columns`` (default: a whole record) for ``query``, ordered by key (then
    partition), or by row id when ``query.ids`` is set."""
    where, params = record_where(query)
    selected = record_select_list() if columns is None else columns
    order = "id" if query.ids is not None else "key, tenant, user_id, agent, session, plan"
    sql = f"SELECT {selected} FROM {table_for(query.namespace)} r WHERE {where} ORDER BY {order}"
    if query.limit is not None or query.offset:
        sql += " LIMIT %s OFFSET %s"
        params += [query.limit, query.offset]
    return sql, params


def event_where(query: EventQuery) -> tuple[str, list[Any]]:
    """WHERE clause (without the keyword) and parameters for an event query."""
    clauses = ["position > %s"]
    params: list[Any] = [query.after]
    if query.event_types is not None:
        clauses.append("event_type = ANY(%s)")
        params.append(list(query.event_types))
    scope_sql, scope_params = scope_clauses(query.scope)
    clauses += scope_sql
    params += scope_params
    if query.provider_id is not None:
        clauses.append("provider_id = %s")
        params.append(query.provider_id)
    if query.key is not None:
        clauses.append("payload ->> 'key' = %s")
        params.append(query.key)
    return " AND ".join(clauses), params


def redact_events(namespace: str, scope_sql: list[str], key: str) -> tuple[str, list[Any]]:
    """UPDATE blanking every not yet redacted event about ``key`` (see ``Redact``)."""
    where = " AND ".join(
        [
            "provider_id = %s",
            "payload ->> 'key' = %s",
            *scope_sql,
            "(payload ->> 'redacted') IS DISTINCT FROM '1'",
        ]
    )
    tombstone = to_json({"key": key, "provider_id": namespace, "redacted": 1})
    return f"UPDATE events SET payload = %s WHERE {where}", [tombstone, namespace, key]


def redact_scope_events(scope_sql: list[str], keep: int) -> str:
    """UPDATE blanking every not yet redacted event of some scopes but those of ``keep``
    providers (their ids are the parameters after the scope's; see ``RedactScope``)."""
    conditions = [*scope_sql, "(payload ->> 'redacted') IS DISTINCT FROM '1'"]
    if keep:
        conditions.append(f"provider_id NOT IN ({', '.join(['%s'] * keep)})")
    return (
        "UPDATE events SET payload = json_build_object('key', payload ->> 'key', "
        f"'provider_id', provider_id, 'redacted', 1) WHERE {' AND '.join(conditions)}"
    )


_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_WORD = re.compile(r"\w+", re.UNICODE)
#: The letters and digits of a word, as the full-text index splits it (see ``TEXT_CONFIG``).
_PIECE = re.compile(r"[^\W_]+", re.UNICODE)
_OPERATORS = frozenset({"OR", "AND", "NOT", "NEAR"})


def match_words(match: str) -> list[str]:
    """The words of a full-text expression (quoted phrases and bare words, FTS5 style), in
    order and without repeats; operators are dropped, every word counts as an alternative."""
    words: list[str] = []
    for phrase in _QUOTED.findall(match):
        words += _WORD.findall(phrase.replace('""', '"'))
    words += [w for w in _WORD.findall(_QUOTED.sub(" ", match)) if w not in _OPERATORS]
    return list(dict.fromkeys(word.lower() for word in words))


def word_phrase(word: str) -> str | None:
    """``word`` as a ``websearch_to_tsquery`` phrase of its pieces ("user_city" is the phrase
    "user city", as FTS5 reads it); None for a word without letters or digits."""
    pieces = _PIECE.findall(word)
    return '"' + " ".join(pieces) + '"' if pieces else None


def any_word(words: list[str]) -> str:
    """A ``websearch_to_tsquery`` expression matching any of ``words`` (empty without any
    letter or digit)."""
    return " or ".join(p for p in map(word_phrase, words) if p is not None)


#: The keys of a text's lexemes in a partition's words index (see ``schema.PARTITION_WORDS``);
#: parameters: the partition's namespace and scope columns, then the text.
PARTITION_WORD_KEYS = (
    "SELECT array(SELECT engram_partition_key(%s, %s, %s, %s, %s, %s) || lexeme "
    f"FROM unnest(tsvector_to_array(to_tsvector('{TEXT_CONFIG}', engram_text_words(%s)))) "
    "AS lexeme)"
)
#: Whether a record holds any of some keys (``PARTITION_WORD_KEYS``, one text[] parameter):
#: only the partition's postings of those words are read, however large it or the table is.
#: The keys are a constant of the statement, so that the planner sees how few rows match.
PARTITION_WORD_MATCH = f"{PARTITION_WORDS} && %s::text[]"


#: A partition's own terms (``text_terms``, migration 0013); parameters: the tenant's id,
#: then the partition's namespace and scope columns.
_PARTITION_TERMS = "tenant_uuid = %s AND part_key = engram_partition_key(%s, %s, %s, %s, %s, %s)"
#: The single lexeme of each of some one-piece ``word_phrase``s (NULL where a phrase has more
#: or none) with its document frequency in a partition; parameters: the phrases, then those of
#: ``_PARTITION_TERMS``. Each word is one primary-key lookup: its lexeme is worked out first
#: (``MATERIALIZED``), so the lookup compares the key with a plain value, which row-level
#: security lets an index answer; otherwise every term of the partition is read and filtered.
#: The lookup is a LATERAL subquery the planner cannot turn into a join (``LIMIT``): on a
#: table not yet analyzed it would rather hash every term of the partition.
PARTITION_TERM_COUNTS = f"""
    WITH w AS MATERIALIZED (
        SELECT at, phrase, cardinality(lexemes) AS lexemes, lexemes[1] AS lexeme
        FROM (SELECT at, phrase,
                     tsvector_to_array(to_tsvector('{TEXT_CONFIG}', engram_text_words(phrase)))
                     AS lexemes
              FROM unnest(%s::text[]) WITH ORDINALITY AS u(phrase, at)) AS split)
    SELECT w.at, CASE WHEN w.lexemes = 1
                      AND numnode(websearch_to_tsquery('{TEXT_CONFIG}', w.phrase)) = 1
                 THEN coalesce(t.docs, 0) END
    FROM w LEFT JOIN LATERAL (
        SELECT docs FROM text_terms t WHERE t.{_PARTITION_TERMS} AND t.lexeme = w.lexeme
        LIMIT 1) AS t ON true"""
_HEAD = f"""
        WITH {{kept}}lexemes AS (
            SELECT array_agg(DISTINCT lexeme) AS wanted
            FROM unnest(to_tsvector('{TEXT_CONFIG}', engram_text_words({{words}})))),
        stats AS (
            SELECT greatest(sum(docs), 1)::float8 AS docs,
                   greatest(sum(lexemes)::float8 / greatest(sum(docs), 1), 1) AS avgdl
            FROM text_stats WHERE {{partitions}}),"""
_MATCHES = f"tsv @@ websearch_to_tsquery('{TEXT_CONFIG}', {{match}})"
#: Document frequencies counted in the hits (all of them hold every record that has a word).
_COUNTED_DF = "SELECT lexeme, count(*)::float8 AS n FROM tf GROUP BY lexeme"


def _bounded_df(bound: int) -> str:
    """Document frequencies of bounded hits: counted where a word's hits are all its records,
    the partition's otherwise."""
    return f"""SELECT lexeme, (CASE WHEN terms.docs > {int(bound)} THEN terms.docs
                  ELSE count(*) END)::float8 AS n
            FROM tf JOIN terms USING (lexeme) GROUP BY lexeme, terms.docs"""


@dataclass(frozen=True)
class VectorSets:
    """Asks a search statement (read in binary) for what ranking reads of its hits: each row
    is then the hit's id and score, its stored vector and part vectors of ``model`` (NULL
    unless it is among the ``best`` by score, then id, as ranking orders them, and has
    vectors of ``model``), whether it is among them, and then its record
    (``RECORD_SELECTED`` order; NULL unless among them, or ``every``)."""

    model: str | None
    best: int
    every: bool = False

    def ranked(self, order: str) -> str:
        """A ``best`` column: whether a row is among the best by ``order``."""
        return f"row_number() OVER (ORDER BY {order}) <= {int(self.best)} AS best"

    def columns(self, ranked: str, score: str) -> str:
        """The columns of a row of ``ranked`` (with ``id`` and ``best``) and ``score``."""
        return f"{ranked}.id, {score}, sets.sent, sets.parts, {ranked}.best, " + ", ".join(
            f"sets.{column}" for column in RECORD_SELECTED
        )

    def of(self, ranked: str, table: str) -> str:
        """The vectors and record of a row of ``ranked`` from ``table``, as a LATERAL
        subquery ``sets``."""
        vectors = "false"
        if self.model is not None:
            literal = self.model.replace("'", "''")
            vectors = f"{ranked}.best AND r.embedding_model = '{literal}'"
        read = f"{ranked}.best" if not self.every else "true"
        # LIMIT 1 keeps the planner from joining the whole table: one key lookup per row read.
        return (
            f"LEFT JOIN LATERAL (SELECT CASE WHEN {vectors} THEN r.embedding END AS sent, "
            f"CASE WHEN {vectors} THEN r.embedding_parts END AS parts, {record_select_text()} "
            f"FROM {table} r WHERE r.id = {ranked}.id AND {read} LIMIT 1) AS sets ON true"
        )


def _bm25_tail(
    table: str, df: str, sets: VectorSets | None = None, *, counted: bool = False
) -> str:
    """The CTEs of a full-text statement after ``lexemes``, ``stats`` and ``hits``: the query
    lexemes' term frequencies in the hits, their document frequencies (``df``: (lexeme, n)
    rows over ``tf``) and the best scores, joined to their records (with ``sets``, as
    ``VectorSets`` says). With ``counted``, the statement has ``walked`` and ``beyond``
    instead of ``hits``: the postings' own counts (migration 0019) of the hits' words."""
    if sets is None:
        final = f"""SELECT {record_select_list()}, scores.score
        FROM scores JOIN {table} r ON r.id = scores.id ORDER BY scores.score DESC, r.key"""
    else:
        # The best are chosen as ranking chooses them: higher score first, then lower id.
        final = f"""SELECT {sets.columns("scores", "scores.score")}
        FROM (SELECT *, {sets.ranked("score DESC, id")} FROM scores) AS scores
        {sets.of("scores", table)} ORDER BY scores.score DESC, scores.key"""
    # Term frequencies (unless the postings counted them): weight the query's lexemes 'A' and
    # keep only those (far cheaper than unnesting every lexeme of every hit); documents' own
    # lexemes all carry weight 'D'. Records are joined for the final page only.
    tf = """
        tf AS (
            SELECT hits.id, hits.key, t.lexeme, cardinality(t.positions)::float8 AS tf,
                   length(hits.tsv)::float8 AS dl
            FROM hits, lexemes,
                 unnest(ts_filter(setweight(hits.tsv, 'A', lexemes.wanted), '{a}')) AS t),"""
    if counted:
        tf = """
        tf AS (
            SELECT id, key, lexeme, tf::float8 AS tf, dl::float8 AS dl FROM walked
            UNION ALL SELECT id, key, lexeme, tf::float8, dl::float8 FROM beyond),"""
    return f"""{tf}
        df AS ({df}),
        scores AS (
            SELECT tf.id, tf.key, sum(
                greatest(ln((stats.docs - df.n + 0.5) / (df.n + 0.5)), 1e-6)
                * tf.tf * {BM25_K1 + 1}
                / (tf.tf + {BM25_K1} * ({1 - BM25_B} + {BM25_B} * tf.dl / stats.avgdl))
            ) AS score
            FROM tf JOIN df USING (lexeme) CROSS JOIN stats GROUP BY tf.id, tf.key
            ORDER BY score DESC, tf.key LIMIT %s)
        {final}"""


def text_search(
    query: RecordQuery,
    words: list[str],
    limit: int,
    tenant: uuid.UUID | None = None,
    bound: int = SCORED_PER_WORD,
    sets: VectorSets | None = None,
    kept: str | None = None,
) -> tuple[str, list[Any]]:
    """Full-text hits for any of ``words`` among the records ``query`` selects, best first,
    each row a record followed by its Okapi BM25 score (higher is better).

    The document count and mean length are those of the partitions ``query`` reads, kept in
    ``text_stats`` by the writes. Document frequencies are counted in the records it selects
    that hold the words. Given ``tenant`` (the id of a one-partition query's tenant), each
    word is scored in at most its ``bound`` newest records ``query`` selects, and a
    word more records hold has the partition's document frequency (``text_terms``): the cost
    is then bounded whatever the partition's size. Scores depend on the caller's own records
    only, never on another tenant's. A document's length is its count of distinct lexemes.
    With ``sets``, each row ends with the vector set columns of ``VectorSets``. With
    ``kept`` (common table expressions ending in ``kept``, of one row: the ``words`` to
    score and their ``match`` expression; see ``word_pruning``), the words are those, not
    ``words``, and its parameters come first; with ``tenant`` too, the hits are scored from
    their postings' counts (migration 0019), not from their ``tsvector``s.
    """
    where, params = record_where(query)
    scope_sql, scope_params = scope_clauses(None if query.scope is None else as_filter(query.scope))
    table = table_for(query.namespace)
    head = _HEAD.format(
        partitions=" AND ".join(["namespace = %s", *scope_sql]),
        kept=f"{kept}, " if kept else "",
        words="(SELECT words FROM kept)" if kept else "%s",
    )
    matches = _MATCHES.format(match="(SELECT match FROM kept)" if kept else "%s")
    first = [*([] if kept else [" ".join(words)]), query.namespace, *scope_params]
    conditions = [*params, *([] if kept else [any_word(words)])]
    if tenant is None or not isinstance(query.scope, Scope):
        sql = f"""{head}
        hits AS (SELECT id, key, tsv FROM {table} WHERE {where} AND {matches}),
        {_bm25_tail(table, _COUNTED_DF, sets)}"""
        return sql, [*first, *conditions, limit]
    partition = [tenant, query.namespace, *query.scope.columns()]
    terms = f"""
        terms AS (
            SELECT wanted.lexeme, t.docs
            FROM lexemes, unnest(lexemes.wanted) AS wanted(lexeme) CROSS JOIN LATERAL (
                SELECT docs FROM text_terms
                WHERE {_PARTITION_TERMS} AND text_terms.lexeme = wanted.lexeme LIMIT 1) AS t),"""

    # Each word's postings, walked newest first until enough of its records pass the query's
    # own conditions (with none beyond the partition's, those are the first ones). Each record
    # is one primary-key lookup, a LATERAL subquery the planner cannot make a join of (on a
    # table not yet analyzed it would rather walk another index for every posting).
    def walk(read: str, holds: str = "") -> str:
        return f"""terms CROSS JOIN LATERAL (
                SELECT r.id, r.key, {read} FROM text_postings p CROSS JOIN LATERAL (
                    SELECT r.id, r.key, r.tsv FROM {table} r
                    WHERE r.id = p.record_id AND {where} {holds} LIMIT 1) AS r
                WHERE p.{_PARTITION_TERMS} AND p.lexeme = terms.lexeme
                ORDER BY p.record_id DESC LIMIT {int(bound)}) AS h"""

    if not kept:
        sql = f"""{head}{terms}
        hits AS (
            SELECT DISTINCT ON (h.id) h.id, h.key, h.tsv FROM {walk("r.tsv", f"AND r.{matches}")}
            ORDER BY h.id),
        {_bm25_tail(table, _bounded_df(bound), sets)}"""
        return sql, [*first, *partition, *conditions, *partition, limit]
    # The kept words are one lexeme each, and a posting says its record holds its lexeme and
    # how often: a hit is scored from the postings walked, without reading its words. A word
    # with more records than were walked also counts in the older hits found by other words:
    # those postings are looked up one by one.
    sql = f"""{head}{terms}
        walked AS MATERIALIZED (
            SELECT h.id, h.key, terms.lexeme, terms.docs, h.tf, h.dl
            FROM {walk("p.tf, p.dl")}),
        beyond AS (
            SELECT hits.id, hits.key, common.lexeme, p.tf, p.dl
            FROM (SELECT DISTINCT id, key FROM walked) AS hits
            JOIN (SELECT lexeme, min(id) AS oldest FROM walked WHERE docs > {int(bound)}
                  GROUP BY lexeme) AS common ON hits.id < common.oldest
            CROSS JOIN LATERAL (
                SELECT p.tf, p.dl FROM text_postings p
                WHERE p.{_PARTITION_TERMS} AND p.lexeme = common.lexeme
                  AND p.record_id = hits.id LIMIT 1) AS p),
        {_bm25_tail(table, _bounded_df(bound), sets, counted=True)}"""
    return sql, [*first, *partition, *conditions, *partition, *partition, limit]


def vector_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Record ids and vectors of ``model`` for the records ``query`` selects."""
    where, params = record_where(query)
    sql = (
        f"SELECT id, embedding FROM {table_for(query.namespace)} "
        f"WHERE {where} AND embedding_model = %s ORDER BY id"
    )
    return sql, [*params, model]


def vector_set_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Record ids, embeddings and part embeddings of ``model`` for the records ``query``
    selects."""
    where, params = record_where(query)
    sql = (
        f"SELECT id, embedding, embedding_parts FROM {table_for(query.namespace)} "
        f"WHERE {where} AND embedding_model = %s"
    )
    return sql, [*params, model]


def keyed_vector_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Every record ``query`` selects, with its vector and part vectors of ``model`` (NULL
    where it has none of that model)."""
    where, params = record_where(query)
    has = "embedding_model = %s"
    sql = (
        f"SELECT id, CASE WHEN {has} THEN embedding END, "
        f"CASE WHEN {has} THEN embedding_parts END FROM {table_for(query.namespace)} "
        f"WHERE {where}"
    )
    return sql, [model, model, *params]


def part_vector_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Record ids and part embeddings of ``model`` for the records ``query`` selects that have
    part embeddings."""
    where, params = record_where(query)
    sql = (
        f"SELECT id, embedding_parts FROM {table_for(query.namespace)} "
        f"WHERE {where} AND embedding_model = %s AND embedding_parts IS NOT NULL"
    )
    return sql, [*params, model]


def unvectored_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """The records ``query`` selects that have no vector of ``model``."""
    where, params = record_where(query)
    sql = (
        f"SELECT {record_select_list()} FROM {table_for(query.namespace)} r WHERE {where} "
        "AND embedding_model IS DISTINCT FROM %s ORDER BY id"
    )
    if query.limit is not None:
        return f"{sql} LIMIT %s", [*params, model, query.limit]
    return sql, [*params, model]


#: A partition of at most this many records is searched for nearest vectors exactly: a scan
#: of its vectors, kept in its rows (migration 0014), takes a few milliseconds, and its
#: ranking is the same whatever the planner's estimates. A larger one is searched the way the
#: planner finds cheaper, through the model's HNSW index once it is large enough.
EXACT_NEAREST_UP_TO = 5000


def nearest_select(
    query: RecordQuery,
    model: str,
    dimensions: int,
    limit: int,
    exact_up_to: int = 0,
    sets: VectorSets | None = None,
) -> tuple[str, list[Any]]:
    """The ``limit`` records ``query`` selects nearest to a probe vector (the first
    parameter, to bind as a ``vector``), as (id, cosine similarity), best first.

    The model is inlined as a literal and the vectors cast to ``vector(dimensions)`` exactly as
    in the model's partial HNSW index, so the planner can prove the index applies. The outer
    ORDER BY makes the order exact even when the index scan returns near-ties out of order.
    With ``exact_up_to``, a one-partition query of a partition holding at most that many
    records (``text_stats``) compares the probe with every vector instead (uncast, so that no
    index applies): the statement holds both searches, and runs only the one its size picks.
    With ``sets``, each row goes on with ``VectorSets``' columns, then, for the best, the
    whole record (``record_select_list`` order).
    """
    where, params = record_where(query)
    cast = f"vector({int(dimensions)})"
    literal = model.replace("'", "''")
    table = table_for(query.namespace)
    # A constant, not a parameter: a generic plan that knows how few rows are wanted walks
    # the HNSW index as a custom plan does, so the server may keep the statement's plan
    # instead of planning it again on every call.
    first = f"LIMIT {int(limit)}"
    if exact_up_to <= 0 or not isinstance(query.scope, Scope):
        found = (
            f"SELECT id, embedding::{cast} <=> %s::{cast} "
            f"AS distance FROM {table} WHERE {where} AND embedding_model = '{literal}' "
            f"ORDER BY distance {first}"
        )
        return _nearest_rows("", found, table, sets), params

    def search(vectors: str, size: str) -> str:
        return (
            f"(SELECT id, {vectors} <=> (SELECT v FROM probe) AS distance FROM {table} "
            f"WHERE {where} AND embedding_model = '{literal}' AND (SELECT docs FROM size) {size} "
            f"ORDER BY distance {first})"
        )

    bound = int(exact_up_to)
    head = (
        f"WITH probe AS (SELECT %s::{cast} AS v), size AS ("
        f"SELECT coalesce(sum(docs), 0) AS docs FROM text_stats WHERE {PARTITION}) "
    )
    exact, indexed = search("embedding", f"<= {bound}"), search(f"embedding::{cast}", f"> {bound}")
    sql = _nearest_rows(head, f"{exact} UNION ALL {indexed}", table, sets)
    return sql, [query.namespace, *query.scope.columns(), *params, *params]


def _nearest_rows(head: str, found: str, table: str, sets: VectorSets | None) -> str:
    """The rows of ``nearest_select`` from ``head`` (its WITH clause) and ``found`` (its
    search: rows of id and distance)."""
    if sets is None:
        return f"{head}SELECT id, 1 - distance FROM ({found}) AS nearest ORDER BY distance, id"
    # The best are chosen as ranking chooses them: higher similarity first, then lower id.
    return (
        f"{head}SELECT {sets.columns('nearest', '1 - nearest.distance')} "
        f"FROM (SELECT id, distance, {sets.ranked('1 - distance DESC, id')} "
        f"FROM ({found}) AS found) AS nearest {sets.of('nearest', table)} "
        "ORDER BY nearest.distance, nearest.id"
    )
