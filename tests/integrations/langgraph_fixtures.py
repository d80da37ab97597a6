"""What the LangGraph store tests share: a deterministic character-count embedding (a stand-in
for a real embedding function: similar spellings are similar vectors) and store factories."""

from __future__ import annotations

import math

from langchain_core.embeddings import Embeddings

from engramdb.engine import Engine
from engramdb.integrations.langgraph import EngramStore


class CharacterEmbeddings(Embeddings):
    """Each text as the normalised counts of its characters, folded into ``dims`` slots."""

    def __init__(self, dims: int = 500) -> None:
        self.dims = dims

    def _embed(self, text: str) -> list[float]:
        counts = [0.0] * self.dims
        for char in text.lower():
            counts[ord(char) % self.dims] += 1.0
        norm = math.sqrt(sum(c * c for c in counts)) or 1.0
        return [c / norm for c in counts]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


def character_store(engine: Engine, dims: int = 500) -> EngramStore:
    """A store of tenant acme, user alice, embedding whole values with ``CharacterEmbeddings``."""
    return EngramStore(
        engine,
        tenant="acme",
        user="alice",
        index={"dims": dims, "embed": CharacterEmbeddings(dims)},
    )
