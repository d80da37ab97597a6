"""Clustering: the facts no category holds (those memorized directly, not formed by
``ingest``), grouped by meaning into named ``Cluster``s.

``group`` is deterministic: items are taken in key order, each joins the cluster whose
centroid is most similar to it (cosine) when that similarity reaches ``threshold``, else it
starts a cluster; a tie goes to the older cluster. A cluster is named by its most distinctive
words (frequent in it, rare in the others), or, when a chat model is configured, by the model
(``ClusterNames``); a model that fails leaves the word names and a note.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, Field

from engramdb.core.errors import LLMError, ValidationError
from engramdb.index.embedder import Embedder, FloatArray, l2_normalize
from engramdb.index.query_terms import STOPWORDS
from engramdb.orchestrator.plugin import record_item

if TYPE_CHECKING:
    from engramdb.llm.client import ChatClient
    from engramdb.orchestrator.semantic import SemanticMemory

#: How similar (cosine) an item must be to a cluster's centroid to join it.
DEFAULT_THRESHOLD = 0.3
_WORD = re.compile(r"[a-z][a-z'-]{2,}")
# Words every fact about the user shares: they name nothing.
_COMMON = STOPWORDS | {"user", "user's", "users", "they", "their", "them"}


@dataclass(frozen=True)
class Cluster:
    """A group of similar facts: its name, and its members' keys and texts, in key order."""

    name: str
    keys: tuple[str, ...]
    texts: tuple[str, ...]


@dataclass
class Clustering:
    """The clusters of a scope's uncategorised facts, biggest first, and how they were named
    (``names``: ``words`` or ``llm``); ``notes`` say why a model did not name them."""

    clusters: list[Cluster]
    names: str = "words"
    notes: list[str] = field(default_factory=list)


class ClusterNames(BaseModel):
    """What a chat model is asked for: one short name per cluster, in the order shown."""

    names: list[str] = Field(description="one name of 1 to 4 words per cluster, in order")


def group(vectors: FloatArray, threshold: float = DEFAULT_THRESHOLD) -> list[list[int]]:
    """The indices of ``vectors`` grouped by similarity (see the module docstring).

    Raises:
        ValidationError: ``threshold`` is not between -1 and 1.
    """
    if not -1.0 <= threshold <= 1.0:
        raise ValidationError("threshold must be between -1 and 1", threshold=threshold)
    unit = l2_normalize(np.asarray(vectors, dtype=np.float32))
    groups: list[list[int]] = []
    sums: list[FloatArray] = []
    for i, vector in enumerate(unit):
        if sums:
            centroids = l2_normalize(np.stack(sums))
            scores = centroids @ vector
            best = int(np.argmax(scores))  # the first of equals: the older cluster
            if scores[best] >= threshold:
                groups[best].append(i)
                sums[best] = sums[best] + vector
                continue
        groups.append([i])
        sums.append(vector.copy())
    return groups


def word_names(groups: Sequence[Sequence[str]], words: int = 3) -> list[str]:
    """A name per group of texts: its ``words`` most distinctive words (the share of its
    texts holding the word, less the share of the other texts holding it; ties
    alphabetically)."""
    held = [[set(_WORD.findall(t.lower())) - _COMMON for t in texts] for texts in groups]
    everywhere = Counter(w for texts in held for bag in texts for w in bag)
    total = sum(len(texts) for texts in held)
    names = []
    for texts in held:
        inside = Counter(w for bag in texts for w in bag)
        others = max(total - len(texts), 1)
        score = {w: n / len(texts) - (everywhere[w] - n) / others for w, n in inside.items()}
        ranked = sorted(score, key=lambda w: (-score[w], w))
        names.append(" ".join(ranked[:words]) or "misc")
    return names


async def llm_names(client: ChatClient, groups: Sequence[Sequence[str]]) -> list[str]:
    """A name per group of texts, from the chat model.

    Raises:
        LLMError: the model failed, or gave a different number of names.
    """
    shown = "\n\n".join(
        f"Cluster {n + 1}:\n" + "\n".join(f"- {t}" for t in texts[:8])
        for n, texts in enumerate(groups)
    )
    answer = await client.complete_json(
        [
            {
                "role": "system",
                "content": "Name each cluster of facts about a user with a short topic of 1 to "
                "4 words, as JSON: one name per cluster, in the order given.",
            },
            {"role": "user", "content": shown},
        ],
        schema=ClusterNames,
    )
    names = [" ".join(n.split()) for n in answer.names]
    if len(names) != len(groups) or not all(names):
        raise LLMError(f"the chat model named {len(names)} of {len(groups)} clusters")
    return names


async def cluster_facts(
    semantic: SemanticMemory,
    embedder: Embedder | None,
    *,
    threshold: float = DEFAULT_THRESHOLD,
    llm: ChatClient | None = None,
) -> Clustering:
    """The clusters of ``semantic``'s facts that hold no category (see the module docstring).

    Raises:
        ValidationError: no embedder is configured (there is nothing to compare meaning by),
            or ``threshold`` is out of range.
    """
    if embedder is None:
        raise ValidationError("clustering compares embeddings: configure an embedder")
    facts = []
    for record in await semantic.records():
        item = record_item(record)
        if not item.metadata.get("category") and item.text.strip():
            facts.append((record.key, item.text))
    facts.sort()
    if not facts:
        return Clustering([])
    vectors = await embedder.embed([text for _, text in facts])
    groups = sorted(group(vectors, threshold), key=lambda g: (-len(g), g[0]))
    texts = [[facts[i][1] for i in members] for members in groups]
    result = Clustering([])
    names = word_names(texts)
    if llm is not None:
        try:
            names = await llm_names(llm, texts)
            result.names = "llm"
        except LLMError as exc:
            result.notes.append(
                f"the chat model did not name the clusters ({type(exc).__name__}: "
                f"{exc.message}); they are named by their words"
            )
    result.clusters = [
        Cluster(name, tuple(facts[i][0] for i in members), tuple(t))
        for name, members, t in zip(names, groups, texts, strict=True)
    ]
    return result
