"""How store items meet LangGraph's types: the checks an op passes before it runs, TTLs in
minutes, and the ``Item`` / ``SearchItem`` a stored record reads as."""

from __future__ import annotations

from datetime import datetime

from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)

from engramdb.core.errors import ValidationError
from engramdb.integrations.langgraph.keys import split_record_key
from engramdb.storage.records import Record

_MS_PER_MINUTE = 60_000


def check_op(op: Op) -> None:
    """LangGraph's namespace rules for ops given to ``batch`` directly (the convenience
    methods check them already): labels are non-empty strings without ``.``, and an item
    has a namespace."""
    validate_op_namespace(op)
    if isinstance(op, PutOp) and not op.namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if isinstance(op, PutOp | GetOp) and not isinstance(op.key, str):
        raise ValidationError(f"an item key must be a string, got {type(op.key).__name__}")
    if not isinstance(op, GetOp | PutOp | SearchOp | ListNamespacesOp):
        raise ValidationError(f"unknown store operation {type(op).__name__}")


def ttl_ms(minutes: float | None) -> int | None:
    """A TTL in minutes (LangGraph's unit) as Engram's milliseconds."""
    if minutes is None:
        return None
    if isinstance(minutes, bool) or not isinstance(minutes, int | float) or minutes <= 0:
        raise ValidationError(f"ttl must be a positive number of minutes, got {minutes!r}")
    return max(1, round(minutes * _MS_PER_MINUTE))


def last_updated(record: Record) -> datetime:
    """When the item last changed: a TTL refresh rewrites the record but not the item."""
    kept = record.value.get("updated_at")
    if isinstance(kept, str):
        return datetime.fromisoformat(kept)
    return record.updated_at or record.created_at


def as_item(record: Record) -> Item:
    """The LangGraph item a stored record holds."""
    namespace, key = split_record_key(record.key)
    return Item(
        namespace=namespace,
        key=key,
        value=record.value["value"],
        created_at=record.created_at,
        updated_at=last_updated(record),
    )


def as_search_item(record: Record, score: float | None) -> SearchItem:
    """The item of a search hit, with its relevance (``None``: not scored)."""
    item = as_item(record)
    return SearchItem(item.namespace, item.key, item.value, item.created_at, item.updated_at, score)
