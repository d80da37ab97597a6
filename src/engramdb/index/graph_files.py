"""``GraphFiles``: HNSW graphs kept in a folder beside the database, so that a reopened store
searches at once instead of building its graph again.

A saved graph is a cache, never the truth. Each one is two files: the hnswlib graph,
``<name>-<sha256>.hnsw`` (named by its own digest, so it is never rewritten in place), and its
manifest, ``<name>.manifest``: what the graph holds (the partition, the model, the dimension,
every live record id with a fingerprint of its vector) and the digest of the graph file. Both
are written to a temporary file and renamed, the manifest last, so a crash mid-save leaves the
previous pair (or nothing). A load checks the manifest's own digest and the graph's before
hnswlib reads a byte, and the caller compares the fingerprints with the stored vectors: a
missing, truncated, foreign or garbage file is only a cache miss.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import struct
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

_log = logging.getLogger(__name__)

MAGIC = b"ENGRAM-HNSW\x00"
FORMAT = 1
#: A manifest header is a few hundred bytes; anything much larger is not one of ours.
MAX_HEADER_BYTES = 1 << 20
#: Temporary files a crashed save left behind are removed once they are this old.
STALE_TEMP_S = 3600.0
_GRAPH_NAME = re.compile(r"^[0-9a-f]{32}-[0-9a-f]{64}\.hnsw$")
_HEADER = struct.Struct("<I")
#: Fixed odd multipliers of the vector fingerprint (two independent 64-bit lanes).
_LANES = np.random.default_rng(0x5EED_F1A6).integers(
    0, 2**62, size=(2, 4096), dtype=np.uint64
) * np.uint64(2) + np.uint64(1)
_BLOCK = 8192

IdArray = npt.NDArray[np.int64]
Fingerprints = npt.NDArray[np.uint64]


def fingerprints(matrix: npt.NDArray[np.float32]) -> Fingerprints:
    """Two 64-bit fingerprints of each row's exact float32 bits: sums of its 64-bit words
    times fixed odd multipliers, modulo 2**64. Any change to a row changes them but with
    odds near 2**-64 (integer arithmetic: the same bits give the same fingerprint anywhere)."""
    rows = np.ascontiguousarray(matrix, dtype="<f4")
    if rows.shape[1] % 2:
        rows = np.pad(rows, ((0, 0), (0, 1)))
    words = rows.view("<u8")
    width = words.shape[1]
    if width > _LANES.shape[1]:
        raise ValueError(f"vectors of {2 * width} dimensions are too wide to fingerprint")
    lanes = _LANES[:, :width]
    found = np.empty((len(words), 2), dtype=np.uint64)
    for start in range(0, len(words), _BLOCK):
        block = words[start : start + _BLOCK]
        for lane in range(2):
            found[start : start + _BLOCK, lane] = (block * lanes[lane]).sum(axis=1)
    return found


@dataclass(frozen=True)
class SavedGraph:
    """An HNSW graph and what it holds: the live record ids (``ids``), the fingerprints of
    their vectors (aligned), and the hnswlib index itself (``ann``), whose other labels are
    marked deleted. ``on_disk``: the saved files hold this graph as it is."""

    ids: IdArray
    fingerprints: Fingerprints
    ann: Any
    on_disk: bool = True


class GraphFiles:
    """The saved HNSW graphs of one database, in ``folder``; each graph is named by what it
    indexes (``identity``: namespace, partition, model, dimension)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    @staticmethod
    def name_of(identity: dict[str, Any]) -> str:
        """The file name stem of the graph of ``identity``."""
        text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def manifest_path(self, identity: dict[str, Any]) -> Path:
        """Where the manifest of ``identity``'s graph lives."""
        return self.folder / f"{self.name_of(identity)}.manifest"

    def save_graph(self, identity: dict[str, Any], ann: Any) -> Path:
        """Write ``ann``'s hnswlib file under a temporary name; returns it (then
        ``publish``). Reads ``ann``: no one may change it meanwhile."""
        self.folder.mkdir(parents=True, exist_ok=True)
        temp = self.folder / f".{self.name_of(identity)}-{uuid.uuid4().hex}.tmp"
        ann.save_index(str(temp))
        return temp

    def publish(
        self, identity: dict[str, Any], temp: Path, ids: IdArray, prints: Fingerprints
    ) -> None:
        """Make the graph written to ``temp`` the saved graph of ``identity``, with the live
        ``ids`` it holds and their vectors' fingerprints: digest, fsync, rename (graph first,
        manifest last), then remove the graph the old manifest named."""
        name = self.name_of(identity)
        try:
            digest = _file_digest(temp)
            _fsync(temp)
            graph = self.folder / f"{name}-{digest}.hnsw"
            os.replace(temp, graph)
            body = np.ascontiguousarray(ids, dtype="<i8").tobytes()
            body += np.ascontiguousarray(prints, dtype="<u8").tobytes()
            header = json.dumps(
                {
                    "format": FORMAT,
                    "identity": identity,
                    "count": len(ids),
                    "max_id": int(ids.max()) if len(ids) else 0,
                    "graph": graph.name,
                    "graph_bytes": graph.stat().st_size,
                    "graph_sha256": digest,
                    "body_sha256": hashlib.sha256(body).hexdigest(),
                    "saved_at": time.time(),
                },
                sort_keys=True,
            ).encode()
            previous = self._graph_named(self.manifest_path(identity))
            _write_atomically(
                self.manifest_path(identity), MAGIC + _HEADER.pack(len(header)) + header + body
            )
            if previous is not None and previous != graph:
                previous.unlink(missing_ok=True)
        finally:
            temp.unlink(missing_ok=True)
            self._sweep()

    def load(self, identity: dict[str, Any], dimensions: int) -> SavedGraph | None:
        """The saved graph of ``identity`` if there is a whole, consistent one (``None``
        otherwise: missing, truncated, corrupt, or written for something else)."""
        path = self.manifest_path(identity)
        try:
            found = self._load(path, identity, dimensions)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, RuntimeError, MemoryError) as exc:
            _log.warning("saved vector graph %s not used (it is rebuilt): %s", path, exc)
            return None
        return found

    def _load(self, path: Path, identity: dict[str, Any], dimensions: int) -> SavedGraph:
        header, body = _read_manifest(path)
        if header.get("format") != FORMAT or header.get("identity") != identity:
            raise ValueError("the manifest is of another format, partition or model")
        count = int(header["count"])
        if len(body) != 24 * count or hashlib.sha256(body).hexdigest() != header["body_sha256"]:
            raise ValueError("the manifest's id list is damaged")
        ids = np.frombuffer(body[: 8 * count], dtype="<i8").astype(np.int64)
        prints = np.frombuffer(body[8 * count :], dtype="<u8").reshape(count, 2)
        graph = self._graph_named(path)
        if graph is None:
            raise ValueError("the manifest names no graph file")
        if graph.stat().st_size != int(header["graph_bytes"]):
            raise ValueError("the graph file has another size than its manifest says")
        if _file_digest(graph) != header["graph_sha256"]:
            raise ValueError("the graph file's digest differs from its manifest's")
        import hnswlib

        ann = hnswlib.Index(space="ip", dim=dimensions)
        ann.load_index(str(graph), max_elements=0)
        if ann.dim != dimensions or ann.get_current_count() < count:
            raise ValueError("the graph holds other vectors than its manifest says")
        return SavedGraph(ids, prints.astype(np.uint64), ann)

    def _graph_named(self, manifest: Path) -> Path | None:
        """The graph file ``manifest`` names (``None`` if there is no readable manifest or
        it names anything but a graph file of this folder)."""
        try:
            header, _ = _read_manifest(manifest)
        except (OSError, ValueError):
            return None
        name = header.get("graph")
        if not isinstance(name, str) or not _GRAPH_NAME.match(name):
            return None
        return self.folder / name

    def _sweep(self) -> None:
        """Remove temporary files that crashed saves left behind (never a running save's)."""
        cutoff = time.time() - STALE_TEMP_S
        for temp in self.folder.glob(".*.tmp"):
            with contextlib.suppress(OSError):
                if temp.stat().st_mtime < cutoff:
                    temp.unlink()


def _read_manifest(path: Path) -> tuple[dict[str, Any], bytes]:
    data = path.read_bytes()
    if not data.startswith(MAGIC) or len(data) < len(MAGIC) + _HEADER.size:
        raise ValueError("not a vector graph manifest")
    (size,) = _HEADER.unpack_from(data, len(MAGIC))
    start = len(MAGIC) + _HEADER.size
    if size > MAX_HEADER_BYTES or start + size > len(data):
        raise ValueError("the manifest is truncated")
    header = json.loads(data[start : start + size])
    if not isinstance(header, dict):
        raise ValueError("the manifest header is not an object")
    return header, data[start + size :]


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync(path: Path) -> None:
    with path.open("rb+") as handle:
        os.fsync(handle.fileno())


def _write_atomically(path: Path, data: bytes) -> None:
    temp = path.with_name(f".{path.name}-{uuid.uuid4().hex}.tmp")
    try:
        with temp.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
