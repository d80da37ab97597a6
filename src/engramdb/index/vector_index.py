"""``VectorIndex``: nearest neighbours by cosine similarity over unit vectors, in memory.

Small sets are searched exactly with one matrix-vector product; above ``ann_threshold``
vectors an HNSW graph (hnswlib) answers instead. A record may also have part vectors (one per
sentence): they are not searched, but kept to re-score candidates by their best vector. An
index with ``lazy_parts`` knows only the part vectors it was given (a large partition's are
read as its candidates need them): ``parts_unknown`` names the ids to fetch first. All of
it is derived data: built from the stored vectors, updated as writes land, and thrown away
without loss. ``load`` may start from a saved graph (``SavedGraph``, see ``graph_files``)
instead of building one: the saved graph is checked against the stored vectors and brought
in step with them, or not used.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from engramdb.index.blas import one_blas_thread
from engramdb.index.graph_files import SavedGraph, fingerprints

FloatArray = npt.NDArray[np.float32]
#: Part vectors are kept at half precision: they only re-score candidates, and there are
#: two to three times as many of them as records (the similarity moves by about 1e-3).
PartArray = npt.NDArray[np.float16]
#: A saved graph is patched only while what changed since it was saved is at most this share
#: of the stored vectors, and it holds no more deleted elements than live ones; past that, a
#: fresh build costs little more and gives a better graph.
MAX_PATCH_SHARE = 0.5
#: What a lazily loaded index keeps for a record known to have no part vectors.
_NO_PARTS: PartArray = np.zeros((0, 0), dtype=np.float16)


def best_of_blocks(rows: npt.ArrayLike, lengths: Sequence[int], query: FloatArray) -> FloatArray:
    """The best similarity to ``query`` of each block of consecutive ``rows`` (block ``i`` is
    ``lengths[i]`` rows long, at least one): one product over all rows, then each block's
    maximum."""
    matrix = np.asarray(rows, dtype=np.float32)
    starts = np.cumsum([0, *lengths[:-1]])
    with one_blas_thread():
        best: FloatArray = np.maximum.reduceat(matrix @ query, starts)
    return best


#: Rows of spare room a growing index takes at least (below an eighth of what it holds).
_MIN_ROOM = 64


class VectorIndex:
    """Unit vectors by integer id; ``search`` returns (id, cosine similarity), best first."""

    def __init__(self, dimensions: int, *, ann_threshold: int = 20_000) -> None:
        self.dimensions = dimensions
        self.ann_threshold = ann_threshold
        self._rows: dict[int, int] = {}
        # Rows are appended into spare room (an eighth more than held, when full), so adding
        # one vector does not copy every vector held, and the room costs little memory;
        # ``_ids``, ``_matrix`` and ``_alive`` are the filled part.
        self._size = 0
        self._set_rows(np.zeros(0, dtype=np.int64), np.zeros((0, dimensions), dtype=np.float32))
        self._parts: dict[int, PartArray] = {}
        #: Whether ids missing from ``_parts`` may have part vectors not read yet (otherwise
        #: a missing id has none).
        self.lazy_parts = False
        #: Counts ``upsert`` and ``remove`` calls: part vectors read while it moved may be
        #: older than the vectors held.
        self.changes = 0
        self._ann: Any = None
        #: Counts the graph's changes; ``saved_version`` is the count its saved copy holds
        #: (``None``: no saved copy holds this graph).
        self.graph_version = 0
        self.saved_version: int | None = None

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def _ids(self) -> npt.NDArray[np.int64]:
        return self._ids_room[: self._size]

    @property
    def _matrix(self) -> FloatArray:
        return self._matrix_room[: self._size]

    @property
    def _alive(self) -> npt.NDArray[np.bool_]:
        return self._alive_room[: self._size]

    def _set_rows(
        self,
        ids: npt.NDArray[np.int64],
        matrix: FloatArray,
        alive: npt.NDArray[np.bool_] | None = None,
        room: int = 0,
    ) -> None:
        """Hold ``ids`` and their rows of ``matrix`` (alive unless ``alive`` says), with room
        for ``room`` rows more before the arrays grow."""
        size = len(ids)
        self._ids_room = np.zeros(size + room, dtype=np.int64)
        self._matrix_room = np.zeros((size + room, self.dimensions), dtype=np.float32)
        self._alive_room = np.zeros(size + room, dtype=bool)
        self._ids_room[:size] = ids
        self._matrix_room[:size] = matrix
        self._alive_room[:size] = True if alive is None else alive
        self._size = size

    def _append(self, ids: npt.NDArray[np.int64], vectors: FloatArray) -> None:
        """Add rows after the filled part, growing the room when it is full."""
        start, end = self._size, self._size + len(ids)
        if end > len(self._ids_room):
            room = len(ids) + max(_MIN_ROOM, start // 8)
            self._set_rows(self._ids.copy(), self._matrix.copy(), self._alive.copy(), room)
        self._ids_room[start:end] = ids
        self._matrix_room[start:end] = vectors
        self._alive_room[start:end] = True
        self._size = end

    @property
    def uses_ann(self) -> bool:
        """Whether searches go through the HNSW graph."""
        return self._ann is not None

    @property
    def unsaved(self) -> bool:
        """Whether the graph holds changes its saved copy lacks."""
        return self._ann is not None and self.graph_version != self.saved_version

    def load(
        self, ids: Sequence[int], vectors: FloatArray, saved: SavedGraph | None = None
    ) -> bool:
        """Hold exactly the vectors ``ids`` gives (an empty index before), starting from
        ``saved`` when it is worth patching: every id it lacks, or holds with another vector,
        is added, every id it holds beyond ``ids`` is deleted. Returns whether ``saved`` was
        used (otherwise a graph, if needed, is built)."""
        self._hold(ids, vectors)
        if len(self._rows) <= self.ann_threshold:
            return False
        if saved is not None and self._adopt(saved):
            return True
        self._build_ann()
        return False

    def _hold(self, ids: Sequence[int], vectors: FloatArray) -> None:
        """Hold exactly ``ids``' vectors, searched exactly until a graph is set."""
        self._set_rows(
            np.asarray(ids, dtype=np.int64),
            np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimensions),
        )
        self._rows = {int(item): row for row, item in enumerate(self._ids)}

    def _adopt(self, saved: SavedGraph) -> bool:
        """Use ``saved``'s graph, brought in step with this index's vectors (the fingerprints
        say which ones it holds as they are); ``False`` if it differs too much."""
        ann = saved.ann
        if ann.dim != self.dimensions or len(saved.ids) != len(saved.fingerprints):
            return False
        order = np.argsort(saved.ids, kind="stable")
        known, known_prints = saved.ids[order], saved.fingerprints[order]
        where = np.minimum(np.searchsorted(known, self._ids), max(len(known) - 1, 0))
        held = (known[where] == self._ids) if len(known) else np.zeros(len(self._ids), bool)
        same = held & (known_prints[where] == fingerprints(self._matrix)).all(axis=1)
        stale = ~same
        gone = known[~np.isin(known, self._ids)]
        live = len(self._ids)
        tombstones = ann.get_current_count() - len(known) + len(gone)
        if int(stale.sum()) + len(gone) > MAX_PATCH_SHARE * live or tombstones > live:
            return False
        try:
            for item in gone:
                ann.mark_deleted(int(item))
            self._ann = ann
            if stale.any():
                self._ann_add(self._ids[stale], self._matrix[stale])
        except RuntimeError:
            # A label the manifest promised is missing: the files disagree; build instead.
            self._ann = None
            return False
        ann.set_num_threads(1)
        ann.set_ef(128)
        if saved.on_disk and not stale.any() and not len(gone):
            self.saved_version = self.graph_version
        return True

    def saved_graph(self) -> SavedGraph | None:
        """This index's graph and what it holds, for saving (``None`` without a graph)."""
        if self._ann is None:
            return None
        prints = fingerprints(self._matrix[self._alive])
        return SavedGraph(self._ids[self._alive], prints, self._ann, on_disk=not self.unsaved)

    def upsert(
        self, ids: Sequence[int], vectors: FloatArray, parts: Sequence[bytes | None] | None = None
    ) -> None:
        """Add or replace the vectors of ``ids``, with their part vectors if ``parts`` (float32
        bytes aligned with ``ids``, ``None`` for a record without any) gives them."""
        if not len(ids):
            return
        vectors = np.asarray(vectors, dtype=np.float32).reshape(len(ids), self.dimensions)
        self.remove(ids)
        self.changes += 1
        if parts is not None:
            self.set_parts(ids, parts)
        start = self._size
        self._append(np.asarray(ids, dtype=np.int64), vectors)
        for offset, item in enumerate(ids):
            self._rows[int(item)] = start + offset
        if self._ann is not None:
            self._ann_add(ids, vectors)
        elif len(self._rows) > self.ann_threshold:
            self._build_ann()

    def put(self, entries: Sequence[tuple[int, bytes | None, bytes | None]]) -> None:
        """Store each (id, vector, part vectors) given as float32 bytes; an id given without a
        vector leaves the index."""
        self.remove([item for item, vector, _ in entries if not vector])
        kept = [(item, vector, parts) for item, vector, parts in entries if vector]
        if kept:
            blob = b"".join(vector for _, vector, _ in kept if vector)
            self.upsert(
                [item for item, _, _ in kept],
                np.frombuffer(blob, dtype="<f4"),
                [parts for _, _, parts in kept],
            )

    def set_parts(self, ids: Sequence[int], parts: Sequence[bytes | None]) -> None:
        """Keep the part vectors of ``ids`` (float32 bytes; ``None`` or empty for none)."""
        for item, blob in zip(ids, parts, strict=True):
            if blob:
                rows = np.frombuffer(blob, dtype="<f4").reshape(-1, self.dimensions)
                self._parts[int(item)] = rows.astype(np.float16)
            elif self.lazy_parts:
                self._parts[int(item)] = _NO_PARTS
            else:
                self._parts.pop(int(item), None)

    def parts_unknown(self, ids: Sequence[int]) -> list[int]:
        """Those of ``ids`` this index holds whose part vectors it has not been given yet
        (always none unless ``lazy_parts``): ``set_parts`` them before ``best_similarities``."""
        if not self.lazy_parts:
            return []
        return [int(i) for i in ids if int(i) in self._rows and int(i) not in self._parts]

    def best_similarities(self, ids: Sequence[int], query: FloatArray) -> dict[int, float]:
        """For each of ``ids`` the index holds (with its part vectors known): the cosine
        similarity to ``query`` of its best vector, whole-text or part."""
        known = [
            int(item)
            for item in ids
            if int(item) in self._rows and (not self.lazy_parts or int(item) in self._parts)
        ]
        if not known:
            return {}
        query = np.asarray(query, dtype=np.float32).reshape(self.dimensions)
        rows = np.fromiter((self._rows[item] for item in known), dtype=np.int64, count=len(known))
        with_parts = [n for n, item in enumerate(known) if len(self._parts.get(item, ()))]
        with one_blas_thread():
            best = self._matrix[rows] @ query
        if with_parts:
            blocks = [self._parts[known[n]] for n in with_parts]
            part_best = best_of_blocks(np.concatenate(blocks), [len(b) for b in blocks], query)
            best[with_parts] = np.maximum(best[with_parts], part_best)
        return {item: float(score) for item, score in zip(known, best, strict=True)}

    def remove(self, ids: Collection[int]) -> None:
        """Forget the vectors of ``ids`` (unknown ids are ignored)."""
        self.changes += 1
        for item in ids:
            self._parts.pop(int(item), None)
            row = self._rows.pop(int(item), None)
            if row is None:
                continue
            self._alive[row] = False
            if self._ann is not None:
                self._ann.mark_deleted(int(item))
                self.graph_version += 1
        # ``_rows`` holds the live rows: no count over every row on each write.
        if self._size > 64 and len(self._rows) < self._size // 2:
            self._compact()

    def _compact(self) -> None:
        keep = self._alive
        self._set_rows(self._ids[keep], self._matrix[keep])
        self._rows = {int(item): row for row, item in enumerate(self._ids)}

    def _build_ann(self) -> None:
        import hnswlib

        self._compact()
        ann = hnswlib.Index(space="ip", dim=self.dimensions)
        ann.init_index(max_elements=max(1024, 2 * len(self._ids)), ef_construction=100, M=16)
        ann.set_num_threads(1)
        ann.add_items(self._matrix, self._ids)
        ann.set_ef(128)
        self._ann = ann
        self.graph_version += 1

    def _ann_add(self, ids: Sequence[int], vectors: FloatArray) -> None:
        needed = self._ann.get_current_count() + len(ids)
        if needed > self._ann.get_max_elements():
            self._ann.resize_index(2 * needed)
        # A re-added id replaces its old (deleted-marked) element.
        self._ann.add_items(vectors, np.asarray(ids, dtype=np.int64), replace_deleted=False)
        self.graph_version += 1

    def search(
        self, query: FloatArray, k: int, allowed: Collection[int] | None = None
    ) -> list[tuple[int, float]]:
        """The ``k`` ids most similar to ``query`` (optionally only among ``allowed``)."""
        if not self._rows or k <= 0:
            return []
        query = np.asarray(query, dtype=np.float32).reshape(self.dimensions)
        if self._ann is not None and (allowed is None or len(allowed) > 4 * k):
            return self._search_ann(query, k, allowed)
        return self._search_exact(query, k, allowed)

    def _search_exact(
        self, query: FloatArray, k: int, allowed: Collection[int] | None
    ) -> list[tuple[int, float]]:
        if allowed is not None:
            rows = np.asarray([self._rows[i] for i in allowed if i in self._rows], dtype=np.int64)
            if not len(rows):
                return []
            with one_blas_thread():
                sims = self._matrix[rows] @ query
        else:
            # Score every row in place (no copy of the matrix); dead rows drop out below.
            rows = np.arange(len(self._ids))
            with one_blas_thread():
                sims = self._matrix @ query
            sims[~self._alive] = -np.inf
        top = min(k, len(self._rows) if allowed is None else len(rows))
        best = np.argpartition(-sims, top - 1)[:top]
        order = sorted(best, key=lambda i: (-float(sims[i]), int(self._ids[rows[i]])))
        return [(int(self._ids[rows[i]]), float(sims[i])) for i in order if sims[i] > -np.inf]

    def _search_ann(
        self, query: FloatArray, k: int, allowed: Collection[int] | None
    ) -> list[tuple[int, float]]:
        top = min(k, len(self._rows) if allowed is None else len(allowed))
        if top <= 0:
            return []
        keep = None if allowed is None else set(allowed).__contains__
        self._ann.set_ef(max(128, 2 * top))
        labels, distances = self._ann.knn_query(query, k=top, filter=keep)
        # For the inner-product space hnswlib reports 1 - dot product.
        hits = [
            (int(i), 1.0 - float(d))
            for i, d in zip(labels[0], distances[0], strict=True)
            # A graph label this index does not hold (left in a saved graph) is never a hit.
            if int(i) in self._rows
        ]
        hits.sort(key=lambda hit: (-hit[1], hit[0]))
        return hits
