"""Which approximate nearest-neighbour library the corpus index uses: a comparison on its vectors.

Run by hand (it needs the three candidates installed: ``pip install faiss-cpu usearch hnswlib``)::

    python benchmarks/bench_ann.py VECTORS.npy [--queries 500] [--threads 1]

``VECTORS.npy`` holds unit-length ELMo vectors of one layer (an index's ``vectors.L2.npy``, or the
array ``--make`` writes from the bundled reference corpus). For each candidate it prints the build
time, the index's size in memory (its serialized bytes), recall@10 against exact search (numpy,
float32) and the single-query latency p50 / p95, with the exact search as the baseline.
Cosine = inner product on unit vectors. The results are recorded in docs/guide/corpus-index.md.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from hostinfo import host_line


def exact(base: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    ids = np.empty((len(queries), k), np.int64)
    for s in range(0, len(queries), 256):
        scores = queries[s:s + 256] @ base.T
        part = np.argpartition(-scores, k, axis=1)[:, :k]
        order = np.argsort(-np.take_along_axis(scores, part, 1), axis=1)
        ids[s:s + 256] = np.take_along_axis(part, order, 1)
    return ids


def recall(found: np.ndarray, truth: np.ndarray) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth)]))


def timed_queries(search, queries: np.ndarray):
    lat, out = [], []
    for q in queries:
        t = time.perf_counter()
        out.append(search(q))
        lat.append(time.perf_counter() - t)
    lat = np.array(lat) * 1000
    return np.array(out), float(np.percentile(lat, 50)), float(np.percentile(lat, 95))


def size_of(save) -> int:
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "ix")
        save(p)
        return os.path.getsize(p)


def candidates(base: np.ndarray, k: int, threads: int):
    dim = base.shape[1]

    def faiss_hnsw(sq: bool):
        import faiss
        faiss.omp_set_num_threads(threads)
        if sq:
            ix = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_fp16, 32,
                                   faiss.METRIC_INNER_PRODUCT)
            ix.train(base)
        else:
            ix = faiss.IndexHNSWFlat(dim, 32, faiss.METRIC_INNER_PRODUCT)
        ix.hnsw.efConstruction = 128
        ix.add(base)
        ix.hnsw.efSearch = 128
        return (lambda q: ix.search(q[None], k)[1][0],
                lambda p: faiss.write_index(ix, p))

    def usearch_(dtype: str):
        from usearch.index import Index
        ix = Index(ndim=dim, metric="ip", dtype=dtype, connectivity=16,
                   expansion_add=128, expansion_search=128)
        ix.add(np.arange(len(base)), base, threads=threads)
        return (lambda q: ix.search(q, k).keys, lambda p: ix.save(p))

    def hnswlib_():
        import hnswlib
        ix = hnswlib.Index(space="ip", dim=dim)
        ix.init_index(max_elements=len(base), ef_construction=128, M=16, random_seed=0)
        ix.set_num_threads(threads)
        ix.add_items(base, np.arange(len(base)))
        ix.set_ef(128)
        return (lambda q: ix.knn_query(q[None], k)[0][0], lambda p: ix.save_index(p))

    return {"faiss HNSWFlat (fp32, M=32)": lambda: faiss_hnsw(False),
            "faiss HNSWSQ (fp16, M=32)": lambda: faiss_hnsw(True),
            "usearch (f16, M=16)": lambda: usearch_("f16"),
            "usearch (i8, M=16)": lambda: usearch_("i8"),
            "hnswlib (fp32, M=16)": hnswlib_}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("vectors", type=Path)
    ap.add_argument("--queries", type=int, default=500)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("-k", type=int, default=10)
    a = ap.parse_args()
    base = np.ascontiguousarray(np.load(a.vectors, allow_pickle=False), dtype=np.float32)
    rng = np.random.default_rng(0)
    queries = base[rng.choice(len(base), a.queries, replace=False)]
    print(f"{host_line()}\nvectors: {base.shape} from {a.vectors.name}; {a.queries} queries, "
          f"k={a.k}, {a.threads} thread(s)")
    truth, p50, p95 = timed_queries(lambda q: exact(base, q[None], a.k)[0], queries)
    print(f"{'method':30s} {'build s':>8s} {'MB':>7s} {'recall@10':>9s} {'p50 ms':>7s} "
          f"{'p95 ms':>7s}")
    print(f"{'exact (numpy fp32), baseline':30s} {0:8.1f} {base.nbytes / 2**20:7.1f} "
          f"{1:9.3f} {p50:7.2f} {p95:7.2f}")
    half = base.astype(np.float16).astype(np.float32)     # the index's storage: float16
    found = exact(half, queries.astype(np.float16).astype(np.float32), a.k)
    print(f"{'exact on float16 storage':30s} {0:8.1f} {half.nbytes / 2**21:7.1f} "
          f"{recall(found, truth):9.3f}")
    for name, make in candidates(base, a.k, a.threads).items():
        try:
            t = time.perf_counter()
            search, save = make()
            build = time.perf_counter() - t
        except ImportError as e:
            print(f"{name:30s} not installed ({e})")
            continue
        found, q50, q95 = timed_queries(search, queries)
        print(f"{name:30s} {build:8.1f} {size_of(save) / 2**20:7.1f} "
              f"{recall(found, truth):9.3f} {q50:7.2f} {q95:7.2f}  "
              f"(p50 {p50 / max(q50, 1e-9):.0f}x faster than exact)")


if __name__ == "__main__":
    main()
