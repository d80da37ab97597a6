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


def unpack_vectors(value: Any) -> FloatMatrix | None:
    """The vectors an item stored with :func:`pack_vectors`, one per row (``None`` if none)."""
    packed = value.get("vectors") if isinstance(value, dict) else None
    if not packed:
        return None
    rows = [np.frombuffer(base64.b64decode(text), dtype="<f4") for text in packed]
    return np.vstack(rows).astype(np.float32)


def best_cosine(query: FloatMatrix, rows: FloatMatrix) -> float:
    """The highest cosine similarity of ``query`` to any row (0 for zero vectors)."""
    norms = np.linalg.norm(rows, axis=1) * float(np.linalg.norm(query))
    dots = rows @ query
    similarities = np.divide(dots, norms, out=np.zeros_like(dots), where=norms > 0)
    return float(similarities.max()) if len(similarities) else 0.0


def own_vector_scores(query: Sequence[float], candidates: Sequence[Record]) -> dict[int, float]:
    """Cosine scores against the vectors items stored from the store's own embedder."""
    vector = np.asarray(query, dtype=np.float32)
    scores: dict[int, float] = {}
    for record in candidates:
        rows = unpack_vectors(record.value)
        if rows is not None and record.id is not None:
            scores[record.id] = best_cosine(vector, rows)
    return scores


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
            width = indexer.embedder.dimensions
            signals["vector"] = {
                record_id: best_cosine(
                    np.asarray(vector, dtype=np.float32),
                    np.frombuffer(blob, dtype="<f4").reshape(-1, width),
                )
                for record_id, blob in stored.items()
            }
    signals = {name: signal for name, signal in signals.items() if signal}
    if not signals:
        return {}
    return {hit.id: hit.score for hit in fuse(signals, indexer.config)}
