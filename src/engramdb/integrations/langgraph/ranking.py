"""Scores of a store search's candidates for a query, higher is better.

Two ways, by the store's index configuration: with an embedding function of its own, the
cosine similarity of the query to each item's stored vectors (the best one counting); without,
Engram's hybrid search — BM25 over the indexed texts fused with the engine model's vectors —
restricted to the candidates, so a namespace prefix and a filter never hide a better match.
Items that were not indexed get no score.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import numpy as np

from engramdb.core.errors import EmbedderUnavailableError
from engramdb.core.scope import Scope
from engramdb.index.fusion import fuse
from engramdb.orchestrator.store_items import NAMESPACE, indexed_texts
from engramdb.providers.indexing import Indexer
from engramdb.storage.backend import Backend
from engramdb.storage.records import Record, RecordQuery

FloatMatrix = np.ndarray[Any, np.dtype[np.float32]]


def pack_vectors(vectors: Sequence[Sequence[float]]) -> list[str]:
    """Vectors as stored in an item: base64 of little-endian float32."""
    return [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in vectors]


def stored_vectors(value: Any) -> bytes | None:
    """The vectors an item stored with :func:`pack_vectors`, as one run of float32 bytes."""
    packed = value.get("vectors") if isinstance(value, dict) else None
    return b"".join(base64.b64decode(text) for text in packed) if packed else None


def best_cosines(query: FloatMatrix, stored: dict[int, bytes], width: int) -> dict[int, float]:
    """For each record id, the best cosine similarity of ``query`` to its vectors (float32
    bytes of ``width``-wide rows), computed in one matrix product."""
    if not stored:
        return {}
    ids = list(stored)
    rows = np.frombuffer(b"".join(stored.values()), dtype="<f4").reshape(-1, width)
    counts = np.array([len(stored[i]) // (4 * width) for i in ids])
    norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(query))
    dots = rows @ query
    similarities = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    starts = np.concatenate(([0], np.cumsum(counts)[:-1]))
    best = np.maximum.reduceat(similarities, starts)
    return dict(zip(ids, best.tolist(), strict=True))


def own_vector_scores(query: Sequence[float], candidates: Sequence[Record]) -> dict[int, float]:
    """Cosine scores against the vectors items stored from the store's own embedder."""
    stored = {
        record.id: blob
        for record in candidates
        if record.id is not None and (blob := stored_vectors(record.value))
    }
    vector = np.asarray(query, dtype=np.float32)
    return best_cosines(vector, stored, len(vector))


async def hybrid_scores(
    backend: Backend, indexer: Indexer, partition: Scope, query: str, candidates: Sequence[Record]
) -> dict[int, float]:
    """Engram's hybrid relevance, in [0, 1], of the indexed candidates that match ``query``."""
    ids = tuple(r.id for r in candidates if r.id is not None and indexed_texts(r.value))
    if not ids:
        return {}
    among = RecordQuery(NAMESPACE, partition, ids=ids)
    signals: dict[str, dict[int, float]] = {}
    match = await indexer.full_text_match(query, NAMESPACE, partition)
    if match is not None and indexer.config.mode != "vector":
        signals["bm25"] = dict(await backend.search.text_ids(among, match, len(ids)))
    if indexer.embedder is not None and indexer.config.mode != "bm25":
        try:
            vector = await indexer.embed_query(query)
        except EmbedderUnavailableError:
            vector = None  # a busy model: rank by full text alone
        if vector is not None:
            stored = await backend.search.vector_sets(among, indexer.model)
            signals["vector"] = best_cosines(
                np.asarray(vector, dtype=np.float32), stored, indexer.embedder.dimensions
            )
    signals = {name: signal for name, signal in signals.items() if signal}
    if not signals:
        return {}
    return {hit.id: hit.score for hit in fuse(signals, indexer.config)}
