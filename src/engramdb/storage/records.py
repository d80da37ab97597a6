"""The storage layer's own vocabulary: ``Record`` (one stored row of a provider's projection),
the write operations ``Put`` and ``Delete``, and ``RecordQuery`` (what a scan may ask for)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from engramdb.core.errors import ConflictError, NotFoundError, ValidationError, VersionConflictError
from engramdb.core.events import EventEnvelope
from engramdb.core.scope import Level, Scope, ScopeFilter
from engramdb.core.validation import check_text

#: The most rows a scan may skip or return (both databases count in 64-bit integers).
MAX_ROWS = 2**62


@dataclass(frozen=True)
class Record:
    """One entry of a provider's projection, in the partition ``scope``.

    ``text`` is the searchable form of the entry (its contextual key), indexed for full-text
    search. ``thread`` is the session the entry was written in (the partition may span
    sessions) and orders, with ``created_at``, the turns of a conversation. ``occurred_at`` is
    when the remembered thing happened, if the writer said. ``version`` counts the writes of
    the record since it was created (1 when new; every ``Put`` and ``Hide`` adds one), set by
    the backend and reproduced by the fold. ``id`` is the storage row id: set by the backend,
    not part of the record's identity.
    """

    namespace: str
    scope: Scope
    key: str
    value: Any
    content_type: str
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime | None = None
    ttl_ms: int | None = None
    expires_at: datetime | None = None
    text: str = ""
    thread: str = ""
    occurred_at: datetime | None = None
    hidden_at: datetime | None = None
    version: int = 1
    id: int | None = field(default=None, compare=False)


@dataclass(frozen=True)
class Put:
    """Insert or replace a record. On replace the stored ``created_at`` is kept and
    ``updated_at`` becomes this record's ``created_at`` (the time of the new write).

    ``vector`` (float32 bytes of an embedding by ``model``) is stored beside the record in the
    same transaction; a replace without one drops the old vector, which no longer matches.
    ``parts`` are the vectors of the record's parts (its sentences), concatenated, if any.
    With ``if_absent`` it is a create: if a record holds the key and has not expired by this
    record's ``created_at``, the commit fails with ``ConflictError`` and writes nothing; one
    that has expired is replaced as if new. Two processes creating one key at once cannot
    both succeed.
    """

    record: Record
    vector: bytes | None = None
    model: str = ""
    parts: bytes | None = None
    if_absent: bool = False


@dataclass(frozen=True)
class Delete:
    """Remove the record ``key`` from partition ``scope`` of ``namespace``, if present."""

    namespace: str
    scope: Scope
    key: str


@dataclass(frozen=True)
class Hide:
    """Soft-forget: keep the record ``key`` but hide it from reads since ``at``; ``at=None``
    restores it."""

    namespace: str
    scope: Scope
    key: str
    at: datetime | None


@dataclass(frozen=True)
class Redact:
    """Blank the content of every logged event about ``key`` in the partition ``scope`` of
    ``namespace`` (events whose scope matches it on ``levels``) to a tombstone."""

    namespace: str
    scope: Scope
    levels: tuple[Level, ...]
    key: str


@dataclass(frozen=True)
class RedactScope:
    """Blank the content of every logged event whose scope matches ``scope`` on ``levels``,
    whatever it is about (a user's erasure reaches their traces too), to a tombstone that
    keeps only the event's provider and key. Events of the providers in ``keep`` are left
    alone: they may be the history of records that outlive the scope (a tenant's public
    facts written by a user who is then erased)."""

    scope: Scope
    levels: tuple[Level, ...]
    keep: tuple[str, ...] = ()


@dataclass(frozen=True)
class Expect:
    """A precondition of the commit, checked with the record's row locked against writers:
    the record ``key`` exists (alive or expired, hidden or not) and, unless ``version`` is
    ``None``, is at that version. Otherwise the commit fails and writes nothing, with
    ``NotFoundError`` (no such record) or ``VersionConflictError``."""

    namespace: str
    scope: Scope
    key: str
    version: int | None = None


Op = Put | Delete | Hide | Redact | RedactScope | Expect
#: Decides, from the record a key holds now (``None``: none), what one transaction writes:
#: its ops and their events. Run inside the transaction, so it must not block or await; it
#: may raise (an ``EngramError``) to write nothing.
Amend = Callable[[Record | None], tuple[Sequence[Op], Sequence[EventEnvelope]]]


@dataclass(frozen=True)
class RecordQuery:
    """A scan of one namespace.

    ``scope`` matches partitions (a ``Scope`` matches exactly one partition; a ``ScopeFilter``
    may match several, always within one tenant; ``None`` is every tenant, for admin work).
    ``alive_at`` hides records whose ``expires_at`` is at or before it; ``expired_at`` keeps
    only those. ``text_any`` keeps records whose ``text`` contains any of the terms,
    ``value_equals`` (unless ``None``) those whose value is that JSON value.
    ``hidden`` selects live (``False``, the default), soft-forgotten (``True``) or all
    (``None``) records. ``occurred_after``/``occurred_before`` bound when the entry happened
    (its ``occurred_at``, else its ``created_at``), inclusive and exclusive.
    """

    namespace: str
    scope: Scope | ScopeFilter | None
    keys: tuple[str, ...] | None = None
    prefix: str | None = None
    content_types: tuple[str, ...] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    text_any: tuple[str, ...] = ()
    value_equals: Any = None
    alive_at: datetime | None = None
    expired_at: datetime | None = None
    ids: tuple[int, ...] | None = None
    hidden: bool | None = False
    occurred_after: datetime | None = None
    occurred_before: datetime | None = None
    limit: int | None = None
    offset: int = 0

    def __post_init__(self) -> None:
        # Both databases count rows in 64-bit integers: a larger page is the caller's mistake.
        for name, count in (("limit", self.limit), ("offset", self.offset)):
            if count is not None and not 0 <= count <= MAX_ROWS:
                raise ValidationError(
                    f"{name} must be between 0 and {MAX_ROWS}, got {count}", **{name: str(count)}
                )
        # Refused here, for both backends alike: PostgreSQL cannot even send such a string.
        for name, texts in (
            ("prefix", () if self.prefix is None else (self.prefix,)),
            ("keys", self.keys or ()),
            ("text_any", self.text_any),
        ):
            for text in texts:
                check_text(text, what=name)


def as_filter(scope: Scope | ScopeFilter) -> ScopeFilter:
    """A ``Scope`` as the filter that matches exactly its partition."""
    return scope if isinstance(scope, ScopeFilter) else ScopeFilter(scope)


def check_expected(op: Expect, current: int | None) -> None:
    """Raise unless a record at version ``current`` (``None``: there is none) meets ``op``."""
    if current is None:
        raise NotFoundError(
            f"{op.namespace} {op.key!r} does not exist", namespace=op.namespace, key=op.key
        )
    if op.version is not None and op.version != current:
        raise VersionConflictError(
            f"{op.namespace} {op.key!r} is at version {current}, not {op.version}",
            namespace=op.namespace,
            key=op.key,
            expected=op.version,
            current=current,
        )


def key_taken(record: Record) -> ConflictError:
    """The error of a ``Put(if_absent=True)`` whose key a live record holds."""
    return ConflictError(
        f"{record.namespace} {record.key!r} already exists",
        namespace=record.namespace,
        key=record.key,
    )
