"""``WorkingGraph``: the in-memory graph of one partition, loaded from the backend, and
``GraphCache``, which holds one per partition for an engine.

The stored records are the truth; the working graph is a NetworkX ``MultiDiGraph`` (a
``DiGraph`` that keeps several relations between the same two entities, each under its
relation id) plus a name index for entity resolution. It changes only after a commit
succeeded, so a failed write leaves it as it was. A commit by another process is noticed
within ``STALE_AFTER_S`` and the graph reloads.
"""

from __future__ import annotations

import asyncio
import gc
import time
import unicodedata
from collections.abc import Iterator
from typing import TYPE_CHECKING

from engramdb.core.scope import Scope
from engramdb.providers.graph.store import (
    ENTITY_NAMESPACE,
    RELATION_NAMESPACE,
    entity_from_record,
    relation_from_record,
)
from engramdb.providers.graph.types import GraphEntity, GraphRelation
from engramdb.storage.backend import Backend
from engramdb.storage.records import Record, RecordQuery

if TYPE_CHECKING:
    import networkx as nx

STALE_AFTER_S = 0.1


def normalize_name(name: str) -> str:
    """The form names are compared in: Unicode-normalised, case-folded, punctuation dropped,
    whitespace collapsed ("Acme, Inc." and "acme inc" match)."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    kept = "".join(c if c.isalnum() else " " for c in folded)
    return " ".join(kept.split())


class WorkingGraph:
    """One partition's entities and relations in memory."""

    def __init__(self) -> None:
        # Imported here: NetworkX takes a while to import, and only graph work needs it.
        import networkx

        self.graph: nx.MultiDiGraph[str] = networkx.MultiDiGraph()
        self.record_ids: dict[str, int] = {}
        # entity id -> the version of its stored record
        self.versions: dict[str, int] = {}
        # (type, normalised name) -> the ids known by it
        self._names: dict[tuple[str, str], list[str]] = {}
        self._ends: dict[str, tuple[str, str]] = {}
        self.lock = asyncio.Lock()

    def __len__(self) -> int:
        return int(self.graph.number_of_nodes())

    def entity(self, entity_id: str) -> GraphEntity | None:
        """The entity ``entity_id``, if the graph holds it."""
        data = self.graph.nodes.get(entity_id)
        return None if data is None else data.get("entity")

    def relation(self, relation_id: str) -> GraphRelation | None:
        """The relation ``relation_id``, if the graph holds it."""
        ends = self._ends.get(relation_id)
        if ends is None:
            return None
        return self.graph.edges[ends[0], ends[1], relation_id]["relation"]  # type: ignore[no-any-return]

    def find_by_name(self, entity_type: str, name: str) -> GraphEntity | None:
        """The entity of ``entity_type`` known by ``name`` (or one of its aliases)."""
        found = self._names.get((entity_type, normalize_name(name)))
        # The lowest id when several share a name: the same answer before and after a reload.
        return None if not found else self.entity(min(found))

    def put_entity(
        self, entity: GraphEntity, record_id: int | None = None, version: int | None = None
    ) -> None:
        """Add or replace an entity node (its relations stay), with its stored record's id and
        version when known."""
        previous = self.entity(entity.entity_id)
        if previous is not None:
            self._unindex(previous)
        self.graph.add_node(entity.entity_id, entity=entity)
        if record_id is not None:
            self.record_ids[entity.entity_id] = record_id
        if version is not None:
            self.versions[entity.entity_id] = version
        for name in (entity.name, *entity.aliases):
            ids = self._names.setdefault((entity.entity_type, normalize_name(name)), [])
            if entity.entity_id not in ids:
                ids.append(entity.entity_id)

    def _unindex(self, entity: GraphEntity) -> None:
        for name in (entity.name, *entity.aliases):
            slot = (entity.entity_type, normalize_name(name))
            ids = self._names.get(slot, [])
            if entity.entity_id in ids:
                ids.remove(entity.entity_id)
            if not ids:
                self._names.pop(slot, None)

    def remove_entity(self, entity_id: str) -> None:
        """Remove an entity and every relation touching it."""
        entity = self.entity(entity_id)
        if entity is None:
            return
        for relation in list(self.relations_of(entity_id, "both")):
            self._ends.pop(relation.relation_id, None)
        self._unindex(entity)
        self.graph.remove_node(entity_id)
        self.record_ids.pop(entity_id, None)
        self.versions.pop(entity_id, None)

    def put_relation(self, relation: GraphRelation) -> None:
        """Add or replace a relation (its ends may have changed)."""
        self.remove_relation(relation.relation_id)
        self.graph.add_edge(
            relation.source_id, relation.target_id, key=relation.relation_id, relation=relation
        )
        self._ends[relation.relation_id] = (relation.source_id, relation.target_id)

    def remove_relation(self, relation_id: str) -> None:
        """Remove a relation, if present."""
        ends = self._ends.pop(relation_id, None)
        if ends is not None:
            self.graph.remove_edge(ends[0], ends[1], key=relation_id)

    def relations_of(self, entity_id: str, direction: str) -> Iterator[GraphRelation]:
        """Every relation leaving (``outgoing``), entering (``incoming``) or touching
        (``both``) ``entity_id``, whatever its time."""
        if entity_id not in self.graph:
            return
        if direction in ("outgoing", "both"):
            for _, _, data in self.graph.out_edges(entity_id, data=True):
                yield data["relation"]
        if direction in ("incoming", "both"):
            for source, _, data in self.graph.in_edges(entity_id, data=True):
                if direction == "both" and source == entity_id:
                    continue  # a self-loop was already listed as outgoing
                yield data["relation"]

    def between(self, source_id: str, target_id: str) -> list[GraphRelation]:
        """The relations from ``source_id`` to ``target_id``."""
        found = self.graph.succ.get(source_id, {}).get(target_id, {})
        return [data["relation"] for data in found.values()]

    @classmethod
    async def load(cls, backend: Backend, partition: Scope) -> WorkingGraph:
        """The working graph of ``partition`` as stored.

        The cyclic garbage collector is paused meanwhile: a large graph is millions of new
        objects, none of them garbage, and each collection would walk them all again (it
        halves the load time of a graph of 600,000 records).
        """
        collecting = gc.isenabled()
        gc.disable()
        try:
            loaded = cls()
            entities = await backend.scan(
                RecordQuery(ENTITY_NAMESPACE, partition, content_types=("entity",))
            )
            for record in _consumed(entities):
                loaded.put_entity(entity_from_record(record), record.id, record.version)
            relations = await backend.scan(RecordQuery(RELATION_NAMESPACE, partition))
            for record in _consumed(relations):
                relation = relation_from_record(record)
                # Never a node without its entity: a relation whose end is missing is left out.
                if relation.source_id in loaded.graph and relation.target_id in loaded.graph:
                    loaded.put_relation(relation)
            return loaded
        finally:
            if collecting:
                gc.enable()


