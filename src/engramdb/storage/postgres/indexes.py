"""``VectorIndexes``: creates the HNSW index of a (table, model) pair the first time that
model's vectors are written there, so the vector dimension always follows the configured
embedder without being declared anywhere.

While a bulk load runs (``deferring``), indexes that do not exist yet are only noted, and
built once when it ends: pgvector builds a graph from a full table many times faster than
it inserts the same rows one at a time (as a restore of a dump does), and searches stay
correct meanwhile, by exact scans."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from engramdb.core.errors import StorageError
from engramdb.storage.backend import INDEX_BUILD_MEMORY_MB
from engramdb.storage.postgres.connection import PostgresPool
from engramdb.storage.postgres.vectors import hnsw_index_name, hnsw_index_sql

#: SQLSTATEs meaning "someone else made it" or "only the owner may": the index is an
#: accelerator, so a write goes on without it (exact scans stay correct).
_TOLERATED = {"42P07", "23505", "42501"}

_Key = tuple[str, str]


class VectorIndexes:
    """The HNSW indexes this process knows to exist."""

    def __init__(self, pool: PostgresPool) -> None:
        self._pool = pool
        self._known: set[_Key] = set()
        self._lock = asyncio.Lock()
        #: While a bulk load runs: the indexes to build when it ends, with their dimensions.
        self._deferred: dict[_Key, int] | None = None

    async def ensure(self, table: str, model: str, dimensions: int) -> None:
        """Create ``model``'s index on ``table`` for ``dimensions``-long vectors, unless it
        exists (as the connecting user, who owns the schema); during a bulk load, note it
        for the end instead."""
        if (table, model) in self._known or not model or dimensions <= 0:
            return
        if self._deferred is not None:
            self._deferred.setdefault((table, model), dimensions)
            return
        await self._create(table, model, dimensions)

    async def _create(self, table: str, model: str, dimensions: int, *, memory_mb: int = 0) -> None:
        async with self._lock:
            if (table, model) in self._known:
                return
            try:
                async with self._pool.owner() as conn:
                    cursor = await conn.execute(
                        "SELECT 1 FROM pg_indexes WHERE schemaname = current_schema() "
                        "AND indexname = %s",
                        (hnsw_index_name(table, model),),
                    )
                    if await cursor.fetchone() is None:
                        if memory_mb > 0:
                            await conn.execute(
                                f"SET LOCAL maintenance_work_mem = '{int(memory_mb)}MB'"
                            )
                        await conn.execute(hnsw_index_sql(table, model, dimensions))
            except StorageError as exc:
                if exc.details.get("sqlstate") not in _TOLERATED:
                    raise
            self._known.add((table, model))

    @asynccontextmanager
    async def deferring(self, memory_mb: int = INDEX_BUILD_MEMORY_MB) -> AsyncIterator[None]:
        """Build the indexes first needed while this runs once it ends (nested: when the
        outermost ends), each with ``memory_mb`` megabytes for the build. Writers of the
        table wait while its index is built; readers do not."""
        if self._deferred is not None:
            yield
            return
        self._deferred = {}
        try:
            yield
        finally:
            deferred, self._deferred = self._deferred, None
            for (table, model), dimensions in deferred.items():
                await self._create(table, model, dimensions, memory_mb=memory_mb)
