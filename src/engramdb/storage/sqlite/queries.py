"""Pure SQL building for the SQLite backend (tested without a database)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engramdb.core.errors import ValidationError
from engramdb.core.scope import Level, ScopeFilter
from engramdb.core.validation import to_json
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import RecordQuery, as_filter
from engramdb.storage.rows import (
    EVENT_COLUMNS,
    RECORD_COLUMNS,
    RECORD_SELECTED,
    like_pattern,
    time_text,
)
from engramdb.storage.sqlite.partition import partition_token

LEVEL_COLUMNS: dict[Level, str] = {
    "tenant": "tenant",
    "user": "user_id",
    "agent": "agent",
    "session": "session",
    "plan": "plan",
}
RECORD_SELECT = f"SELECT {', '.join(RECORD_SELECTED)} FROM records"
_REPLACED = (
    "value = excluded.value, content_type = excluded.content_type, "
    "metadata = excluded.metadata, text = excluded.text, ttl_ms = excluded.ttl_ms, "
    "expires_at = excluded.expires_at, occurred_at = excluded.occurred_at, "
    "hidden_at = excluded.hidden_at, version = records.version + 1"
)
_ON_KEY = (
    f"INSERT INTO records ({', '.join(RECORD_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(RECORD_COLUMNS))}) "
    f"ON CONFLICT (namespace, tenant, user_id, agent, session, plan, key) DO UPDATE SET {_REPLACED}"
)
_RETURNING = f" RETURNING {', '.join(RECORD_SELECTED)}"
#: A write of one record: a replace keeps ``created_at``.
UPSERT_RECORD = f"{_ON_KEY}, updated_at = excluded.created_at{_RETURNING}"
#: ``Put(if_absent=True)``: returns no row while a live record holds the key (an expired one
#: is replaced as if new).
CREATE_RECORD = (
    f"{_ON_KEY}, created_at = excluded.created_at, updated_at = NULL "
    "WHERE records.expires_at IS NOT NULL AND records.expires_at <= excluded.created_at"
    f"{_RETURNING}"
)
INSERT_EVENT = (
    f"INSERT INTO events ({', '.join(EVENT_COLUMNS)}) "
    f"VALUES ({', '.join('?' * len(EVENT_COLUMNS))}) RETURNING position"
)
EVENT_SELECT = f"SELECT position, {', '.join(EVENT_COLUMNS)} FROM events"


def scope_clauses(
    scope: ScopeFilter | None, *, unindexed: bool = False
) -> tuple[list[str], list[Any]]:
    """Equality conditions on the scope columns a filter fixes (``unindexed``: written so the
    planner does not use an index for them)."""
    if scope is None:
        return [], []
    conditions = scope.conditions()
    mark = "+" if unindexed else ""
    return (
        [f"{mark}{LEVEL_COLUMNS[level]} = ?" for level, _ in conditions],
        [v for _, v in conditions],
    )


def json_path(key: str) -> str:
    """A SQLite JSON path selecting the top-level member ``key``."""
    if '"' in key or "\\" in key:
        raise ValidationError(f"metadata filter key {key!r} may not contain quotes or backslashes")
    return f'$."{key}"'


def prefix_bounds(prefix: str) -> tuple[str, str] | None:
    """Half-open key range holding every key that starts with ``prefix`` (index friendly)."""
    if not prefix:
        return None
    last = prefix[-1]
    if ord(last) >= 0x10FFFF:
        return None
    return prefix, prefix[:-1] + chr(ord(last) + 1)


def record_where(query: RecordQuery) -> tuple[str, list[Any]]:
    """WHERE clause (without the keyword) and parameters for ``query``."""
    # Fetching by row ids is a handful of rowid lookups; without statistics SQLite would
    # rather scan the partition's index, so that index is kept out of the plan.
    by_ids = query.ids is not None
    clauses = ["+namespace = ?" if by_ids else "namespace = ?"]
    params: list[Any] = [query.namespace]
    scope_sql, scope_params = scope_clauses(
        None if query.scope is None else as_filter(query.scope), unindexed=by_ids
    )
    clauses += scope_sql
    params += scope_params
    if query.keys is not None:
        clauses.append(f"key IN ({', '.join('?' * len(query.keys))})" if query.keys else "0")
        params += list(query.keys)
    if query.prefix:
        bounds = prefix_bounds(query.prefix)
        if bounds is None:
            clauses.append("substr(key, 1, ?) = ?")
            params += [len(query.prefix), query.prefix]
        else:
            clauses.append("key >= ? AND key < ?")
            params += list(bounds)
    if query.content_types is not None:
        types = query.content_types
        clauses.append(f"content_type IN ({', '.join('?' * len(types))})" if types else "0")
        params += list(types)
    for name, value in query.metadata.items():
        path = json_path(name)
        # json_type tells true from 1 and "1" from 1; json_extract then compares the value.
        clauses.append(
            "json_type(metadata, ?) = json_type(?) AND "
            "json_extract(metadata, ?) IS json_extract(?, '$')"
        )
        encoded = to_json(value, what="metadata filter")
        params += [path, encoded, path, encoded]
    if query.text_any:
        clauses.append("(" + " OR ".join("text LIKE ? ESCAPE '\\'" for _ in query.text_any) + ")")
        params += [like_pattern(term) for term in query.text_any]
    if query.value_equals is not None:
        # Values are stored as canonical JSON, so equal values have equal text.
        clauses.append("value = ?")
        params.append(to_json(query.value_equals))
    if query.hidden is not None:
        clauses.append("hidden_at IS NOT NULL" if query.hidden else "hidden_at IS NULL")
    if query.ids is not None:
        clauses.append(f"id IN ({', '.join('?' * len(query.ids))})" if query.ids else "0")
        params += list(query.ids)
    if query.occurred_after is not None:
        clauses.append("coalesce(occurred_at, created_at) >= ?")
        params.append(time_text(query.occurred_after))
    if query.occurred_before is not None:
        clauses.append("coalesce(occurred_at, created_at) < ?")
        params.append(time_text(query.occurred_before))
    if query.alive_at is not None:
        clauses.append("(expires_at IS NULL OR expires_at > ?)")
        params.append(time_text(query.alive_at))
    if query.expired_at is not None:
        clauses.append("expires_at IS NOT NULL AND expires_at <= ?")
        params.append(time_text(query.expired_at))
    return " AND ".join(clauses), params


def record_select(query: RecordQuery, columns: str | None = None) -> tuple[str, list[Any]]:
    """SELECT of ``columns`` (default: a whole record) for ``query``, ordered by key (then
    partition, for determinism)."""
    where, params = record_where(query)
    select = RECORD_SELECT if columns is None else f"SELECT {columns} FROM records"
    # Fetching by row ids orders by id: ordering by key would make SQLite walk the whole
    # partition's key index and test every row against the ids.
    order = "id" if query.ids is not None else "key, tenant, user_id, agent, session, plan"
    sql = f"{select} WHERE {where} ORDER BY {order}"
    if query.limit is not None or query.offset:
        sql += " LIMIT ? OFFSET ?"
        params += [query.limit if query.limit is not None else -1, query.offset]
    return sql, params


def event_where(query: EventQuery) -> tuple[str, list[Any]]:
    """WHERE clause (without the keyword) and parameters for an event query."""
    clauses = ["position > ?"]
    params: list[Any] = [query.after]
    if query.event_types is not None:
        types = query.event_types
        clauses.append(f"event_type IN ({', '.join('?' * len(types))})" if types else "0")
        params += list(types)
    scope_sql, scope_params = scope_clauses(query.scope)
    clauses += scope_sql
    params += scope_params
    if query.provider_id is not None:
        clauses.append("provider_id = ?")
        params.append(query.provider_id)
    if query.key is not None:
        clauses.append("json_extract(payload, '$.key') = ?")
        params.append(query.key)
    return " AND ".join(clauses), params


_VECTOR_CONFLICT = (
    "ON CONFLICT (record_id) DO UPDATE SET model = excluded.model, vector = excluded.vector, "
    "parts = excluded.parts"
)
UPSERT_VECTOR = (
    f"INSERT INTO vectors (record_id, model, vector, parts) VALUES (?, ?, ?, ?) {_VECTOR_CONFLICT}"
)
# Only for records that still exist: a vector computed outside the transaction may belong to a
# record deleted meanwhile.
#: A record's vector, if the record is there — at the version given, unless that is NULL.
UPSERT_VECTOR_IF_PRESENT = (
    "INSERT INTO vectors (record_id, model, vector, parts) "
    "SELECT id, ?, ?, ? FROM records WHERE id = ? AND (? IS NULL OR version = ?) "
    f"{_VECTOR_CONFLICT}"
)


def query_partition_token(query: RecordQuery) -> str | None:
    """The partition token (see ``partition.py``) of the one partition ``query`` names, or
    ``None`` when it names none or several."""
    if query.scope is None:
        return None
    scope = as_filter(query.scope)
    if set(scope.levels) != set(LEVEL_COLUMNS):
        return None
    return partition_token(query.namespace, scope.scope.columns())


def text_match(match: str, token: str | None) -> str:
    """The FTS5 expression for ``match`` (words of the text column), within the partition of
    ``token`` when one is given."""
    expression = f"text : ({match})"
    return f"part : {token} AND {expression}" if token else expression


def text_candidates(
    query: RecordQuery,
    asked: Sequence[tuple[str, int | None]],
    columns: str,
    terms: Sequence[str] | None = None,
) -> tuple[str, list[Any]]:
    """``columns``, FTS5's term counts (its ``docsize`` row) and the text of every record
    ``query`` selects that matches one of the FTS5 expressions ``asked``: of each, every
    match, or only its ``newest`` (highest ids) when given, which the index walks to newest
    first and stops at. With ``terms``, the text is read only for a record that has no
    ``text_counts`` row, and each term's count in the record follows (``NULL``: the record
    does not hold it)."""
    where, params = record_where(query)
    matched, values = [], []
    for expression, newest in asked:
        # The order is the index's own (it walks a term's records backwards), no sort.
        tail = " ORDER BY found.hit_id DESC LIMIT ?" if newest is not None else ""
        # The index's matches are a subquery of their own: its columns ("text", "part") would
        # make the record columns the filter names ambiguous.
        matched.append(
            "SELECT hit_id FROM (SELECT found.hit_id FROM (SELECT rowid AS hit_id FROM records_fts "
            "WHERE records_fts MATCH ?) AS found CROSS JOIN records ON records.id = found.hit_id "
            f"WHERE {where}{tail})"
        )
        values += [expression, *params, *([newest] if newest is not None else [])]
    text, counts, paths = "text", "", []
    if terms is not None:
        text = "CASE WHEN text_counts.record_id IS NULL THEN text END"
        text += "".join(", json_extract(text_counts.counts, ?)" for _ in terms)
        counts = " LEFT JOIN text_counts ON text_counts.record_id = hits.hit_id"
        # Terms hold word characters only, never a quote.
        paths = [f'$."{term}"' for term in terms]
    # A record several expressions find is read (and its counts parsed) once.
    sql = (
        f"WITH hits AS ({' UNION '.join(matched)}) SELECT {columns}, "
        "(SELECT sz FROM records_fts_docsize WHERE records_fts_docsize.id = hits.hit_id), "
        f"{text} FROM hits CROSS JOIN records ON records.id = hits.hit_id{counts}"
    )
    return sql, [*values, *paths]


def _vectors_of(
    query: RecordQuery, model: str, columns: str, tail: str = ""
) -> tuple[str, list[Any]]:
    """``columns`` of the records ``query`` selects joined to their vectors of ``model``."""
    where, params = record_where(query)
    sql = (
        f"SELECT records.id, {columns} FROM records JOIN vectors ON vectors.record_id = "
        f"records.id WHERE {where} AND vectors.model = ?{tail}"
    )
    return sql, [*params, model]


def vector_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Record ids and vectors of ``model`` for the records ``query`` selects."""
    return _vectors_of(query, model, "vectors.vector", " ORDER BY records.id")


