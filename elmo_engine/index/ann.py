"""The approximate nearest-neighbour index of one layer: faiss's HNSW graph over float16 vectors.

Malkov & Yashunin (2018), *Efficient and robust approximate nearest neighbor search using
Hierarchical Navigable Small World graphs*; the implementation is faiss (Douze et al. 2024,
*The Faiss library*), ``IndexHNSWSQ`` with a float16 scalar quantizer and inner product on
unit-length vectors (= cosine). faiss won the comparison of ``benchmarks/bench_ann.py`` against
usearch and hnswlib on this model's vectors (docs/guide/corpus-index.md): the best recall@10 at
float16 storage, the fastest build and query.

The file is faiss's own binary format (no code is executed on reading). Before faiss reads it,
:func:`check_ann_file` walks its layout (the graph, then the scalar-quantized storage): every
count it declares is checked against the manifest's (vectors, width) and against the bytes that
remain in the file, every link against the number of vectors, so that faiss never allocates for
a count the file does not hold (a 7.9 MB file declaring 3·10⁸ elements is refused before it is
read) and never follows a link out of range; a file bigger than a graph over the index's vectors
can be is refused first. A build with one thread is reproducible (the
same vectors give the same graph, so a resumed or merged build answers exactly as an uninterrupted
one); more threads build faster but insert in an order the scheduler decides.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Callable, Optional, Tuple

import numpy as np

from elmo_engine.atomic import atomic_path
from elmo_engine.errors import InputError
from elmo_engine.files import regular_file_problem
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


#: faiss's ScalarQuantizer types written by :func:`new_ann`, and bytes per dimension of each
_QTYPES = {4: 2, 0: 1}                        # QT_fp16, QT_8bit
_MAX_LEVELS = 64


class _Reader:
    """The faiss file, read field by field, with the bytes left always known."""

    def __init__(self, fh: BinaryIO, size: int, path: Path):
        self.fh, self.left, self.path = fh, size, path

    def bad(self, what: str) -> InputError:
        return InputError(f"not a nearest-neighbour index this program wrote ({what}); rebuild "
                          "the index with --force", path=self.path)

    def take(self, n: int) -> bytes:
        if n > self.left:
            raise self.bad("it ends early")
        data = self.fh.read(n)
        if len(data) != n:
            raise self.bad("it ends early")
        self.left -= n
        return data

    def unpack(self, fmt: str):
        return struct.unpack("<" + fmt, self.take(struct.calcsize("<" + fmt)))

    def count(self, item: int, what: str, want: Optional[int] = None,
              most: Optional[int] = None) -> int:
        """A vector's declared length, checked against ``want``/``most`` and the bytes left."""
        (n,) = self.unpack("Q")
        if want is not None and n != want:
            raise self.bad(f"{what}: {n} entries where the index needs {want}")
        if most is not None and n > most:
            raise self.bad(f"{what}: {n} entries, more than {most}")
        if n * item > self.left:
            raise self.bad(f"{what}: {n} entries declared, the file holds fewer")
        return n

    def scan(self, dtype: str, n: int, check: Callable[[np.ndarray], Optional[str]],
             block: int = 1 << 22) -> None:
        """Read ``n`` items of ``dtype`` in blocks, each passed to ``check`` (a problem or None)."""
        item = np.dtype(dtype).itemsize
        done = 0
        while done < n:
            k = min(block, n - done)
            arr = np.frombuffer(self.take(k * item), dtype=dtype)
            problem = check(arr)
            if problem:
                raise self.bad(problem)
            done += k

    def skip(self, n: int) -> None:
        if n > self.left:
            raise self.bad("it ends early")
        self.fh.seek(n, 1)
        self.left -= n

    def header(self, fourcc: bytes, n: int, dim: int) -> None:
        if self.take(4) != fourcc:
            raise self.bad(f"not a faiss {fourcc.decode()} section")
        d, ntotal, _, _, _trained, metric = self.unpack("iqqq?i")
        if d != dim or ntotal != n:
            raise InputError(f"holds {ntotal} vectors of width {d}; the index has {n} of width "
                             f"{dim}", path=self.path)
        if metric != 0:                                   # METRIC_INNER_PRODUCT
            raise self.bad(f"metric {metric}, not inner product")


