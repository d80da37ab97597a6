"""``PostgresRebuild``: the PostgreSQL steps of a staged rebuild (see ``storage/rebuild.py``).

The snapshot is one ``REPEATABLE READ`` read-only transaction that takes no lock; each applying
transaction holds the writers' lock exclusively, for one batch only. A changed record is
updated in place (its id stays, and its vector while its text is unchanged); a record that
goes is deleted. A tenant deleted while the rebuild ran (its rows and events cascade away, no
event says so) is not brought back: changes for tenants that no longer exist are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import Any

from engramdb.core.scope import ScopeFilter
from engramdb.storage.backend import EventQuery, Fold
from engramdb.storage.postgres.connection import Connection, PostgresPool
from engramdb.storage.postgres.event_store import ensure_replicas, hold_writers
from engramdb.storage.postgres.queries import (
    EVENT_SELECT,
    PARTITION,
    WRITTEN_COLUMNS,
    event_where,
    record_select_list,
    scope_clauses,
)
from engramdb.storage.postgres.schema import recount_text_stats, table_for
from engramdb.storage.postgres.tenancy import context_for, tenant_uuid, user_uuid
from engramdb.storage.rebuild import (
    SLOT_COLUMNS,
    Change,
    Progress,
    Slot,
    Snapshot,
    settle_plan,
    slot_of,
    slot_of_row,
    still_planned,
)
from engramdb.storage.records import Record
from engramdb.storage.rows import RECORD_COLUMNS, record_row, row_event, row_record

_VECTOR_COLUMNS = ("embedding", "embedding_model", "embedding_parts")


def replace_record(namespace: str) -> str:
    """Store a record as it is, every column (``WRITTEN_COLUMNS`` order, without a vector);
    a stored vector stays while the text it was computed from is unchanged."""
    kept = [f"{c} = excluded.{c}" for c in RECORD_COLUMNS[7:]]
    kept += [f"{c} = CASE WHEN r.text = excluded.text THEN r.{c} END" for c in _VECTOR_COLUMNS]
    return (
        f"INSERT INTO {table_for(namespace)} AS r ({', '.join(WRITTEN_COLUMNS)}) "
        f"VALUES ({', '.join(['%s'] * len(WRITTEN_COLUMNS))}) "
        f"ON CONFLICT (namespace, {', '.join(SLOT_COLUMNS)}) DO UPDATE SET {', '.join(kept)}"
    )


class PostgresRebuild:
    """One rebuild of ``namespace`` within ``scope`` from the events ``source`` selects."""

    def __init__(
        self,
        pool: PostgresPool,
        namespace: str,
        scope: ScopeFilter | None,
        source: EventQuery,
        fold: Fold,
    ) -> None:
        self._pool = pool
        self._namespace = namespace
        self._table = table_for(namespace)
        self._source = source
        self._fold = fold
        self._context = context_for([scope])
        scope_sql, scope_params = scope_clauses(scope)
        self._where = " AND ".join(["namespace = %s", *scope_sql])
        self._params: list[Any] = [namespace, *scope_params]

    async def snapshot(self) -> Snapshot:
        """Fold the log and read the records, as of one moment, holding no writer off."""
        sql, params = event_where(self._source)
        async with self._pool.transaction(self._context, snapshot=True) as conn:
            cursor = await conn.execute("SELECT coalesce(max(position), 0) FROM events")
            row = await cursor.fetchone()
            position = int(row[0]) if row else 0
            cursor = await conn.execute(
                f"{EVENT_SELECT} WHERE {sql} AND position <= %s ORDER BY position",
                [*params, position],
            )
            events = await cursor.fetchall()
            target = {slot_of(r): r for r in self._fold(row_event(e[0], e[1:]) for e in events)}
            cursor = await conn.execute(
                f"SELECT {record_select_list()} FROM {self._table} r WHERE {self._where}",
                self._params,
            )
            current = {
                slot_of_row(stored): stored
                for stored in (record_row(row_record(r)) for r in await cursor.fetchall())
            }
        return Snapshot(position, target, current)

    async def apply(self, changes: Sequence[Change], progress: Progress, *, settle: bool) -> None:
        """See ``StagedRebuild.apply``."""
        async with self._pool.transaction(self._context) as conn:
            await hold_writers(conn, exclusive=True)
            await self._mark_touched(conn, progress)
            if changes:
                stored = await self._rows(conn, [c.slot for c in changes])
                await self._store(conn, still_planned(changes, stored, progress))
            if settle:
                await self._settle(conn, progress)
                # The rebuilt partitions' document counts and lengths are counted afresh. Their
                # terms and postings are not: the triggers kept them as the rebuild wrote, and a
                # recount would rewrite every posting while writers wait for this transaction.
                for statement in recount_text_stats(self._table, self._where):
                    await conn.execute(statement, self._params)

    async def _mark_touched(self, conn: Connection, progress: Progress) -> None:
        sql, params = event_where(replace(self._source, after=progress.position))
        cursor = await conn.execute(
            f"SELECT position, payload ->> 'key' FROM events WHERE {sql}", params
        )
        progress.saw(await cursor.fetchall())

    async def _rows(self, conn: Connection, slots: Sequence[Slot]) -> dict[Slot, tuple[Any, ...]]:
        """The stored rows (``record_row`` form) of those of ``slots`` that hold a record."""
        arrays = [list(column) for column in zip(*slots, strict=True)]
        unnest = ", ".join(["%s::text[]"] * len(SLOT_COLUMNS))
        cursor = await conn.execute(
            f"SELECT {record_select_list()} FROM {self._table} r WHERE {self._where} "
            f"AND ({', '.join(SLOT_COLUMNS)}) IN (SELECT * FROM unnest({unnest}))",
            [*self._params, *arrays],
        )
        rows = (record_row(row_record(r)) for r in await cursor.fetchall())
        return {slot_of_row(row): row for row in rows}

    async def _settle(self, conn: Connection, progress: Progress) -> None:
        """Fold the events of every touched key and store what they leave."""
        if not progress.touched:
            return
        keys = sorted(progress.touched)
        sql, params = event_where(self._source)
        cursor = await conn.execute(
            f"{EVENT_SELECT} WHERE {sql} AND payload ->> 'key' = ANY(%s) ORDER BY position",
            [*params, keys],
        )
        events = await cursor.fetchall()
        folded = [
            r
            for r in self._fold(row_event(e[0], e[1:]) for e in events)
            if r.key in progress.touched
        ]
        cursor = await conn.execute(
            f"SELECT {record_select_list()} FROM {self._table} r "
            f"WHERE {self._where} AND key = ANY(%s)",
            [*self._params, keys],
        )
        stored = [record_row(row_record(r)) for r in await cursor.fetchall()]
        await self._store(conn, settle_plan(folded, stored, progress.touched))
        progress.settled = len(folded)

    async def _store(self, conn: Connection, changes: Sequence[Change]) -> None:
        """Apply ``changes`` (the upsert itself keeps or drops each vector); records of
        tenants deleted meanwhile are left out."""
        doomed = [c.slot for c in changes if c.record is None]
        records = await self._of_live_tenants(conn, [c.record for c in changes if c.record])
        async with conn.cursor() as cursor:
            if doomed:
                await cursor.executemany(
                    f"DELETE FROM {self._table} WHERE {PARTITION} AND key = %s",
                    [(self._namespace, *slot) for slot in doomed],
                )
            if records:
                await ensure_replicas(conn, ((r.scope.tenant, r.scope.user or "") for r in records))
                await cursor.executemany(
                    replace_record(self._namespace),
                    [
                        (
                            tenant_uuid(r.scope.tenant),
                            user_uuid(r.scope.tenant, r.scope.user or ""),
                            *record_row(r),
                            None,
                            None,
                            None,
                        )
                        for r in records
                    ],
                )

    async def _of_live_tenants(self, conn: Connection, records: Iterable[Record]) -> list[Record]:
        chosen = list(records)
        if not chosen:
            return []
        uuids = sorted({tenant_uuid(r.scope.tenant) for r in chosen})
        cursor = await conn.execute("SELECT id FROM tenants WHERE id = ANY(%s)", (uuids,))
        live = {row[0] for row in await cursor.fetchall()}
        return [r for r in chosen if tenant_uuid(r.scope.tenant) in live]
