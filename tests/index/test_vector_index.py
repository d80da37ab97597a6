"""The in-memory vector index: exact search, updates, and the ANN path agreeing with it."""

from __future__ import annotations

import numpy as np
import pytest

from engramdb.index.embedder import l2_normalize
from engramdb.index.vector_index import VectorIndex


def unit(rows: int, dim: int = 16, seed: int = 0) -> np.ndarray:
    return l2_normalize(np.random.default_rng(seed).normal(size=(rows, dim)))


def test_exact_search_finds_the_nearest_and_respects_allowed() -> None:
    vectors = unit(50)
    index = VectorIndex(16)
    index.upsert(list(range(100, 150)), vectors)
    hits = index.search(vectors[7], 3)
    assert hits[0][0] == 107
    assert hits[0][1] == np.float32(1.0) or abs(hits[0][1] - 1.0) < 1e-5
    assert [h[1] for h in hits] == sorted((h[1] for h in hits), reverse=True)
    allowed = index.search(vectors[7], 3, allowed={120, 121, 999})
    assert {h[0] for h in allowed} == {120, 121}
    assert index.search(vectors[0], 0) == []


def test_upsert_replaces_and_remove_forgets() -> None:
    vectors = unit(10)
    index = VectorIndex(16)
    index.upsert(list(range(10)), vectors)
    index.upsert([3], vectors[8:9])
    assert len(index) == 10
    assert {h[0] for h in index.search(vectors[8], 2)} == {3, 8}
    index.remove([3, 8, 42])
    assert len(index) == 8
    assert {h[0] for h in index.search(vectors[8], 10)} == set(range(10)) - {3, 8}


def test_compaction_keeps_answers() -> None:
    vectors = unit(200)
    index = VectorIndex(16)
    index.upsert(list(range(200)), vectors)
    index.remove(list(range(150)))
    assert len(index) == 50
    assert index.search(vectors[170], 1)[0][0] == 170


def test_one_at_a_time_writes_answer_as_one_load_of_the_same_vectors() -> None:
    # Writes one by one (rows appended into spare room, grown as needed), replacements,
    # deletions and the compactions they bring: the same answers as the final vectors loaded
    # at once.
    vectors = unit(300, seed=3)
    index = VectorIndex(16)
    index.load(list(range(20)), vectors[:20])
    for n in range(20, 300):
        index.upsert([n], vectors[n : n + 1])
        if n % 7 == 0:
            index.upsert([n - 5], vectors[n : n + 1] * -1)
        if n % 11 == 0:
            index.remove([n - 3])
    final = {n: vectors[n] for n in range(300)}
    for n in range(20, 300):
        if n % 7 == 0:
            final[n - 5] = -vectors[n]
        if n % 11 == 0:
            final.pop(n - 3, None)
    fresh = VectorIndex(16)
    fresh.load(list(final), np.stack(list(final.values())))
    assert len(index) == len(fresh) == len(final)
    for probe in unit(20, seed=4):
        hits, expected = index.search(probe, 15), fresh.search(probe, 15)
        assert [item for item, _ in hits] == [item for item, _ in expected]
        # The same sums, over rows laid out differently: equal to float32 precision.
        assert [score for _, score in hits] == pytest.approx([s for _, s in expected], abs=1e-6)


def test_best_similarities_take_the_best_of_whole_and_part_vectors() -> None:
    vectors = unit(9)
    index = VectorIndex(16)
    # Record 1 has parts 3-5, record 2 parts 6-8, record 0 none.
    parts = [None, vectors[3:6].tobytes(), vectors[6:9].tobytes()]
    index.upsert([0, 1, 2], vectors[:3], parts)
    query = vectors[7]
    best = index.best_similarities([2, 1, 0, 99], query)
    assert set(best) == {0, 1, 2}
    assert best[2] == pytest.approx(1.0, abs=1e-3)  # its part 7 is the query itself
    assert best[1] == pytest.approx(float((vectors[[1, 3, 4, 5]] @ query).max()), abs=1e-3)
    assert best[0] == pytest.approx(float(vectors[0] @ query), abs=1e-6)
    # Replaced without parts, or removed: the parts go with the record.
    index.upsert([2], vectors[2:3])
    assert index.best_similarities([2], query)[2] == pytest.approx(float(vectors[2] @ query))
    index.remove([1])
    assert index.best_similarities([1], query) == {}


def test_ann_path_agrees_with_exact_search() -> None:
    vectors = unit(600, dim=32, seed=1)
    ids = list(range(600))
    exact = VectorIndex(32, ann_threshold=10_000)
    ann = VectorIndex(32, ann_threshold=100)
    exact.upsert(ids, vectors)
    ann.upsert(ids[:300], vectors[:300])
    ann.upsert(ids[300:], vectors[300:])
    assert ann.uses_ann
    assert not exact.uses_ann
    queries = unit(20, dim=32, seed=2)
    overlap = [
        len({h[0] for h in exact.search(q, 10)} & {h[0] for h in ann.search(q, 10)}) / 10
        for q in queries
    ]
    assert sum(overlap) / len(overlap) >= 0.9
    ann.remove([ann.search(queries[0], 1)[0][0]])
    assert len(ann.search(queries[0], 10)) == 10
    filtered = ann.search(queries[0], 5, allowed=set(range(0, 600, 2)))
    assert all(h[0] % 2 == 0 for h in filtered)


def test_a_lazy_index_scores_only_records_whose_parts_it_was_given() -> None:
    vectors = unit(9)
    parts = [None, vectors[3:6].tobytes(), vectors[6:9].tobytes()]
    eager, lazy = VectorIndex(16), VectorIndex(16)
    eager.upsert([0, 1, 2], vectors[:3], parts)
    lazy.lazy_parts = True
    lazy.upsert([0, 1, 2], vectors[:3])
    query = vectors[7]
    assert lazy.parts_unknown([2, 1, 0, 99]) == [2, 1, 0]
    assert lazy.best_similarities([0, 1, 2], query) == {}
    lazy.set_parts([2, 0], [parts[2], None])  # record 0 is known to have none
    assert lazy.parts_unknown([0, 1, 2]) == [1]
    assert lazy.best_similarities([0, 1, 2], query) == eager.best_similarities([0, 2], query)
    lazy.set_parts([1], [parts[1]])
    assert lazy.best_similarities([0, 1, 2], query) == eager.best_similarities([0, 1, 2], query)
    # A record written again loses what was known of its parts; an eager index never asks.
    changes = lazy.changes
    lazy.upsert([1], vectors[1:2])
    assert lazy.changes > changes
    assert lazy.parts_unknown([1]) == [1]
    assert eager.parts_unknown([0, 1, 2]) == []
