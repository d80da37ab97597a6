"""pgvector values on the wire, and the per-model HNSW indexes.

Stored vectors travel as pgvector's binary format (a big-endian dimension count, two unused
bytes, then big-endian float32s); above the driver they are the little-endian float32 bytes the
rest of Engram uses, so nothing is rounded on the way in or out.

A memory table holds vectors of any dimension in one untyped ``vector`` column. HNSW needs a
fixed dimension, so each (table, model) pair gets its own partial index on
``embedding::vector(n)``, created the first time that model's vectors are written.
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass
from typing import Any

import numpy as np
from psycopg import AsyncConnection
from psycopg.abc import Buffer
from psycopg.adapt import Dumper, Loader
from psycopg.pq import Format
from psycopg.types import TypeInfo

_HEADER = struct.Struct(">HH")


@dataclass(frozen=True)
class StoredVector:
    """A vector parameter: little-endian float32 bytes, sent as a pgvector ``vector``."""

    data: bytes


class VectorDumper(Dumper):
    """``StoredVector`` → pgvector binary."""

    format = Format.BINARY

    def dump(self, obj: Any) -> Buffer:
        """pgvector's binary form of ``obj.data``."""
        values = np.frombuffer(obj.data, dtype="<f4")
        return _HEADER.pack(len(values), 0) + values.astype(">f4").tobytes()


class VectorLoader(Loader):
    """pgvector binary → little-endian float32 bytes."""

    format = Format.BINARY

    def load(self, data: Buffer) -> bytes:
        """The float32 bytes of a binary pgvector value."""
        dimensions, _ = _HEADER.unpack_from(data)
        values = np.frombuffer(data, dtype=">f4", count=dimensions, offset=_HEADER.size)
        return values.astype("<f4").tobytes()


async def register_vector(conn: AsyncConnection[Any]) -> None:
    """Teach ``conn`` to send ``StoredVector`` and read ``vector`` columns in binary."""
    info = await TypeInfo.fetch(conn, "vector")
    if info is None:
        return  # before the first migration: the extension is not there yet
    dumper = type("BoundVectorDumper", (VectorDumper,), {"oid": info.oid})
    conn.adapters.register_dumper(StoredVector, dumper)
    conn.adapters.register_loader(info.oid, VectorLoader)


def hnsw_index_name(table: str, model: str) -> str:
    """A stable index name for ``model``'s vectors in ``table`` (model ids are free text)."""
    return f"{table}_hnsw_{hashlib.sha1(model.encode()).hexdigest()[:12]}"


def hnsw_index_sql(table: str, model: str, dimensions: int) -> str:
    """The statement creating the cosine HNSW index of ``model``'s vectors in ``table``."""
    literal = model.replace("'", "''")
    return (
        f"CREATE INDEX IF NOT EXISTS {hnsw_index_name(table, model)} ON {table} "
        f"USING hnsw ((embedding::vector({int(dimensions)})) vector_cosine_ops) "
        f"WHERE embedding_model = '{literal}'"
    )


def dimensions_of(vector: bytes) -> int:
    """How many float32 values ``vector`` holds."""
    return len(vector) // 4
