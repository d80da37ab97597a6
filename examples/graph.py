"""Graph memory: entities and the relations between them, walked in memory, remembered with
when each fact held.

    python examples/graph.py [DATABASE]      (default: a file in a temporary folder)

The script builds a small graph by hand and from a sentence, walks it (neighbours, BFS, the
shortest path with the relations taken), then moves Alice to another employer: the old
``works_for`` ends instead of being deleted, so the graph still answers for the past.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import engramdb
from engramdb import GraphEntity, GraphTraversal, TraversalPattern


async def run(db: str) -> None:
    """Build, walk and change a graph in the memory at ``db``."""
    async with engramdb.open(db) as engram:
        graph = engram.scope(tenant="acme", user="alice").graph
        alice = await graph.add_entity(GraphEntity(name="Alice", entity_type="person"))
        bob = await graph.add_entity(GraphEntity(name="Bob", entity_type="person"))
        acme = await graph.add_entity(GraphEntity(name="Acme", entity_type="organization"))
        await graph.add_relation(alice.key, bob.key, "knows")
        await graph.add_relation(bob.key, acme.key, "works_for")
        hired = datetime(2024, 3, 1, tzinfo=UTC)
        await graph.add_relation(alice.key, acme.key, "works_for", valid_at=hired)

        # Rules (or the LLM, when one is configured) turn a sentence into entities and relations.
        said = await graph.ingest("I live in Lisbon", source="episodic:turn-7", speaker="Alice")
        print("from the sentence:", [(r.relation_type, r.properties) for r in said.relations])

        neighbours = await graph.traverse(
            GraphTraversal(start_entity_id=alice.key, pattern=TraversalPattern.NEIGHBORS)
        )
        print("Alice's neighbours:", sorted(e.name for e in neighbours))
        reached = await graph.traverse(GraphTraversal(start_entity_id=alice.key, max_depth=2))
        print("within two hops:", [e.name for e in reached])
        path = await graph.paths(
            GraphTraversal(
                start_entity_id=bob.key,
                target_entity_id=alice.key,
                pattern=TraversalPattern.SHORTEST_PATH,
                direction="both",
            )
        )
        steps = [r.relation_type for r in path[0].relations]
        print("Bob to Alice:", [e.name for e in path[0].entities], "by", steps)

        # A new employer ends the old works_for (memory.invalidated); it is kept as history.
        globex = await graph.add_entity(GraphEntity(name="Globex", entity_type="organization"))
        await graph.add_relation(alice.key, globex.key, "works_for")
        names = {alice.key: "Alice", bob.key: "Bob", acme.key: "Acme", globex.key: "Globex"}
        for moment, label in ((None, "now"), (datetime(2025, 1, 1, tzinfo=UTC), "in 2025")):
            held = await graph.get_relations(alice.key, relation_type="works_for", as_of=moment)
            print(f"Alice works for, {label}:", [names[r.target_id] for r in held])


def main() -> None:
    """Run on the database named on the command line, or on a temporary one."""
    if len(sys.argv) > 1:
        asyncio.run(run(sys.argv[1]))
        return
    with tempfile.TemporaryDirectory() as folder:
        asyncio.run(run(str(Path(folder) / "graph.db")))


if __name__ == "__main__":
    main()
