"""The corpus index at scale: build ≥ 1 M tokens, then query latency and recall; and 10 M
synthetic vectors of the same shape. Run by hand on a quiet machine::

    python benchmarks/bench_index.py real --tokens 1000000 --work bench-index
    python benchmarks/bench_index.py synthetic --vectors 10000000 --work bench-index

``real``: writes the first ``--tokens`` regex tokens of ``../shared/data/openstax_prose/
train.txt.gz`` (then pd_fiction's) to a corpus file, runs ``elmo-explorer index`` on it with the
bundled model (``--ann-threads`` all CPUs) as a child process and reports its wall time, peak
memory (the child's max RSS), disk use per file kind; then, per layer, single-query latency
p50 / p95 of the HNSW search (the ``--any-word`` path) and of the exact same-word search, and
recall@10 of the HNSW search against exact search over the stored vectors. ``synthetic``: takes
the real index's layer-2 vectors and makes ``--vectors`` unit vectors of the same width by
adding noise to random real ones (their neighbourhood structure stays realistic), builds the
HNSW graph with the ``sq8`` quantizer and ``M=16`` (what fits 10 M × 512 in 8 GB), and reports
build time, peak memory, p50 / p95 and recall@10. Every line says the host CPU; the baseline
is exact search (numpy, float32) in the same run.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA = REPO.parent / "shared" / "data"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_ann import exact, host, recall

TOKEN_RE = re.compile(r"\w+(?:[-'’]\w+)*|[^\w\s]")


def write_corpus(path: Path, tokens: int) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for src in (DATA / "openstax_prose" / "train.txt.gz", DATA / "pd_fiction" / "train.txt.gz"):
            with gzip.open(src, "rt", encoding="utf-8") as fh:
                for line in fh:
                    if line.startswith("=") or not line.strip():
                        continue
                    out.write(line)
                    n += len(TOKEN_RE.findall(line))
                    if n >= tokens:
                        return n
    return n


def du(folder: Path) -> dict:
    kinds = {}
    for f in folder.rglob("*"):
        if f.is_file():
            kind = f.name.split(".")[0]
            kinds[kind] = kinds.get(kind, 0) + f.stat().st_size
    return {k: round(v / 2**20, 1) for k, v in sorted(kinds.items())}


def latencies(fn, queries) -> tuple:
    lat = []
    for q in queries:
        t = time.perf_counter()
        fn(q)
        lat.append((time.perf_counter() - t) * 1000)
    return float(np.percentile(lat, 50)), float(np.percentile(lat, 95))


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact top-k over memory-mapped float16 vectors, in blocks (float32 arithmetic)."""
    best_s = np.full((len(queries), k), -np.inf, np.float32)
    best_i = np.zeros((len(queries), k), np.int64)
    for s in range(0, len(vectors), 200_000):
        block = np.asarray(vectors[s:s + 200_000], np.float32)               # (B, D)
        scores = queries @ block.T                                           # (Q, B)
        ids = exact(block, queries, k) + s
        cand_s = np.concatenate([best_s, np.take_along_axis(scores, ids - s, 1)], 1)
        cand_i = np.concatenate([best_i, ids], 1)
        order = np.argsort(-cand_s, axis=1)[:, :k]
        best_s = np.take_along_axis(cand_s, order, 1)
        best_i = np.take_along_axis(cand_i, order, 1)
    return best_i


def real(a) -> None:
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.txt"
    n = write_corpus(corpus, a.tokens)
    print(f"host: {host()}\ncorpus: {n} regex tokens in {corpus}", flush=True)
    cmd = [sys.executable, "-m", "elmo_engine.cli", "index", str(corpus), "--out",
           str(work / "index"), "--ann-threads", str(os.cpu_count()), "--force"]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, cwd=REPO)
    build = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
    print(f"index build: {build:.0f} s ({n / build:,.0f} tokens/s overall), peak memory "
          f"{peak:.2f} GB, disk MB {du(work / 'index')}", flush=True)
    from elmo_engine.index.search import CorpusIndex

    ix = CorpusIndex(work / "index")
    rng = np.random.default_rng(0)
    rows = np.sort(rng.choice(ix.manifest.n_tokens, a.queries, replace=False))
    for layer in ix.layers:
        vecs = ix.vectors[layer]
        queries = np.asarray(vecs[rows], np.float32)
        ann = ix.ann(layer)
        p50, p95 = latencies(lambda q: ann.search(q[None], 10), queries)
        found = ann.search(queries, 10)[1]
        t = time.perf_counter()
        truth = exact_top(vecs, queries, 10)
        exact_ms = (time.perf_counter() - t) * 1000 / len(queries)
        words = [w for _, _, _, w, _ in ix.tokens_at(rows[:200])]
        s50, s95 = latencies(lambda i: ix.search(queries[i], layer, 10, same_word=words[i]),
                             range(len(words)))
        print(f"layer {layer}: HNSW p50 {p50:.2f} ms, p95 {p95:.2f} ms, recall@10 "
              f"{recall(found, truth):.3f}; exact (baseline) {exact_ms:.0f} ms/query "
              f"({exact_ms / p50:.0f}x slower than HNSW p50); same-word search p50 {s50:.2f} ms, "
              f"p95 {s95:.2f} ms", flush=True)
    ix.close()


