"""The approximate nearest-neighbour index of one layer: faiss's HNSW graph over float16 vectors.

Malkov & Yashunin (2018), *Efficient and robust approximate nearest neighbor search using
Hierarchical Navigable Small World graphs*; the implementation is faiss (Douze et al. 2024,
*The Faiss library*), ``IndexHNSWSQ`` with a float16 scalar quantizer and inner product on
unit-length vectors (= cosine). faiss won the comparison of ``benchmarks/bench_ann.py`` against
usearch and hnswlib on this model's vectors (docs/guide/corpus-index.md): the best recall@10 at
float16 storage, the fastest build and query.

The file is faiss's own binary format (no code is executed on reading); it is refused when it is
bigger than a graph over the index's vectors can be. A build with one thread is reproducible (the
same vectors give the same graph, so a resumed or merged build answers exactly as an uninterrupted
one); more threads build faster but insert in an order the scheduler decides.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

LIBRARY = "faiss"
QUANTIZERS = ("fp16", "sq8")


@dataclass(frozen=True)
class AnnSettings:
    """HNSW parameters: ``m`` links per node, candidate list sizes when adding and searching."""

    m: int = 32
    ef_construction: int = 128
    ef_search: int = 128
    threads: int = 1
    quantizer: str = "fp16"        # "fp16", or "sq8" (a byte per dimension: for 10^7 vectors)

    def __post_init__(self):
        if self.quantizer not in QUANTIZERS:
            raise InputError(f"unknown quantizer {self.quantizer!r}; use fp16 or sq8")

    def to_dict(self) -> dict:
        return {"library": LIBRARY, "kind": "HNSWSQ", "quantizer": self.quantizer, "m": self.m,
                "ef_construction": self.ef_construction, "ef_search": self.ef_search,
                "threads": self.threads}


def ann_file(folder: Path, layer: int) -> Path:
    return Path(folder) / f"ann.L{layer}.faiss"


def build_ann(vectors: np.ndarray, target: Path, settings: AnnSettings,
              state: Optional[TaskState] = None, chunk: int = 20_000) -> None:
    """Build the HNSW index over ``vectors`` ``(N, D)`` (float16, unit length) and write it
    atomically to ``target``. Rows are added in order, ``chunk`` at a time (progress, cancel)."""
    import faiss

    n, dim = vectors.shape
    before = faiss.omp_get_max_threads()        # the OpenMP pool is torch's too: restore it
    faiss.omp_set_num_threads(max(1, settings.threads))
    try:
        _build(faiss, vectors, target, settings, state, chunk)
    finally:
        faiss.omp_set_num_threads(before)


def _build(faiss, vectors, target, settings, state, chunk) -> None:
    ix = new_ann(faiss, vectors, settings)
    add_rows(ix, vectors, 0, len(vectors), state, chunk)
    with atomic_path(target) as tmp:
        faiss.write_index(ix, str(tmp))


def new_ann(faiss, vectors, settings: AnnSettings):
    """An empty HNSW graph for ``vectors`` ``(N, D)``, its quantizer trained (sq8 learns each
    dimension's range from an even sample of at most 100k rows; fp16 needs no statistics)."""
    n, dim = vectors.shape
    qt = {"fp16": faiss.ScalarQuantizer.QT_fp16, "sq8": faiss.ScalarQuantizer.QT_8bit}
    ix = faiss.IndexHNSWSQ(dim, qt[settings.quantizer], settings.m, faiss.METRIC_INNER_PRODUCT)
    ix.hnsw.efConstruction = settings.ef_construction
    step = max(1, n // 100_000)
    ix.train(np.ascontiguousarray(vectors[::step][:100_000], dtype=np.float32))
    return ix


#: the rows a graph-build estimate times (:func:`estimate_graph_seconds`)
ESTIMATE_ROWS = 3000


def estimate_graph_seconds(sample: np.ndarray, n_total: int, settings: AnnSettings) -> float:
    """About how long building the HNSW graph of ``n_total`` rows takes here: a graph of up to
    :data:`ESTIMATE_ROWS` rows of ``sample`` ``(n, D)`` is built and timed, and the time per row
    scaled by ``log n_total / log n`` (an HNSW insertion visits about log n layers of
    neighbours). A rough figure (within a factor of two in our runs), so that a build's time left
    covers its graphs too, not only the embedding."""
    import time

    import faiss

    rows = np.ascontiguousarray(sample[:ESTIMATE_ROWS], dtype=np.float32)      # (n, D)
    n = len(rows)
    if n < 100 or n_total <= 0:
        return 0.0
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(max(1, settings.threads))
    try:
        t0 = time.perf_counter()
        ix = new_ann(faiss, rows, settings)
        ix.add(rows)
        per_row = (time.perf_counter() - t0) / n
    finally:
        faiss.omp_set_num_threads(before)
    return per_row * n_total * max(1.0, np.log(n_total) / np.log(n))


def add_rows(ix, vectors, start: int, stop: int, state: Optional[TaskState] = None,
             chunk: int = 20_000) -> None:
    """Add rows ``start:stop`` of ``vectors`` to the graph in order, ``chunk`` at a time
    (progress and cancel between chunks; the message gives the rate and the time left). The
    OpenMP threads are the caller's to set."""
    from elmo_engine.progress import Rate

    n = len(vectors)
    rate = Rate(n, start, "vectors")
    for s in range(start, stop, chunk):
        check(state)
        block = np.ascontiguousarray(vectors[s:min(stop, s + chunk)], dtype=np.float32)  # (c, D)
        ix.add(block)
        done = min(stop, s + chunk)
        report(state, done, n, f"building the nearest-neighbour graph ({rate.message(done)})")


class AnnIndex:
    """A loaded per-layer index: :meth:`search` gives ``(scores, rows)`` of the ``k`` nearest."""

    def __init__(self, path: Path, n: int, dim: int, settings: AnnSettings):
        import faiss

        path = Path(path)
        if not path.is_file():
            raise InputError("the nearest-neighbour index is missing; rebuild the index",
                             path=path)
        # vectors (at most 2 bytes a dimension) + ~2·m links of 4 bytes per node, with room
        limit = n * (dim * 2 + 8 * settings.m * 2 + 64) + 8 * dim + (1 << 20)
        if path.stat().st_size > limit:
            raise InputError("bigger than a nearest-neighbour index over this index's vectors "
                             "can be", path=path)
        try:
            self._ix = faiss.read_index(str(path))          # (already its own class)
        except RuntimeError as e:
            raise InputError(f"cannot read the nearest-neighbour index ({e})", path=path) \
                from None
        if self._ix.ntotal != n or self._ix.d != dim:
            raise InputError(f"holds {self._ix.ntotal} vectors of width {self._ix.d}; the "
                             f"index has {n} of width {dim}", path=path)
        if not isinstance(self._ix, faiss.IndexHNSW):
            raise InputError(f"holds a {type(self._ix).__name__}, not an HNSW graph", path=path)
        self._ix.hnsw.efSearch = settings.ef_search

    def search(self, queries: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
        """``queries`` ``(Q, D)`` → scores and rows, each ``(Q, k)`` (rows -1 when fewer)."""
        q = np.ascontiguousarray(np.atleast_2d(queries), dtype=np.float32)
        scores, rows = self._ix.search(q, int(k))
        return scores, rows
