"""Generic key/value entries of persistent memory, and unified recall across providers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query, Response

from engramdb.core.errors import NotFoundError
from engramdb.core.types import MemoryEntry, RecallQuery, utc_now
from engramdb.orchestrator.redaction import redact_entry
from engramdb.providers.projection import record_entry
from engramdb.service.auth import ReadCaller, WriteCaller
from engramdb.service.deps import EngineDep
from engramdb.service.errors import public_failure
from engramdb.service.models import (
    Deleted,
    EntryIn,
    FailedProvider,
    Page,
    RecallIn,
    RecallOut,
)
from engramdb.service.raw_reads import RawReads
from engramdb.service.routing import KeyPath, Offset, area_router
from engramdb.service.versions import IfMatch, expected_version, set_etag
from engramdb.storage.records import RecordQuery

router = area_router("/v1/memory", "entries")


@router.post("/entries", status_code=201, summary="Store an entry")
async def store_entry(
    body: EntryIn,
    caller: WriteCaller,
    engine: EngineDep,
    response: Response,
    if_match: IfMatch = None,
) -> MemoryEntry:
    """Store ``value`` under ``key`` in the caller's persistent memory (replacing what was
    there), with its event; with ``If-Match``, only over that version of the entry (409 if
    it changed since, 404 if there is none)."""
    entry = await caller.memory(engine).persistent.write(
        body.key,
        body.value,
        content_type=body.content_type,
        metadata=body.metadata,
        ttl_ms=body.ttl_ms,
        expected_version=expected_version(if_match),
    )
    set_etag(response, entry.version)
    return entry


@router.get("/entries", summary="List entries")
async def list_entries(
    caller: ReadCaller,
    engine: EngineDep,
    prefix: Annotated[str | None, Query(min_length=1, max_length=512)] = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Offset = 0,
    raw: RawReads = False,
) -> Page[MemoryEntry]:
    """Live entries of the caller's persistent memory by key, those starting with
    ``prefix`` only if given."""
    provider = caller.memory(engine).persistent
    records = await provider.backend.scan(
        RecordQuery(
            provider.provider_id,
            provider.partition,
            prefix=prefix,
            alive_at=utc_now(),
            limit=limit + 1,
            offset=offset,
        )
    )
    more = len(records) > limit
    entries = [record_entry(r) for r in records[:limit]]
    return Page(
        items=entries if raw else [redact_entry(engine.config.redaction, e) for e in entries],
        next_offset=offset + limit if more else None,
    )


@router.get("/entries/{key}", summary="Read an entry")
async def read_entry(
    key: KeyPath, caller: ReadCaller, engine: EngineDep, response: Response, raw: RawReads = False
) -> MemoryEntry:
    """The live entry under ``key``; its version is the ``ETag``."""
    entry = await caller.memory(engine).persistent.read(key)
    if entry is None:
        raise NotFoundError(f"no entry {key!r}", resource="entry", id=key)
    set_etag(response, entry.version)
    return entry if raw else redact_entry(engine.config.redaction, entry)


@router.delete("/entries/{key}", summary="Delete an entry")
async def delete_entry(
    key: KeyPath, caller: WriteCaller, engine: EngineDep, if_match: IfMatch = None
) -> Deleted:
    """Delete the entry under ``key`` (its history stays in the event log); 404 if none.
    With ``If-Match``, only that version (409 if it changed since)."""
    persistent = caller.memory(engine).persistent
    if not await persistent.delete(key, expected_version=expected_version(if_match)):
        raise NotFoundError(f"no entry {key!r}", resource="entry", id=key)
    return Deleted(deleted=True)


@router.post("/recall", summary="Unified recall")
async def recall(
    body: RecallIn, caller: ReadCaller, engine: EngineDep, raw: RawReads = False
) -> RecallOut:
    """The memories across every provider of the caller's scope that best match the query,
    merged by relevance. A provider that fails is named in ``failed_providers``; when every
    one fails the answer is an error: 422 ``invalid_recall_query`` if they all refused the
    query, else 503 ``recall_error``."""
    query = RecallQuery.model_validate(body.model_dump())
    report = await caller.memory(engine).manager.recall_report(query, raw=raw)
    return RecallOut(
        results=report.results,
        failed_providers=[
            FailedProvider.model_validate(public_failure(f.to_dict())) for f in report.failures
        ],
    )
