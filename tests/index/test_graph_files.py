"""Saved HNSW graphs: written atomically, loaded only when whole and meant for this partition,
and patched to the stored vectors (or rebuilt) by ``VectorIndex.load``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from engramdb.index.embedder import l2_normalize
from engramdb.index.graph_files import GraphFiles, SavedGraph, fingerprints
from engramdb.index.vector_index import VectorIndex

DIM = 32
IDENTITY: dict[str, Any] = {"namespace": "episodic", "scope": ["t", "u", "", "", ""]}


def unit(rows: int, seed: int = 0) -> np.ndarray:
    return l2_normalize(np.random.default_rng(seed).normal(size=(rows, DIM))).astype(np.float32)


def identity(model: str = "m", dimensions: int = DIM) -> dict[str, Any]:
    return {**IDENTITY, "model": model, "dimensions": dimensions}


def built(ids: list[int], vectors: np.ndarray) -> VectorIndex:
    index = VectorIndex(DIM, ann_threshold=50)
    index.load(ids, vectors)
    assert index.uses_ann
    return index


def save(files: GraphFiles, index: VectorIndex, who: dict[str, Any] | None = None) -> None:
    graph = index.saved_graph()
    assert graph is not None
    who = who or identity()
    files.publish(who, files.save_graph(who, graph.ann), graph.ids, graph.fingerprints)


def answers(index: VectorIndex, queries: np.ndarray) -> list[list[tuple[int, float]]]:
    return [index.search(q, 10) for q in queries]


def test_fingerprints_see_any_bit_and_only_the_bits() -> None:
    rows = unit(4)
    changed = rows.copy()
    changed[2, 5] = np.nextafter(changed[2, 5], np.float32(2))
    same = fingerprints(rows) == fingerprints(changed)
    assert same.all(axis=1).tolist() == [True, True, False, True]
    assert (fingerprints(rows.copy()) == fingerprints(rows)).all()
    odd = unit(3)[:, :31]
    assert fingerprints(odd).shape == (3, 2)


def test_a_saved_graph_reloads_to_the_same_answers(tmp_path: Path) -> None:
    vectors, queries = unit(400), unit(20, seed=9)
    ids = list(range(1, 401))
    fresh = built(ids, vectors)
    files = GraphFiles(tmp_path / "db.vectors")
    save(files, fresh)
    saved = files.load(identity(), DIM)
    assert saved is not None
    reopened = VectorIndex(DIM, ann_threshold=50)
    assert reopened.load(ids, vectors, saved)
    assert reopened.uses_ann
    assert not reopened.unsaved
    assert answers(reopened, queries) == answers(fresh, queries)
    # Exactly two files: the graph, named by its digest, and its manifest.
    assert sorted(p.suffix for p in files.folder.iterdir()) == [".hnsw", ".manifest"]


def test_writes_and_deletes_after_the_save_are_seen(tmp_path: Path) -> None:
    vectors = unit(500)
    files = GraphFiles(tmp_path / "db.vectors")
    save(files, built(list(range(400)), vectors[:400]))
    # Since the save: ids 400-449 written, 0-29 deleted, 30-39 written again with new vectors.
    now = vectors.copy()
    now[30:40] = unit(10, seed=5)
    ids = list(range(30, 450))
    saved = files.load(identity(), DIM)
    assert saved is not None
    index = VectorIndex(DIM, ann_threshold=50)
    assert index.load(ids, now[30:450], saved)
    assert index.unsaved
    exact = VectorIndex(DIM, ann_threshold=10_000)
    exact.load(ids, now[30:450])
    for row in (*range(30, 40), 420, 449, 100):
        top = index.search(now[row], 5)
        assert top[0][0] == row
        assert top[0][1] == pytest.approx(1.0, abs=1e-5)
        assert all(hit in ids for hit, _ in top)
    for row in range(30):
        assert row not in {hit for hit, _ in index.search(vectors[row], 20)}
    queries = unit(30, seed=11)
    overlap = [
        len({h for h, _ in index.search(q, 10)} & {h for h, _ in exact.search(q, 10)})
        for q in queries
    ]
    assert sum(overlap) / (10 * len(queries)) >= 0.9
    # Saved again, the patched graph loads as it is.
    save(files, index)
    again = VectorIndex(DIM, ann_threshold=50)
    assert again.load(ids, now[30:450], files.load(identity(), DIM))
    assert answers(again, queries) == answers(index, queries)


def test_a_graph_of_mostly_other_vectors_is_rebuilt(tmp_path: Path) -> None:
    files = GraphFiles(tmp_path / "db.vectors")
    save(files, built(list(range(300)), unit(300, seed=1)))
    saved = files.load(identity(), DIM)
    assert saved is not None
    # Another store's graph: same ids, other vectors.
    vectors = unit(300, seed=2)
    index = VectorIndex(DIM, ann_threshold=50)
    assert not index.load(list(range(300)), vectors, saved)
    assert index.uses_ann
    assert index.unsaved
    assert index.search(vectors[17], 1)[0][0] == 17


@pytest.mark.parametrize(
    "damage",
    ["garbage manifest", "truncated manifest", "garbage graph", "truncated graph", "no graph"],
)
def test_a_damaged_save_is_a_miss_not_a_crash(tmp_path: Path, damage: str) -> None:
    files = GraphFiles(tmp_path / "db.vectors")
    save(files, built(list(range(200)), unit(200)))
    manifest = files.manifest_path(identity())
    (graph,) = files.folder.glob("*.hnsw")
    if damage == "garbage manifest":
        manifest.write_bytes(os.urandom(5000))
    elif damage == "truncated manifest":
        manifest.write_bytes(manifest.read_bytes()[:-100])
    elif damage == "garbage graph":
        graph.write_bytes(os.urandom(graph.stat().st_size))
    elif damage == "truncated graph":
        graph.write_bytes(graph.read_bytes()[:1000])
    else:
        graph.unlink()
    assert files.load(identity(), DIM) is None


def test_a_graph_of_another_model_partition_or_dimension_is_not_used(tmp_path: Path) -> None:
    files = GraphFiles(tmp_path / "db.vectors")
    save(files, built(list(range(200)), unit(200)))
    assert files.load(identity(), DIM) is not None
    assert files.load(identity(model="other"), DIM) is None
    assert files.load({**identity(), "scope": ["t", "v", "", "", ""]}, DIM) is None
    # A manifest copied over another partition's name says whose it is.
    other = {**identity(), "namespace": "semantic"}
    files.manifest_path(identity()).replace(files.manifest_path(other))
    assert files.load(other, DIM) is None
    assert files.load(identity(dimensions=16), 16) is None


def test_a_save_that_crashed_before_its_rename_leaves_the_previous_graph(tmp_path: Path) -> None:
    vectors = unit(300)
    files = GraphFiles(tmp_path / "db.vectors")
    first = built(list(range(200)), vectors[:200])
    save(files, first)
    # The next save wrote its graph file, then the process died before the manifest.
    second = built(list(range(300)), vectors)
    graph = second.saved_graph()
    assert graph is not None
    files.save_graph(identity(), graph.ann)
    saved = files.load(identity(), DIM)
    assert saved is not None
    assert len(saved.ids) == 200
    index = VectorIndex(DIM, ann_threshold=50)
    assert index.load(list(range(300)), vectors, saved)
    assert index.search(vectors[250], 1)[0][0] == 250


def test_a_graph_label_missing_from_the_index_is_never_a_hit() -> None:
    vectors = unit(200)
    index = built(list(range(200)), vectors)
    graph = index.saved_graph()
    assert graph is not None
    # A manifest that lists fewer ids than the graph holds alive (never written by a save).
    short = SavedGraph(graph.ids[:150], graph.fingerprints[:150], graph.ann)
    reloaded = VectorIndex(DIM, ann_threshold=50)
    assert reloaded.load(list(range(150)), vectors[:150], short)
    assert all(hit < 150 for hit, _ in reloaded.search(vectors[180], 20))
