"""``VectorIndexes``: creates the HNSW index of a (table, model) pair the first time that
model's vectors are written there, so the vector dimension always follows the configured
embedder without being declared anywhere."""

from __future__ import annotations

import asyncio

from engramdb.core.errors import StorageError
from engramdb.storage.postgres.connection import PostgresPool
from engramdb.storage.postgres.vectors import hnsw_index_name, hnsw_index_sql

#: SQLSTATEs meaning "someone else made it" or "only the owner may": the index is an
#: accelerator, so a write goes on without it (exact scans stay correct).
_TOLERATED = {"42P07", "23505", "42501"}


class VectorIndexes:
    """The HNSW indexes this process knows to exist."""

    def __init__(self, pool: PostgresPool) -> None:
        self._pool = pool
        self._known: set[tuple[str, str]] = set()
        self._lock = asyncio.Lock()

    async def ensure(self, table: str, model: str, dimensions: int) -> None:
        """Create ``model``'s index on ``table`` for ``dimensions``-long vectors, unless it
        exists (as the connecting user, who owns the schema)."""
        if (table, model) in self._known or not model or dimensions <= 0:
            return
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
                        await conn.execute(hnsw_index_sql(table, model, dimensions))
            except StorageError as exc:
                if exc.details.get("sqlstate") not in _TOLERATED:
                    raise
            self._known.add((table, model))
