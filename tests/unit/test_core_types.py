"""Scope, validation, typed errors and the events' envelope format."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from types import ModuleType
from typing import Any

import pytest

import engramdb
from engramdb.core.errors import (
    EngramError,
    EngramRuntimeError,
    InvalidKeyError,
    RecallError,
    StorageError,
    UsageError,
    ValidationError,
)
from engramdb.core.events import (
    EVENT_TYPES,
    EventEnvelope,
    MemoryDeleted,
    MemoryLinked,
    MemoryWritten,
    TraceContext,
    new_id,
)
from engramdb.core.scope import Scope, ScopeFilter
from engramdb.core.types import MemoryEntry, ProviderCapabilities, RecallQuery


def test_scope_defaults_and_narrowing() -> None:
    scope = Scope(tenant="acme", user="alice", agent="helper", session="s-1", plan="p")
    assert Scope().tenant == "default"
    assert scope.narrow(("tenant", "user")) == Scope(tenant="acme", user="alice")
    assert scope.narrow(()) == Scope(tenant="acme")
    assert scope.columns() == ("acme", "alice", "helper", "s-1", "p")
    assert Scope.from_columns(*Scope(tenant="t").columns()) == Scope(tenant="t")
    assert Scope(tenant="t", user="").user is None
    assert scope.label() == "acme/alice/helper/s-1/p"


@pytest.mark.parametrize(
    "fields",
    [
        {"tenant": ""},
        {"tenant": None},
        {"tenant": " x"},
        {"user": "a\tb"},
        {"user": "x" * 129},
        {"agent": 5},
        {"session": "s\n"},
        {"nope": "x"},
    ],
)
def test_bad_scopes_are_typed_errors(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        Scope(**fields)


def test_scope_filter_always_includes_the_tenant() -> None:
    loose = ScopeFilter(Scope(tenant="acme", user="alice"), ("user",))
    assert loose.levels == ("tenant", "user")
    assert loose.matches(Scope(tenant="acme", user="alice", session="x"))
    assert not loose.matches(Scope(tenant="globex", user="alice"))
    exact = ScopeFilter(Scope(tenant="acme", user="alice"))
    assert not exact.matches(Scope(tenant="acme", user="alice", session="x"))


def test_error_tree_splits_by_who_must_act() -> None:
    assert issubclass(ValidationError, UsageError)
    assert issubclass(InvalidKeyError, ValidationError)
    assert issubclass(StorageError, EngramRuntimeError)
    assert issubclass(RecallError, EngramRuntimeError)
    assert not issubclass(EngramError, MemoryError)
    for name in engramdb.__all__:
        obj = getattr(engramdb, name)
        if isinstance(obj, type) and issubclass(obj, Exception):
            # Warnings are categories for the warnings filter, not errors.
            assert issubclass(obj, EngramError) or issubclass(obj, Warning), name
    error = InvalidKeyError("bad key", key="x")
    assert error.to_dict() == {
        "error": "invalid_key",
        "message": "bad key",
        "details": {"key": "x"},
    }


@pytest.mark.parametrize(
    ("model", "fields"),
    [
        (RecallQuery, {"query": ""}),
        (RecallQuery, {"query": "q", "limit": 0}),
        (RecallQuery, {"query": "q", "limit": "many"}),
        (ProviderCapabilities, {"provider_id": "Bad Id", "tier": "working"}),
        (ProviderCapabilities, {"provider_id": "p", "tier": "cosmic"}),
        (MemoryEntry, {"key": "k", "value": 1, "ttl_ms": -1}),
        (engramdb.MemoryItem, {"text": ""}),
        (engramdb.MemoryItem, {"text": "x", "importance": 2}),
    ],
)
def test_model_validation_raises_engram_validation_error(
    model: Any, fields: dict[str, Any]
) -> None:
    with pytest.raises(ValidationError) as raised:
        model(**fields)
    assert raised.value.details["fields"]


def test_every_way_in_raises_engram_errors_with_the_nested_field_path() -> None:
    envelope = EventEnvelope(event_type="memory.written", scope=Scope(tenant="t"), payload={})
    data = envelope.model_dump(mode="json")
    data["trace"] = {"correlation_id": ["not", "text"]}
    attempts: list[Callable[[], object]] = [
        lambda: EventEnvelope(**data),
        lambda: EventEnvelope.model_validate(data),
        lambda: EventEnvelope.model_validate_json(json.dumps(data)),
        lambda: EventEnvelope.model_validate_strings({**data, "schema_version": "zero"}),
    ]
    for attempt in attempts:
        with pytest.raises(ValidationError) as raised:
            attempt()
        field = raised.value.details["fields"][0]["field"]
        assert field in ("trace.correlation_id", "schema_version")


def test_narrowing_keeps_a_scope_that_is_already_narrow() -> None:
    narrow = Scope(tenant="acme", user="alice")
    assert narrow.narrow(("tenant", "user", "agent")) == narrow
    wide = Scope(tenant="acme", user="alice", session="s")
    assert wide.narrow(["user"]) == narrow
    assert wide.narrow(("user",)).session is None


def test_domain_events_wrap_into_envelopes_and_back() -> None:
    trace = TraceContext()
    event = MemoryWritten(
        key="k", value={"a": 1}, value_type="dict", provider_id="p", metadata={"m": 1}, ttl_ms=5
    )
    scope = Scope(tenant="acme", user="alice")
    when = datetime(2026, 5, 1, tzinfo=UTC)
    envelope = event.to_envelope(scope=scope, trace=trace, occurred_at=when)
    assert envelope.event_type == "memory.written"
    assert envelope.schema_version == 1
    assert envelope.scope == scope
    assert envelope.occurred_at == when
    assert envelope.trace == trace
    assert envelope.provider_id == "p"
    assert MemoryWritten.from_envelope(envelope) == event
    assert EventEnvelope.model_validate_json(envelope.model_dump_json()) == envelope
    child = trace.caused_by(envelope.event_id)
    assert child.correlation_id == trace.correlation_id
    assert child.causation_id == envelope.event_id
    assert set(EVENT_TYPES) == {
        "memory.written",
        "memory.deleted",
        "memory.restored",
        "memory.linked",
        "memory.invalidated",
        "memory.indexed",
        "memory.expired",
        "memory.provider.registered",
    }
    assert MemoryDeleted(key="k").to_envelope(scope=scope).payload["mode"] == "hard"
    linked = MemoryLinked(source_key="a", target_key="b", relation="knows").to_envelope(scope=scope)
    assert linked.payload["relation"] == "knows"


def test_ids_are_version_7_uuids_that_sort_by_creation_time() -> None:
    first = [new_id() for _ in range(1000)]
    time.sleep(0.002)  # the next millisecond: ids of the same one share their time bits only
    later = new_id()
    assert len(set(first)) == 1000
    for made in [*first, later]:
        parsed = uuid.UUID(made)
        assert (parsed.hex, parsed.version, parsed.variant) == (made, 7, uuid.RFC_4122)
    assert all(made < later for made in first)
    millis = int(later[:12], 16)
    assert abs(millis - time.time() * 1000) < 60_000


def test_public_surface_is_exactly_the_curated_list() -> None:
    public = {
        name
        for name in dir(engramdb)
        if not name.startswith("_") and not isinstance(getattr(engramdb, name), ModuleType)
    }
    assert public == set(engramdb.__all__) - {"__version__"}
    assert sorted(engramdb.__all__) == engramdb.__all__