def check_ann_file(path: Path, n: int, dim: int) -> None:
    """Refuse ``path`` unless it is the layout :func:`build_ann` writes for ``n`` vectors of
    width ``dim``: an ``IndexHNSWSQ`` (``IHNs``: header, graph) over an ``IndexScalarQuantizer``
    (``IxSQ``: header, quantizer, codes), ending where the codes end. Counts are checked before
    anything of their size is read; links and levels are read in blocks and range-checked."""
    path = Path(path)
    size = path.stat().st_size
    with open(path, "rb") as fh:
        r = _Reader(fh, size, path)
        r.header(b"IHNs", n, dim)
        r.skip(8 * r.count(8, "level probabilities", most=_MAX_LEVELS))
        n_cum = r.count(4, "links per level", most=_MAX_LEVELS + 1)
        cum = np.frombuffer(r.take(4 * n_cum), dtype="<i4")
        if n_cum < 2 or cum[0] != 0 or np.any(np.diff(cum) < 0):
            raise r.bad("links per level")
        r.count(4, "levels", want=n)
        r.scan("<i4", n, lambda a: "a level out of range"
               if len(a) and (a.min() < 1 or a.max() > n_cum - 1) else None)
        r.count(8, "offsets", want=n + 1)
        last = [0]

        def offsets_ok(a: np.ndarray) -> Optional[str]:
            if len(a) and (a[0] < last[0] or np.any(np.diff(a.astype(np.int64)) < 0)):
                return "offsets out of order"
            last[0] = int(a[-1]) if len(a) else last[0]
            return None

        r.scan("<u8", n + 1, offsets_ok)
        n_links = r.count(4, "links", want=last[0])
        r.scan("<i4", n_links, lambda a: "a link out of range"
               if len(a) and (a.min() < -1 or a.max() >= n) else None)
        entry, max_level, _efc, _efs, _ = r.unpack("iiiii")
        if not (-1 <= entry < n) or not (-1 <= max_level < n_cum - 1) or (n and entry < 0):
            raise r.bad("entry point")
        r.header(b"IxSQ", n, dim)
        qtype, _rangestat, _arg, sq_d, code_size = r.unpack("iifQQ")
        if qtype not in _QTYPES or sq_d != dim or code_size != _QTYPES[qtype] * dim:
            raise r.bad(f"quantizer type {qtype}, width {sq_d}, code size {code_size}")
        r.skip(4 * r.count(4, "quantizer statistics", most=2 * dim))
        r.skip(r.count(1, "codes", want=n * code_size))
        if r.left:
            raise r.bad(f"{r.left} bytes after the codes")


class AnnIndex:
    """A loaded per-layer index: :meth:`search` gives ``(scores, rows)`` of the ``k`` nearest."""

    def __init__(self, path: Path, n: int, dim: int, settings: AnnSettings):
        import faiss

        path = Path(path)
        if not path.exists():
            raise InputError("the nearest-neighbour index is missing; rebuild the index",
                             path=path)
        problem = regular_file_problem(path)
        if problem:
            raise InputError(problem, path=path)
        # vectors (at most 2 bytes a dimension) + ~2·m links of 4 bytes per node, with room
        limit = n * (dim * 2 + 8 * settings.m * 2 + 64) + 8 * dim + (1 << 20)
        if path.stat().st_size > limit:
            raise InputError("bigger than a nearest-neighbour index over this index's vectors "
                             "can be", path=path)
        try:
            check_ann_file(path, n, dim)                       # every count, before faiss
            self._ix = faiss.read_index(str(path))          # (already its own class)
        except OSError as e:
            raise InputError(f"cannot read the nearest-neighbour index ({e.strerror or e})",
                             path=path) from None
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
