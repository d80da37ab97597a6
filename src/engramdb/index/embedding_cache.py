"""``PersistentEmbeddingCache``: an embedder's vectors kept in a SQLite file across runs.

Re-embedding the same texts is the slow part of repeated benchmark runs (LongMemEval_S holds
about 93,000 distinct user turns). The cache keys each vector by ``(model_id, sha256(text))``,
so vectors of different models never mix, and returns exactly the rows the wrapped embedder
returned when they were stored: float32 bytes are written and read unchanged.

The file is a cache, never a source of truth: deleting it only costs time.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import sqlite3
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

import numpy as np

from engramdb.core.errors import EmbedderError
from engramdb.index.embedder import (
    BatchEmbedder,
    FloatArray,
    WrappingEmbedder,
    check_texts,
    empty_matrix,
)

_T = TypeVar("_T")
_SCHEMA = """
CREATE TABLE IF NOT EXISTS embeddings (
    model_id TEXT NOT NULL,
    text_sha256 BLOB NOT NULL,
    dimensions INTEGER NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (model_id, text_sha256)
) WITHOUT ROWID
"""
# Keys per SELECT: well under SQLite's bound on host parameters (32,766 since 3.32).
_LOOKUP_CHUNK = 500
_FLOAT32_LE = np.dtype("<f4")


class PersistentEmbeddingCache(WrappingEmbedder[BatchEmbedder]):
    """An ``Embedder`` that asks ``inner`` only for texts it has never stored.

    Texts not in the file (each distinct text once) go to ``inner`` in batches of
    ``batch_size``; each batch is written in one transaction as soon as it is embedded, so an
    interrupted run keeps what it finished. SQLite work runs on one worker thread, off the
    event loop.

    Args:
        inner: the embedder to cache.
        path: the SQLite file; created, with its folder, if missing.
        batch_size: texts per call to ``inner``.
    """

    def __init__(self, inner: BatchEmbedder, path: str | Path, *, batch_size: int = 1024) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        super().__init__(inner)
        self._path = Path(path)
        self._batch_size = batch_size
        self._connection: sqlite3.Connection | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._hits = 0
        self._misses = 0

    @property
    def path(self) -> Path:
        """The cache file."""
        return self._path

    @property
    def hits(self) -> int:
        """Texts served from the file since this object was made (each row counted)."""
        return self._hits

    @property
    def misses(self) -> int:
        """Texts not found in the file since this object was made (each row counted; a text
        repeated within one call is still embedded once)."""
        return self._misses

    async def embed(self, texts: Sequence[str]) -> FloatArray:
        """Embed ``texts``, reading stored vectors and embedding only the rest.

        Raises:
            InvalidValueError: an item of ``texts`` is not a string.
            EmbedderError: the cache file cannot be used, or the wrapped embedder failed or
                returned a wrongly shaped result.
        """
        wanted = check_texts(texts)
        dimensions = self.dimensions
        if not wanted:
            return empty_matrix(dimensions)
        model_id = self.model_id
        keys = [hashlib.sha256(text.encode("utf-8")).digest() for text in wanted]
        stored = await self._in_worker(
            functools.partial(self._lookup, model_id, dimensions, sorted(set(keys)))
        )
        result = np.empty((len(wanted), dimensions), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        for row, key in enumerate(keys):
            vector = stored.get(key)
            if vector is None:
                missing.setdefault(key, []).append(row)
            else:
                result[row] = vector
                self._hits += 1
        pending = list(missing)
        for start in range(0, len(pending), self._batch_size):
            batch = pending[start : start + self._batch_size]
            fresh = await self._embed_inner([wanted[missing[key][0]] for key in batch])
            fresh = np.asarray(fresh, dtype=np.float32)
            for key, vector in zip(batch, fresh, strict=True):
                result[missing[key]] = vector
                self._misses += len(missing[key])
            await self._in_worker(
                functools.partial(self._store, model_id, dimensions, batch, fresh)
            )
        return result

    async def aclose(self) -> None:
        """Close the cache file (later calls reopen it)."""
        if self._executor is not None:
            await self._in_worker(self._close_connection)
            self._executor.shutdown(wait=True)
            self._executor = None

    # -- worker-thread side -------------------------------------------------------------------

    async def _in_worker(self, call: Callable[[], _T]) -> _T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="engram-ecache")
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    def _db(self) -> sqlite3.Connection:
        if self._connection is None:
            try:
                self._path.parent.mkdir(parents=True, exist_ok=True)
                connection = sqlite3.connect(self._path)
                connection.execute("PRAGMA journal_mode=WAL")
                connection.execute(_SCHEMA)
                connection.commit()
            except (OSError, sqlite3.Error) as exc:
                raise self._failure("cannot open", exc) from exc
            self._connection = connection
        return self._connection

    def _lookup(self, model_id: str, dimensions: int, keys: list[bytes]) -> dict[bytes, FloatArray]:
        db = self._db()
        found: dict[bytes, FloatArray] = {}
        try:
            for start in range(0, len(keys), _LOOKUP_CHUNK):
                chunk = keys[start : start + _LOOKUP_CHUNK]
                rows = db.execute(
                    "SELECT text_sha256, vector FROM embeddings WHERE model_id = ? AND "
                    f"dimensions = ? AND text_sha256 IN ({', '.join('?' * len(chunk))})",
                    (model_id, dimensions, *chunk),
                )
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=_FLOAT32_LE)
                    if vector.shape == (dimensions,):  # a damaged row is a miss, not an error
                        found[bytes(key)] = vector.astype(np.float32)
        except sqlite3.Error as exc:
            raise self._failure("cannot read", exc) from exc
        return found

    def _store(
        self, model_id: str, dimensions: int, keys: list[bytes], vectors: FloatArray
    ) -> None:
        db = self._db()
        rows = [
            (model_id, key, dimensions, vector.astype(_FLOAT32_LE).tobytes())
            for key, vector in zip(keys, vectors, strict=True)
        ]
        try:
            with db:
                db.executemany(
                    "INSERT OR REPLACE INTO embeddings "
                    "(model_id, text_sha256, dimensions, vector) VALUES (?, ?, ?, ?)",
                    rows,
                )
        except sqlite3.Error as exc:
            raise self._failure("cannot write", exc) from exc

    def _close_connection(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _failure(self, action: str, exc: BaseException) -> EmbedderError:
        return EmbedderError(
            f"{action} the embedding cache {self._path}: {exc}",
            model_id=self.model_id,
            path=str(self._path),
        )