class FileRows:
    """Rows of an ``.npy`` file read with plain file reads, not a memory map: mapped pages would
    count in the process's resident memory and hide the index's own peak."""

    def __init__(self, path: Path):
        arr = np.load(path, mmap_mode="r", allow_pickle=False)
        self.path, self.shape, self.dtype, self.offset = path, arr.shape, arr.dtype, arr.offset
        del arr

    def __len__(self) -> int:
        return self.shape[0]

    def _read(self, start: int, stop: int) -> np.ndarray:
        width = self.shape[1]
        return np.fromfile(self.path, self.dtype, count=(stop - start) * width,
                           offset=self.offset + start * width * self.dtype.itemsize
                           ).reshape(-1, width)

    def __getitem__(self, item):
        if isinstance(item, slice):
            start, stop, step = item.indices(len(self))
            if step == 1:
                return self._read(start, stop)
            return np.concatenate([self._read(i, i + 1) for i in range(start, stop, step)])
        rows = np.asarray(item)
        return np.concatenate([self._read(int(i), int(i) + 1) for i in rows.reshape(-1)])


def synthetic(a) -> None:
    import faiss

    from elmo_engine.index.ann import AnnIndex, AnnSettings, build_ann

    work = Path(a.work)
    base = np.load(work / "index" / "vectors.L2.npy", mmap_mode="r", allow_pickle=False)
    rng = np.random.default_rng(0)
    target = work / "synthetic.npy"
    dim = base.shape[1]
    out = np.lib.format.open_memmap(target, mode="w+", dtype=np.float16,
                                    shape=(a.vectors, dim))
    for s in range(0, a.vectors, 500_000):
        m = min(500_000, a.vectors - s)
        v = np.asarray(base[rng.integers(0, len(base), m)], np.float32)
        v += a.noise * rng.standard_normal(v.shape, dtype=np.float32) / np.sqrt(dim)
        out[s:s + m] = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)
    out.flush()
    del out
    vecs = FileRows(target)
    settings = AnnSettings(m=16, threads=os.cpu_count(), quantizer="sq8")
    print(f"host: {host()}\nsynthetic: {vecs.shape} float16 (noise {a.noise}), "
          f"{settings}", flush=True)
    t = time.perf_counter()
    build_ann(vecs, work / "synthetic.faiss", settings)
    build = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    ann = AnnIndex(work / "synthetic.faiss", len(vecs), dim, settings)
    faiss.omp_set_num_threads(1)
    queries = np.asarray(vecs[np.sort(rng.choice(len(vecs), a.queries, replace=False))],
                         np.float32)                                           # (Q, D)
    p50, p95 = latencies(lambda q: ann.search(q[None], 10), queries)
    found = ann.search(queries, 10)[1]
    peak = max(peak, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20)
    truth = exact_top(vecs, queries, 10)              # the baseline (reads the file in blocks)
    print(f"build {build:.0f} s, peak memory {peak:.2f} GB, index "
          f"{(work / 'synthetic.faiss').stat().st_size / 2**30:.2f} GB; p50 {p50:.2f} ms, "
          f"p95 {p95:.2f} ms, recall@10 {recall(found, truth):.3f}", flush=True)
    print(json.dumps({"vectors": len(vecs), "build_s": build, "peak_gb": peak, "p50_ms": p50,
                      "p95_ms": p95, "recall10": recall(found, truth)}))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    r = sub.add_parser("real")
    r.add_argument("--tokens", type=int, default=1_000_000)
    s = sub.add_parser("synthetic")
    s.add_argument("--vectors", type=int, default=10_000_000)
    s.add_argument("--noise", type=float, default=0.3)
    for p in (r, s):
        p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bench-index"))
        p.add_argument("--queries", type=int, default=1000)
    a = ap.parse_args()
    real(a) if a.part == "real" else synthetic(a)


if __name__ == "__main__":
    main()
