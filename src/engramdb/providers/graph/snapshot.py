"""JSON snapshots of a working graph: an export for people and other tools (NetworkX
node-link form), written atomically. The stored records and the log stay the truth."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from engramdb.providers.graph.working import WorkingGraph


def snapshot(graph: WorkingGraph) -> dict[str, Any]:
    """The graph as node-link data: every entity and relation, ended ones included."""
    g = graph.graph
    return {
        "directed": True,
        "multigraph": True,
        "nodes": [
            {"id": node, **entity.model_dump(mode="json")}
            for node in sorted(g.nodes)
            if (entity := graph.entity(node)) is not None
        ],
        "links": sorted(
            (
                {
                    "source": u,
                    "target": v,
                    "key": key,
                    **data["relation"].model_dump(mode="json"),
                }
                for u, v, key, data in g.edges(keys=True, data=True)
            ),
            key=lambda link: str(link["key"]),
        ),
    }


def write_snapshot(graph: WorkingGraph, path: Path) -> Path:
    """Write ``graph`` to ``path`` as JSON via a temporary file in the same directory and a
    rename, so ``path`` always holds a whole snapshot."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(snapshot(graph), out, ensure_ascii=False, indent=1)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
