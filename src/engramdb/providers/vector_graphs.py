"""``VectorGraphs``: where the indexed tier keeps the HNSW graphs of its partitions between
runs, for a backend whose database is a local file (``LocalVectorFiles``).

A partition's graph is saved after it is built and when the engine closes, if it changed;
on the next first search it is loaded and checked against the stored vectors
(``VectorIndex.load``). Saving reads the graph on the event loop's thread, where every change
to it happens; digesting and writing the files runs on a worker thread. A graph that cannot
be saved or loaded is only built again: the stored vectors are the truth.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from engramdb.core.scope import Scope
from engramdb.index.graph_files import GraphFiles, SavedGraph
from engramdb.index.vector_index import VectorIndex
from engramdb.storage.backend import Backend
from engramdb.storage.search_backend import LocalVectorFiles

_log = logging.getLogger(__name__)


class VectorGraphs:
    """The saved HNSW graphs of one database (``files``), by partition and model."""

    def __init__(self, files: GraphFiles) -> None:
        self.files = files

    @classmethod
    def beside(cls, backend: Backend) -> VectorGraphs | None:
        """The saved graphs of ``backend``'s database, if it is a local file."""
        search = backend.search
        folder = search.vector_graph_folder() if isinstance(search, LocalVectorFiles) else None
        return None if folder is None else cls(GraphFiles(folder))

    @staticmethod
    def identity(namespace: str, partition: Scope, model: str, dimensions: int) -> dict[str, Any]:
        """What a saved graph must have been built for to be used."""
        return {
            "namespace": namespace,
            "scope": list(partition.columns()),
            "model": model,
            "dimensions": dimensions,
        }

    async def load(self, identity: dict[str, Any]) -> SavedGraph | None:
        """The saved graph of ``identity``, read and verified on a worker thread."""
        return await asyncio.to_thread(self.files.load, identity, int(identity["dimensions"]))

    async def save(self, identity: dict[str, Any], index: VectorIndex) -> None:
        """Save ``index``'s graph if it changed since it was loaded or saved (a failure is
        logged: the graph is built again next time)."""
        if not index.unsaved:
            return
        graph = index.saved_graph()
        if graph is None:
            return
        version = index.graph_version
        try:
            temp = self.files.save_graph(identity, graph.ann)
            await asyncio.to_thread(
                self.files.publish, identity, temp, graph.ids, graph.fingerprints
            )
        except OSError as exc:
            _log.warning("vector graph not saved (it is built again when needed): %s", exc)
            return
        index.saved_version = version
