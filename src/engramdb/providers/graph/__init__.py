"""Graph memory: entities, time-aware relations and traversals (rfc-2001 §10), stored in the
engine's backend and walked in memory with NetworkX."""

from engramdb.providers.graph.extract import Extraction, LLMExtractor, RuleExtractor
from engramdb.providers.graph.provider import GraphIngest, GraphMemoryProvider
from engramdb.providers.graph.store import GRAPH_LEVELS, GRAPH_NAMESPACES, GRAPH_SPEC, rebuild_graph
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
