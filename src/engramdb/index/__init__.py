"""The index layer: embedders now; full-text and vector search and fusion to follow.

Everything here is pure and rebuildable from the event log (the indexed tier is never the
source of truth), and imports only ``engramdb.core``.

Core types: ``Embedder`` (the protocol every embedder meets), ``CachedEmbedder`` (a bounded LRU
in front of any embedder), ``BatchingEmbedder`` (concurrent calls' texts in one model call),
``MiniLMEmbedder`` (the local default, all-MiniLM-L6-v2 int8 ONNX,
384 dimensions) and ``OpenAIEmbedder`` (any OpenAI-compatible ``/embeddings`` endpoint).
"""

from __future__ import annotations

from engramdb.index.batching import BatchingEmbedder
from engramdb.index.embedder import CachedEmbedder, CacheInfo, Embedder, FloatArray, l2_normalize
from engramdb.index.minilm import MiniLMEmbedder
from engramdb.index.openai_embedder import OpenAIEmbedder

__all__ = [
    "BatchingEmbedder",
    "CacheInfo",
    "CachedEmbedder",
    "Embedder",
    "FloatArray",
    "MiniLMEmbedder",
    "OpenAIEmbedder",
    "l2_normalize",
]
