"""Graph memory: entities, time-aware relations and traversals (rfc-2001 §10), stored in the
engine's backend and walked in memory with NetworkX.

Names are imported on first use (PEP 562): the REST client needs only ``types`` (plain
models), and must not load the provider, its index and NetworkX to get them."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engramdb.providers.graph.extract import Extraction, LLMExtractor, RuleExtractor
    from engramdb.providers.graph.provider import GraphIngest, GraphMemoryProvider
    from engramdb.providers.graph.store import (
        GRAPH_LEVELS,
        GRAPH_NAMESPACES,
        GRAPH_SPEC,
        rebuild_graph,
    )
    from engramdb.providers.graph.types import (
        EXCLUSIVE_RELATIONS,
        EntityType,
        GraphEntity,
        GraphPath,
        GraphRelation,
        GraphTraversal,
        RelationType,
        TraversalPattern,
    )
    from engramdb.providers.graph.working import GraphCache

#: Where each name lives, as a module of this package.
_LAZY: dict[str, str] = {
    "Extraction": "extract",
    "LLMExtractor": "extract",
    "RuleExtractor": "extract",
    "GraphIngest": "provider",
    "GraphMemoryProvider": "provider",
    "GRAPH_LEVELS": "store",
    "GRAPH_NAMESPACES": "store",
    "GRAPH_SPEC": "store",
    "rebuild_graph": "store",
    "EXCLUSIVE_RELATIONS": "types",
    "EntityType": "types",
    "GraphEntity": "types",
    "GraphPath": "types",
    "GraphRelation": "types",
    "GraphTraversal": "types",
    "RelationType": "types",
    "TraversalPattern": "types",
    "GraphCache": "working",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "EXCLUSIVE_RELATIONS",
    "GRAPH_LEVELS",
    "GRAPH_NAMESPACES",
    "GRAPH_SPEC",
    "EntityType",
    "Extraction",
    "GraphCache",
    "GraphEntity",
    "GraphIngest",
    "GraphMemoryProvider",
    "GraphPath",
    "GraphRelation",
    "GraphTraversal",
    "LLMExtractor",
    "RelationType",
    "RuleExtractor",
    "TraversalPattern",
    "rebuild_graph",
]
