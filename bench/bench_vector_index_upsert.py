"""One write into a loaded in-memory vector index (``VectorIndex.upsert`` of one vector) as the
index grows: what a memorize into a partition whose index is loaded pays for it.

Random 384-dimensional vectors (the cost does not depend on them), exact search
(no HNSW graph: ``ann_threshold`` set above every size), ``--writes`` single upserts timed
after loading each size::

    python bench/bench_vector_index_upsert.py --sizes 2000 20000 100000 --writes 50
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from bench_common import percentiles

from engramdb.index.vector_index import VectorIndex


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 20_000, 100_000])
    parser.add_argument("--writes", type=int, default=50)
    options = parser.parse_args()
    rng = np.random.default_rng(0)
    for size in options.sizes:
        index = VectorIndex(384, ann_threshold=10**9)
        index.load(list(range(size)), rng.standard_normal((size, 384)).astype(np.float32))
        seconds = []
        for n in range(options.writes):
            one = rng.standard_normal((1, 384)).astype(np.float32)
            began = time.perf_counter()
            index.upsert([size + n], one)
            seconds.append(time.perf_counter() - began)
        cut = percentiles(seconds)
        print(
            f"{size:>9,} vectors: one upsert p50 {cut['p50']:.3f} ms, p95 {cut['p95']:.3f} ms, "
            f"mean {cut['mean']:.3f} ms (growing the room included)"
        )


if __name__ == "__main__":
    main()