def vector_set_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Record ids, whole-text vectors and part vectors of ``model`` for the records ``query``
    selects."""
    return _vectors_of(query, model, "vectors.vector, vectors.parts")


def part_vector_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """Record ids and part vectors of ``model`` for the records ``query`` selects that have
    part vectors."""
    return _vectors_of(query, model, "vectors.parts", " AND vectors.parts IS NOT NULL")


def unvectored_select(query: RecordQuery, model: str) -> tuple[str, list[Any]]:
    """The records ``query`` selects that have no vector of ``model``."""
    where, params = record_where(query)
    sql = (
        f"{RECORD_SELECT} WHERE "
        f"{where} AND NOT EXISTS (SELECT 1 FROM vectors "
        "WHERE vectors.record_id = records.id AND vectors.model = ?) ORDER BY id"
    )
    if query.limit is not None:
        sql += " LIMIT ?"
        return sql, [*params, model, query.limit]
    return sql, [*params, model]


def redact_events(namespace: str, scope_sql: list[str], key: str) -> tuple[str, list[Any]]:
    """UPDATE blanking every not yet redacted event about ``key`` (see ``Redact``)."""
    where = " AND ".join(
        [
            "provider_id = ?",
            "json_extract(payload, '$.key') = ?",
            *scope_sql,
            "json_extract(payload, '$.redacted') IS NOT 1",
        ]
    )
    sql = (
        "UPDATE events SET payload = json_object('key', ?, 'provider_id', ?, 'redacted', 1) "
        f"WHERE {where}"
    )
    return sql, [key, namespace, namespace, key]


def redact_scope_events(scope_sql: list[str], keep: int) -> str:
    """UPDATE blanking every not yet redacted event of some scopes but those of ``keep``
    providers (their ids are the parameters after the scope's; see ``RedactScope``)."""
    conditions = [*scope_sql, "json_extract(payload, '$.redacted') IS NOT 1"]
    if keep:
        conditions.append(f"provider_id NOT IN ({', '.join('?' * keep)})")
    return (
        "UPDATE events SET payload = json_object('key', json_extract(payload, '$.key'), "
        f"'provider_id', provider_id, 'redacted', 1) WHERE {' AND '.join(conditions)}"
    )