def _consumed(records: list[Record]) -> Iterator[Record]:
    """``records`` in order, each let go of as it is handed out: the memory of the records
    read is reused for the graph built from them instead of both being held at once."""
    records.reverse()
    while records:
        yield records.pop()


class GraphCache:
    """The working graphs of one engine, one per partition, loaded on first use."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self._graphs: dict[Scope, WorkingGraph] = {}
        self._loading: dict[Scope, asyncio.Lock] = {}
        self._version: int | None = None
        self._checked = -STALE_AFTER_S

    async def get(self, partition: Scope) -> WorkingGraph:
        """The working graph of ``partition`` (reloaded if another process committed)."""
        now = time.monotonic()
        if now - self._checked >= STALE_AFTER_S:
            self._checked = now
            version = await self.backend.search.data_version()
            if version != self._version:
                self._graphs.clear()
                self._version = version
        found = self._graphs.get(partition)
        if found is not None:
            return found
        lock = self._loading.setdefault(partition, asyncio.Lock())
        async with lock:
            found = self._graphs.get(partition)
            if found is None:
                found = await WorkingGraph.load(self.backend, partition)
                self._graphs[partition] = found
            return found

    def drop(self, partition: Scope | None = None) -> None:
        """Forget one partition's working graph (or all); it reloads on next use."""
        if partition is None:
            self._graphs.clear()
        else:
            self._graphs.pop(partition, None)
