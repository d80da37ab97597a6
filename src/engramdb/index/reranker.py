"""The ``Reranker`` contract: a model that judges how well each of a few documents answers a
query, read more closely than the embedding model's one vector per text can.

Hybrid search finds the candidates; an optional reranker re-orders the best of them
(``SearchConfig.rerank_candidates``, blended by ``rerank_weight``). A cross-encoder reads the
query and each document together, which tells apart turns of one conversation on the same
topic better than cosine similarity does. ``HttpReranker`` (``index/http_reranker.py``) speaks
the common ``/rerank`` protocol; nothing runs one by default.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable


@runtime_checkable
class Reranker(Protocol):
    """Scores documents against a query."""

    @property
    def model_id(self) -> str:
        """Names the model, for score breakdowns and reports."""
        ...

    async def rerank(self, query: str, documents: Sequence[str]) -> list[float]:
        """One relevance per document, in input order, in [0, 1] (higher is better).

        Raises:
            RerankError: the model or its endpoint failed.
        """
        ...
