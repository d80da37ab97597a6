"""Pure mapping between records, envelopes and database rows, shared by every SQL backend.

Times are stored as fixed-width ISO-8601 text in UTC (microseconds, ``+00:00``), so text order
is time order in any database; values, metadata and payloads as canonical JSON.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from engramdb.core.events import EventEnvelope, ProducerRef, TraceContext
from engramdb.core.scope import Scope
from engramdb.core.validation import to_json
from engramdb.storage.backend import EventQuery
from engramdb.storage.records import Record

RECORD_COLUMNS = (
    "namespace",
    "tenant",
    "user_id",
    "agent",
    "session",
    "plan",
    "key",
    "value",
    "content_type",
    "metadata",
    "text",
    "created_at",
    "updated_at",
    "ttl_ms",
    "expires_at",
    "thread",
    "occurred_at",
    "hidden_at",
    "version",
)
#: What a SELECT of a whole record returns: the stored columns, then the row id.
RECORD_SELECTED = (*RECORD_COLUMNS, "id")
EVENT_COLUMNS = (
    "event_id",
    "event_type",
    "schema_version",
    "occurred_at",
    "producer",
    "trace",
    "tenant",
    "user_id",
    "agent",
    "session",
    "plan",
    "provider_id",
    "payload",
)


@lru_cache(maxsize=4096)
def scope_of(tenant: str, user: str, agent: str, session: str, plan: str) -> Scope:
    """The (immutable, shared) ``Scope`` of a row's scope columns; cached because validating
    a scope per row would dominate large scans."""
    return Scope.from_columns(tenant, user, agent, session, plan)


def time_text(moment: datetime) -> str:
    """``moment`` as sortable UTC text."""
    if moment.tzinfo is None:
        raise ValueError("naive datetimes are not stored; attach a timezone")
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def optional_time_text(moment: datetime | None) -> str | None:
    """:func:`time_text`, passing ``None`` through."""
    return None if moment is None else time_text(moment)


def parse_time(text: str | None) -> datetime | None:
    """Inverse of :func:`time_text`."""
    return None if text is None else datetime.fromisoformat(text)


def record_row(record: Record) -> tuple[Any, ...]:
    """``record`` as a row in ``RECORD_COLUMNS`` order."""
    return (
        record.namespace,
        *record.scope.columns(),
        record.key,
        to_json(record.value),
        record.content_type,
        to_json(record.metadata, what="metadata"),
        record.text,
        time_text(record.created_at),
        optional_time_text(record.updated_at),
        record.ttl_ms,
        optional_time_text(record.expires_at),
        record.thread,
        optional_time_text(record.occurred_at),
        optional_time_text(record.hidden_at),
        record.version,
    )


def row_record(row: tuple[Any, ...]) -> Record:
    """Inverse of :func:`record_row`; a row in ``RECORD_SELECTED`` order also sets ``id``."""
    row_id = row[len(RECORD_COLUMNS)] if len(row) > len(RECORD_COLUMNS) else None
    (
        namespace,
        tenant,
        user,
        agent,
        session,
        plan,
        key,
        value,
        content_type,
        metadata,
        text,
        created_at,
        updated_at,
        ttl_ms,
        expires_at,
        thread,
        occurred_at,
        hidden_at,
        version,
    ) = row[: len(RECORD_COLUMNS)]
    created = parse_time(created_at)
    assert created is not None
    return Record(
        namespace=namespace,
        scope=scope_of(tenant, user, agent, session, plan),
        key=key,
        value=json.loads(value),
        content_type=content_type,
        metadata=json.loads(metadata),
        text=text,
        created_at=created,
        updated_at=parse_time(updated_at),
        ttl_ms=ttl_ms,
        expires_at=parse_time(expires_at),
        thread=thread,
        occurred_at=parse_time(occurred_at),
        hidden_at=parse_time(hidden_at),
        version=version,
        id=row_id,
    )


def event_row(event: EventEnvelope) -> tuple[Any, ...]:
    """``event`` as a row in ``EVENT_COLUMNS`` order."""
    return (
        event.event_id,
        event.event_type,
        event.schema_version,
        time_text(event.occurred_at),
        event.producer.model_dump_json(),
        event.trace.model_dump_json(),
        *event.scope.columns(),
        event.provider_id,
        to_json(event.payload, what="payload"),
    )


def event_read_sql(
    select: str, where: str, params: list[Any], query: EventQuery, placeholder: str
) -> tuple[str, list[Any]]:
    """The statement of ``EventStore.read`` and its parameters: ``select`` filtered by
    ``where`` (with ``params``), in log order or newest first, at most ``query.limit`` rows;
    ``placeholder`` is the driver's (``?``, ``%s``)."""
    order = "DESC" if query.newest_first else "ASC"
    sql = f"{select} WHERE {where} ORDER BY position {order}"
    if query.limit is None:
        return sql, params
    return f"{sql} LIMIT {placeholder}", [*params, query.limit]


def row_event(position: int, row: tuple[Any, ...]) -> EventEnvelope:
    """Inverse of :func:`event_row`, with the log position."""
    (
        event_id,
        event_type,
        schema_version,
        occurred_at,
        producer,
        trace,
        tenant,
        user,
        agent,
        session,
        plan,
        _provider_id,
        payload,
    ) = row
    return EventEnvelope(
        event_id=event_id,
        event_type=event_type,
        schema_version=schema_version,
        occurred_at=datetime.fromisoformat(occurred_at),
        producer=ProducerRef.model_validate_json(producer),
        trace=TraceContext.model_validate_json(trace),
        scope=scope_of(tenant, user, agent, session, plan),
        payload=json.loads(payload),
        position=position,
    )


def like_pattern(term: str) -> str:
    """A LIKE pattern matching ``term`` anywhere, with ``\\`` as the escape character."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"
