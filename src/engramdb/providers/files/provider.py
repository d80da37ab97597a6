"""``FileMemoryProvider``: persistent memory a person can read and edit, as markdown files
(the MemU-style provider of rfc-2001 §11 and rfc-2002 §6.3).

The log is the truth and the files are a projection of it. The seed's sample writes the file
first and appends the event afterwards (a crash between the two leaves a memory no log
knows); here every write commits its record and its ``memory.written`` / ``memory.deleted``
event in one transaction, exactly as ``EventSourcedProvider`` does, and only then rewrites the
affected category files. If rewriting a file fails after the commit, the write still stands
(it is acknowledged and in the log): the failure is logged, and the next write to that
category, ``rescan()`` or ``rebuild()`` renders the file again from the records.

A person may edit the files. ``rescan()`` compares each file with its baseline (the file as
last rendered, kept in ``.engram/``), so a file that is merely behind the log (a failed
render, another process's write) is not mistaken for an edit; each edited, added or removed
block becomes a write or delete with its event, and the files are rendered again.

Search, TTL, scoping and rebuild are the event-sourced provider's; keys, categories and the
scope's tenant and user are additionally checked to be safe names (``names``) before
anything is written.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Literal

from engramdb.core.errors import EngramError
from engramdb.core.events import MemoryDeleted, ProducerRef, TraceContext
from engramdb.core.scope import Scope
from engramdb.core.types import MemoryEntry, MemoryTier, ProviderCapabilities, utc_now
from engramdb.core.validation import DEFAULT_MAX_VALUE_BYTES, validate_key
from engramdb.providers.event_sourced import EventSourcedProvider, WriteRequest
from engramdb.providers.files.edits import (
    baseline,
    by_key,
    occurred,
    parse,
    record_block,
    same,
    ttl,
    view,
)
from engramdb.providers.files.folder import SUFFIX, Folder
from engramdb.providers.files.markdown import Block, render_file
from engramdb.providers.files.names import check_key
from engramdb.providers.files.store import FILE_LEVELS, FileStore, check_category
from engramdb.providers.indexing import Indexer
from engramdb.providers.projection import ProjectionSpec
from engramdb.storage.backend import Backend
from engramdb.storage.records import Delete, Record

FILES_PROVIDER_ID = "files"
FILES_SPEC = ProjectionSpec(FILES_PROVIDER_ID, FILE_LEVELS, vectors=True)

log = logging.getLogger("engramdb.providers.files")


@dataclass(frozen=True)
class RescanReport:
    """What a rescan found edited by hand and turned into events (keys, sorted)."""

    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: Markdown files that are not a category (their name is not a content type), left alone.
    ignored: list[str] = field(default_factory=list)

    @property
    def edits(self) -> int:
        """How many memories the edits changed."""
        return len(self.added) + len(self.changed) + len(self.removed)


class FileMemoryProvider(EventSourcedProvider):
    """Persistent memory of one tenant/user, mirrored as one markdown file per category."""

    def __init__(
        self,
        backend: Backend,
        scope: Scope | None,
        files: FileStore,
        *,
        provider_id: str = FILES_PROVIDER_ID,
        spec: ProjectionSpec | None = None,
        indexer: Indexer | None = None,
        producer: ProducerRef | None = None,
        max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES,
    ) -> None:
        super().__init__(
            backend,
            scope,
            provider_id=provider_id,
            spec=spec or ProjectionSpec(provider_id, FILE_LEVELS, vectors=True),
            indexer=indexer,
            tier=MemoryTier.PERSISTENT,
            producer=producer,
            max_value_bytes=max_value_bytes,
        )
        self.files = files

    def capabilities(self) -> ProviderCapabilities:
        """Persistent, searchable; any content type (each is a file), the configured
        categories first."""
        return ProviderCapabilities(
            provider_id=self.provider_id,
            tier=self.tier,
            supports_search=True,
            content_types=[*self.files.categories, "*"],
        )

    # -- writes go through the folder --------------------------------------------------------

    @asynccontextmanager
    async def _changing(self, keys: Iterable[str] | None) -> AsyncIterator[Folder]:
        """Lock this scope's folder (refusing an unsafe one before anything is written), take
        in a person's pending edits (a broken file is left as it is, for ``rescan`` to
        report), run the change, then render every category the changed ``keys`` were or now
        are in (``None``: every category), and the edited files."""
        parts = self.files.parts(self.scope)
        async with self.files.folder(parts, create=True) as folder:
            assert folder is not None
            wanted = None if keys is None else tuple(keys)
            _, edited, held = await self._take_in_edits(folder, strict=False)
            before = await self._categories(wanted)
            yield folder
            after = await self._categories(wanted)
            await self._render(folder, (before | after | edited) - held)

    async def _take_in_edits(
        self, folder: Folder, *, strict: bool
    ) -> tuple[RescanReport, set[str], set[str]]:
        """Apply the edits of files that differ from their baseline. Returns what was done,
        the categories to render (the edited ones and configured ones without a file) and,
        when not ``strict`` and the edits could not be applied, the edited categories to
        leave unrendered."""
        texts, ignored = await asyncio.to_thread(_read_texts, folder)
        missing = {c for c in self.files.categories if texts.get(c, (None, None))[0] is None}
        dirty = {name for name, (text, base) in texts.items() if text != base}
        if not dirty:
            return RescanReport(ignored=ignored), missing, set()
        try:
            now = {n: parse(text, n) for n, (text, _) in texts.items()}
            then = {n: baseline(base, n) for n, (_, base) in texts.items()}
            report = await self._apply(now, then, ignored)
        except EngramError:
            if strict:
                raise
            log.warning("hand edits of %s not taken in; rescan reports why", self.scope.label())
            return RescanReport(ignored=ignored), missing - dirty, dirty
        return report, missing | dirty, set()

    async def _categories(self, keys: tuple[str, ...] | None) -> set[str]:
        if keys is None:
            return set(await self._all_categories())
        records = await self.backend.scan(self._query(keys=keys, hidden=None))
        return {r.content_type for r in records}

    async def _all_categories(self) -> list[str]:
        records = await self.backend.scan(self._query(alive_at=utc_now()))
        return sorted({*self.files.categories, *(r.content_type for r in records)})

    async def _render(self, folder: Folder, categories: Iterable[str]) -> None:
        texts: dict[str, str | None] = {}
        for category in sorted(categories):
            records = await self.backend.scan(
                self._query(content_types=(category,), alive_at=utc_now())
            )
            blocks = [record_block(r) for r in sorted(records, key=lambda r: r.key)]
            keep = blocks or category in self.files.categories
            texts[category + SUFFIX] = render_file(category, blocks) if keep else None
        try:
            await asyncio.to_thread(_write_all, folder, texts)
        except OSError:
            # The records and their events are committed: the write stands, and the next
            # render, rescan or rebuild brings the files level with the log again.
            log.exception("memory files of %s not rendered", self.scope.label())

    def _check(self, requests: Sequence[WriteRequest]) -> None:
        for request in requests:
            check_key(validate_key(request.key))
            check_category(request.content_type)

    async def write_many(self, requests: Sequence[WriteRequest]) -> list[MemoryEntry]:
        """Store several entries and their events in one transaction, then render their
        category files.

        Raises:
            UnsafePathError: a key, category, tenant or user could leave the folder, or the
                folder is reached through a symlink (nothing is written).
        """
        self._check_writable()
        self._check(requests)
        async with self._changing(r.key for r in requests):
            return await super().write_many(requests)

    async def forget(
        self,
        key: str,
        mode: Literal["soft", "hard"] = "soft",
        *,
        purge: bool = True,
        expected_version: int | None = None,
    ) -> bool:
        """Forget ``key`` (see ``EventSourcedProvider.forget``) and render its category."""
        self._check_writable()
        check_key(validate_key(key))
        async with self._changing([key]):
            return await super().forget(key, mode, purge=purge, expected_version=expected_version)

    async def restore(self, key: str) -> bool:
        """Restore a soft-forgotten ``key`` and render its category."""
        self._check_writable()
        check_key(validate_key(key))
        async with self._changing([key]):
            return await super().restore(key)

    async def evict(self, keys: Sequence[str]) -> list[str]:
        """Evict ``keys`` (each with ``memory.expired``) and render their categories."""
        async with self._changing(keys):
            return await super().evict(keys)

    async def sweep_expired(self) -> list[str]:
        """Remove expired entries and render the files without them."""
        async with self._changing(None):
            return await super().sweep_expired()

    # -- hand edits ----------------------------------------------------------------------------

    async def rescan(self) -> RescanReport:
        """Turn the edits a person made to this scope's files into events.

        A block added, changed (its text, its category file, or its engram line's metadata,
        ``ttl_ms`` or ``occurred_at``) or removed since the file was last rendered becomes a
        write or a delete; then every file is rendered again.

        Raises:
            MemoryFileError: a file cannot be read back (nothing is written; fix it and
                rescan again).
            UnsafePathError: the folder or a file is a symlink.
        """
        parts = self.files.parts(self.scope)
        # A folder removed whole (baselines too) holds no edits: it is rendered again when
        # there is anything to render, and not made for a scope that holds nothing.
        stored = await self.backend.count(self._query(alive_at=utc_now()))
        async with self.files.folder(parts, create=stored > 0) as folder:
            if folder is None:
                return RescanReport()
            report, seen, _ = await self._take_in_edits(folder, strict=True)
            await self._render(folder, {*await self._all_categories(), *seen})
        return report

    async def _apply(
        self,
        now: dict[str, list[Block]],
        then: dict[str, list[Block]],
        ignored: list[str],
    ) -> RescanReport:
        current, before = by_key(now), by_key(then)
        edited = sorted(
            key
            for key in current.keys() | before.keys()
            if view(current.get(key)) != view(before.get(key))
        )
        records = {
            r.key: r
            for r in await self.backend.scan(self._query(keys=tuple(edited), alive_at=utc_now()))
        }
        writes: list[WriteRequest] = []
        removes: list[str] = []
        for key in edited:
            found, record = current.get(key), records.get(key)
            if found is None:
                if record is not None:
                    removes.append(key)
                continue
            category, block = found
            if record is None or not same(block, category, record):
                writes.append(
                    WriteRequest(
                        key, block.value, category, block.metadata, ttl(block), occurred(block)
                    )
                )
        self._check(writes)
        try:
            if writes:
                await EventSourcedProvider.write_many(self, writes)
            await self._remove(removes, records)
        except EngramError as exc:
            exc.details.setdefault("during", "rescan")
            raise
        return RescanReport(
            added=[w.key for w in writes if w.key not in records],
            changed=[w.key for w in writes if w.key in records],
            removed=removes,
            ignored=ignored,
        )

    async def _remove(self, keys: list[str], records: dict[str, Record]) -> None:
        """Delete ``keys`` (blocks a person removed) with a ``memory.deleted`` each, in one
        transaction; their history stays in the log, as with ``delete``."""
        if not keys:
            return
        trace = TraceContext()
        events = [
            self._envelope(
                MemoryDeleted(key=key, provider_id=self.provider_id, mode="hard"), trace=trace
            )
            for key in keys
        ]
        await self.backend.commit(
            [Delete(self.provider_id, self.partition, key) for key in keys], events
        )
        self.indexer.removed(
            self.provider_id,
            self.partition,
            [row for key in keys if (row := records[key].id) is not None],
        )

    async def render(self) -> None:
        """Render every category file of this scope from the records (the log's state)."""
        async with self._changing(None):
            pass

    async def rebuild(self) -> None:
        """Take in hand edits (``rescan``), recompute the records from the log, and render
        the files from them again."""
        await self.rescan()
        await super().rebuild()
        await self.render()


def _read_texts(
    folder: Folder,
) -> tuple[dict[str, tuple[str | None, str | None]], list[str]]:
    """Every category file's text as it is now and as last rendered (``None``: no such
    file), and the markdown files that are no category."""
    texts: dict[str, tuple[str | None, str | None]] = {}
    ignored: list[str] = []
    for name in sorted({*folder.names(), *folder.names(baseline=True)}):
        try:
            check_category(name)
        except EngramError:
            ignored.append(name + SUFFIX)
            continue
        texts[name] = (folder.read(name + SUFFIX), folder.read(name + SUFFIX, baseline=True))
    return texts, ignored


def _write_all(folder: Folder, texts: dict[str, str | None]) -> None:
    # The visible file first: a crash between the two leaves a file ahead of its baseline,
    # which a rescan reads as an edit equal to the records, and so changes nothing.
    for name, text in texts.items():
        if text is None:
            folder.remove(name)
            folder.remove(name, baseline=True)
        else:
            folder.write(name, text)
            folder.write(name, text, baseline=True)
