"""``ResourceStore``: named records that are not memories — task contexts, plans, sessions —
kept one per id in a tenant-wide namespace of the event-sourced store.

Every create, update and delete goes through ``EventSourcedProvider``, so each change is
stored with its ``memory.written`` / ``memory.deleted`` event in one transaction and the
records are rebuilt from the log like every memory. The fields a list filters by (user,
status, plan) are copied into the record's metadata, where both backends filter in SQL.

Ids are unique per tenant (the service spec's ``UNIQUE(tenant_id, task_id)``): a create
fails with ``ConflictError`` when the id is taken, decided in the write's transaction.

Every resource carries its ``version`` (1 when created, one more with each update). An update
merges its changes into the stored resource inside the write's transaction, so concurrent
updates of different fields all survive; a caller that passes ``expected_version`` writes only
over the version it read (``VersionConflictError`` otherwise). An update or delete of a
resource that is not there (never was, or was deleted) is a ``NotFoundError``: nothing
brings a deleted resource back but a create.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, ClassVar, Generic, TypeVar

from engramdb.core.errors import (
    ConflictError,
    NotFoundError,
    ValidationError,
    VersionConflictError,
)
from engramdb.core.scope import Level
from engramdb.core.types import utc_now
from engramdb.core.validation import model_value, validate_key
from engramdb.orchestrator.resource_models import Resource as Resource  # importable from here too
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.projection import KeyText, ProjectionSpec, plain_key_text
from engramdb.storage.records import Record, RecordQuery

#: Resources are shared by the whole tenant: every agent of a plan sees its task contexts.
TENANT_LEVELS: tuple[Level, ...] = ("tenant",)
MAX_PAGE = 1000
#: Deeper than any list goes, and small enough for every database's integers.
MAX_OFFSET = 1_000_000_000


#: The fields the store sets, never a caller.
STORE_FIELDS = frozenset({"created_at", "updated_at", "version"})


M = TypeVar("M", bound=Resource)


@dataclass(frozen=True)
class Page(Generic[M]):
    """One page of a list: the items and the offset of the next page (``None``: the last)."""

    items: list[M]
    next_offset: int | None


def resource_spec(namespace: str, key_text: KeyText = plain_key_text) -> ProjectionSpec:
    """The projection of a resource namespace: tenant-wide, no vectors."""
    return ProjectionSpec(namespace, levels=TENANT_LEVELS, key_text=key_text)


def check_page(limit: int, offset: int) -> None:
    """Reject a page size outside 1..1000 or an offset outside 0..MAX_OFFSET."""
    if not 1 <= limit <= MAX_PAGE:
        raise ValidationError(f"limit must be between 1 and {MAX_PAGE}", limit=limit)
    if not 0 <= offset <= MAX_OFFSET:
        raise ValidationError(f"offset must be between 0 and {MAX_OFFSET}", offset=offset)


class ResourceStore(Generic[M]):
    """The records of one resource kind in one tenant (see the module docstring)."""

    #: What the resource is called in errors ("task context").
    resource: ClassVar[str]
    #: The model's field that holds the id ("task_id").
    id_field: ClassVar[str]
    #: The model's fields copied to metadata for filtering.
    indexed: ClassVar[tuple[str, ...]] = ()
    content_type: ClassVar[str] = "activity"

    def __init__(self, provider: EventSourcedProvider, model: type[M]) -> None:
        self.provider = provider
        self.model = model

    def from_record(self, record: Record) -> M:
        """The resource a stored record holds, with the times and version the store set."""
        return self._stored(record.value, record.created_at, record.updated_at, record.version)

    def _stored(
        self, value: Any, created: datetime, updated: datetime | None, version: int | None
    ) -> M:
        fields = dict(value) if isinstance(value, dict) else {}
        fields.update(created_at=created, updated_at=updated or created, version=version)
        return self.model.model_validate(fields)

    def _missing(self, resource_id: str) -> NotFoundError:
        return NotFoundError(
            f"no {self.resource} {resource_id!r} in this tenant",
            resource=self.resource,
            id=resource_id,
        )

    async def find(self, resource_id: str) -> M | None:
        """The resource ``resource_id``, or ``None``."""
        record = await self.provider.read_record(validate_key(resource_id))
        return None if record is None else self.from_record(record)

    async def get(self, resource_id: str) -> M:
        """The resource ``resource_id``.

        Raises:
            NotFoundError: there is none.
        """
        found = await self.find(resource_id)
        if found is None:
            raise self._missing(resource_id)
        return found

    def _request(self, item: M, *, create: bool = False) -> WriteRequest:
        value = model_value(item, what=self.resource, exclude=set(STORE_FIELDS))
        metadata = {name: value[name] for name in self.indexed if value.get(name) is not None}
        resource_id = str(getattr(item, self.id_field))
        return WriteRequest(resource_id, value, self.content_type, metadata, create=create)

    async def _write(self, item: M, *, create: bool = False) -> M:
        (entry,) = await self.provider.write_many([self._request(item, create=create)])
        return item.model_copy(
            update={
                "created_at": entry.created_at,
                "updated_at": entry.updated_at or utc_now(),
                "version": entry.version,
            }
        )

    def _conflict(self, resource_id: str, exc: VersionConflictError) -> VersionConflictError:
        expected, current = exc.details.get("expected"), exc.details.get("current")
        return VersionConflictError(
            f"{self.resource} {resource_id!r} is at version {current}, not {expected}: "
            "it changed since it was read; read it again and retry",
            resource=self.resource,
            id=resource_id,
            expected=expected,
            current=current,
        )

    async def create(self, item: M) -> M:
        """Store a new resource.

        Raises:
            ConflictError: its id is taken in this tenant.
        """
        resource_id = validate_key(str(getattr(item, self.id_field)))
        try:
            # Decided inside the write's transaction: of two instances creating one id at
            # once, one gets the conflict.
            stored = await self._write(item, create=True)
        except ConflictError as exc:
            raise ConflictError(
                f"{self.resource} {resource_id!r} already exists",
                resource=self.resource,
                id=resource_id,
            ) from exc
        return stored.model_copy(update={"updated_at": stored.created_at})

    async def update(
        self,
        resource_id: str,
        changes: Mapping[str, Any],
        *,
        expected_version: int | None = None,
    ) -> M:
        """Replace the given fields of resource ``resource_id`` (others are kept), merged into
        the stored resource inside the write's transaction.

        Raises:
            NotFoundError: there is none (an update never recreates a deleted resource).
            VersionConflictError: ``expected_version`` is given and the resource is at another.
            ValidationError: a change names the id or an unknown field, or has a bad value.
        """
        validate_key(resource_id)
        unknown = set(changes) - (set(self.model.model_fields) - STORE_FIELDS)
        if unknown or self.id_field in changes:
            raise ValidationError(
                f"cannot change {sorted(unknown | ({self.id_field} & set(changes)))} "
                f"of a {self.resource}",
                fields=sorted(unknown),
            )
        changed = dict(changes)

        def merge(record: Record) -> WriteRequest:
            current = self.from_record(record).model_dump(exclude=set(STORE_FIELDS))
            # EngramModel turns a bad value into ValidationError (and the write is dropped).
            return self._request(self.model.model_validate({**current, **changed}))

        try:
            entry = await self.provider.update(
                resource_id, merge, expected_version=expected_version
            )
        except VersionConflictError as exc:
            raise self._conflict(resource_id, exc) from exc
        except NotFoundError as exc:
            raise self._missing(resource_id) from exc
        return self._stored(entry.value, entry.created_at, entry.updated_at, entry.version)

    async def delete(self, resource_id: str, *, expected_version: int | None = None) -> None:
        """Delete resource ``resource_id`` (its history stays in the event log).

        Raises:
            NotFoundError: there is none.
            VersionConflictError: ``expected_version`` is given and the resource is at another.
        """
        try:
            deleted = await self.provider.forget(
                validate_key(resource_id), "hard", purge=False, expected_version=expected_version
            )
        except VersionConflictError as exc:
            raise self._conflict(resource_id, exc) from exc
        except NotFoundError as exc:
            raise self._missing(resource_id) from exc
        if not deleted:
            raise self._missing(resource_id)

    async def list(
        self, *, filters: Mapping[str, Any] | None = None, limit: int = 50, offset: int = 0
    ) -> Page[M]:
        """Resources matching ``filters`` (exact values of indexed fields), ordered by id."""
        check_page(limit, offset)
        unknown = set(filters or {}) - set(self.indexed)
        if unknown:
            raise ValidationError(f"cannot filter {self.resource}s by {sorted(unknown)}")
        metadata = {k: v for k, v in (filters or {}).items() if v is not None}
        records = await self.provider.backend.scan(
            RecordQuery(
                self.provider.provider_id,
                self.provider.partition,
                metadata=metadata,
                alive_at=utc_now(),
                limit=limit + 1,
                offset=offset,
            )
        )
        more = len(records) > limit
        return Page(
            [self.from_record(r) for r in records[:limit]], offset + limit if more else None
        )
