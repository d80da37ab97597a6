"""Memory formation: conversation turns become profile facts, dated events, activities and a
graph, each naming the turns it came from.

``ingest`` stores the turns as episodes, asks an ``Extractor`` (``RuleExtractor`` by default,
deterministic) what they state, and consolidates each ``ExtractedItem`` into semantic memory
(add / update with history / no-op / end of validity / contradiction) and graph memory.
"""
