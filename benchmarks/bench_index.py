"""The corpus index at scale: build ≥ 1 M tokens, then query latency and recall; and 10 M
synthetic vectors of the same shape. Run by hand on a quiet machine::

    python benchmarks/bench_index.py real --tokens 1000000 --work bench-index
    python benchmarks/bench_index.py synthetic --vectors 10000000 --work bench-index

``real``: writes the first ``--tokens`` typed-text tokens of ``../shared/data/openstax_prose/
train.txt.gz`` (then pd_fiction's) to a corpus file, runs ``elmo-explorer index`` on it with the
bundled model (``--ann-threads`` all CPUs) as a child process and reports its wall time, peak
memory (the child's max RSS), disk use per file kind; then, per layer, single-query latency
p50 / p95 of the HNSW search (the ``--any-word`` path) and of the exact same-word search, and
recall@10 of the HNSW search against exact search over the stored vectors. ``synthetic``: takes
the real index's layer-2 vectors and makes ``--vectors`` unit vectors of the same width by
adding noise to random real ones (their neighbourhood structure stays realistic), builds the
HNSW graph with the ``sq8`` quantizer, ``M=16`` and efConstruction 64 (what fits 10 M × 512 in
8 GB and builds on 2 cores in half an hour), and reports build time, peak memory, p50 / p95 and
recall@10. It resumes: a checkpoint of the graph every ``--checkpoint-every`` rows.
``--queries-only`` (both) measures an earlier run's index again. The host line says the CPU and
its capabilities; the baseline is exact search (numpy, float32) in the same run.
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
import hostinfo
from bench_ann import exact, recall

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


def build_share(folder: Path, seconds: float) -> str:
    """The share of the GEMM ceiling the build's nominal FLOPs (the bundled model's per token
    × the index's tokens) reach in ``seconds`` (the whole command: HNSW graphs included)."""
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.index.store import read_manifest
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.flops import flops_per_token

    m = read_manifest(folder)
    flops = flops_per_token(load_checkpoint(checkpoint_or_demo(None)).opts).total
    return hostinfo.share_line(flops * m.n_tokens, seconds, m.precision or "fp32")


def real(a) -> None:
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.txt"
    if a.queries_only:                                    # measure an existing index again
        print(f"{hostinfo.host_line()}\nindex: {work / 'index'} (built before)", flush=True)
    else:
        n = write_corpus(corpus, a.tokens)
        print(f"{hostinfo.host_line()}\ncorpus: {n} typed-text tokens in {corpus}", flush=True)
        cmd = [sys.executable, "-m", "elmo_engine.cli", "index", str(corpus), "--out",
               str(work / "index"), "--ann-threads", str(os.cpu_count()), "--force"]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, cwd=REPO)
        build = time.perf_counter() - t
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20
        print(f"index build: {build:.0f} s ({n / build:,.0f} tokens/s overall), peak memory "
              f"{peak:.2f} GB, disk MB {du(work / 'index')}", flush=True)
        print(f"the model's nominal FLOPs over the build: {build_share(work / 'index', build)}",
              flush=True)
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
        ix._rows.clear()                 # each layer starts with no word's rows in memory
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


def write_synthetic(source: Path, target: Path, n: int, noise: float) -> None:
    """``n`` unit float16 rows of ``base``'s width: random base rows plus Gaussian noise of
    norm ~``noise``, renormalised. Plain file writes (a memory map's dirty pages would count in
    the resident memory this benchmark reports); the same seed gives the same file."""
    base = np.load(source, mmap_mode="r", allow_pickle=False)                    # (B, D)
    rng = np.random.default_rng(0)
    dim = base.shape[1]
    part = target.with_suffix(".part")
    with open(part, "wb") as fh:
        np.lib.format.write_array_header_1_0(
            fh, {"descr": "<f2", "fortran_order": False, "shape": (n, dim)})
        for s in range(0, n, 500_000):
            m = min(500_000, n - s)
            v = np.asarray(base[np.sort(rng.integers(0, len(base), m))], np.float32)  # (m, D)
            v += noise * rng.standard_normal(v.shape, dtype=np.float32) / np.sqrt(dim)
            v /= np.linalg.norm(v, axis=1, keepdims=True)
            fh.write(v.astype(np.float16).tobytes())
            print(f"synthetic vectors: {s + m:,} / {n:,}", file=sys.stderr, flush=True)
    os.replace(part, target)


def synthetic(a) -> None:
    """Resumable: the vectors file is made once; the graph is written to a checkpoint every
    ``--checkpoint-every`` rows and a rerun continues from it (build seconds and the peak memory
    are carried over in ``synthetic.json``); ``--queries-only`` reruns just the measurements."""
    import faiss

    from elmo_engine.index.ann import AnnIndex, AnnSettings, add_rows, new_ann

    work = Path(a.work)
    base = np.load(work / "index" / "vectors.L2.npy", mmap_mode="r", allow_pickle=False)
    target, final = work / "synthetic.npy", work / "synthetic.faiss"
    ckpt, meta_path = work / "synthetic.partial.faiss", work / "synthetic.json"
    settings = AnnSettings(m=a.m, ef_construction=a.ef_construction, ef_search=a.ef_search,
                           threads=os.cpu_count() or 1, quantizer="sq8")
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    graph = {k: v for k, v in settings.to_dict().items() if k != "ef_search"}  # search-time only
    wanted = {"vectors": a.vectors, "noise": a.noise, "base_rows": len(base), "settings": graph}
    if {k: meta.get(k) for k in wanted} != wanted:
        meta = dict(wanted, build_s=0.0, peak_gb=0.0)
        for f in (target, final, ckpt):
            f.unlink(missing_ok=True)
    if not target.exists():               # in a child: the base's mapped pages stay out of
        import multiprocessing            # this process's peak resident memory
        child = multiprocessing.get_context("fork").Process(
            target=write_synthetic, args=(work / "index" / "vectors.L2.npy", target, a.vectors,
                                          a.noise))
        child.start()
        child.join()
        if child.exitcode != 0:
            sys.exit(f"making the synthetic vectors failed (exit {child.exitcode})")
    vecs = FileRows(target)
    dim = vecs.shape[1]
    print(f"{hostinfo.host_line()}\nsynthetic: {vecs.shape} float16 from {len(base):,} real "
          f"layer-2 vectors (noise {a.noise}), {settings}", flush=True)
    if not final.exists() and not a.queries_only:
        faiss.omp_set_num_threads(settings.threads)
        ix = faiss.read_index(str(ckpt)) if ckpt.exists() else new_ann(faiss, vecs, settings)
        done = ix.ntotal
        print(f"building from row {done:,}", flush=True)
        while done < len(vecs):
            t = time.perf_counter()
            stop = min(len(vecs), done + a.checkpoint_every)
            add_rows(ix, vecs, done, stop)
            meta["build_s"] += time.perf_counter() - t
            done = stop
            out = final if done == len(vecs) else ckpt
            faiss.write_index(ix, str(out.with_suffix(".tmp")))
            os.replace(out.with_suffix(".tmp"), out)
            meta["peak_gb"] = max(meta["peak_gb"], peak_gb())
            meta_path.write_text(json.dumps(meta))
            print(f"  {done:,} rows, {meta['build_s']:.0f} s of building so far, peak "
                  f"{meta['peak_gb']:.2f} GB", flush=True)
        del ix
        ckpt.unlink(missing_ok=True)
    ann = AnnIndex(final, len(vecs), dim, settings)
    faiss.omp_set_num_threads(1)
    rng = np.random.default_rng(1)
    queries = np.asarray(vecs[np.sort(rng.choice(len(vecs), a.queries, replace=False))],
                         np.float32)                                           # (Q, D)
    p50, p95 = latencies(lambda q: ann.search(q[None], 10), queries)
    found = ann.search(queries, 10)[1]
    query_peak = peak_gb()
    truth = exact_top(vecs, queries, 10)              # the baseline (reads the file in blocks)
    r10 = recall(found, truth)
    print(f"build {meta['build_s']:.0f} s ({settings.threads} threads), peak memory: build "
          f"{meta['peak_gb']:.2f} GB, loaded index + queries {query_peak:.2f} GB; index "
          f"{final.stat().st_size / 2**30:.2f} GB; single-thread query p50 {p50:.2f} ms, "
          f"p95 {p95:.2f} ms, recall@10 {r10:.3f} (exact search: the baseline)", flush=True)
    print(json.dumps({"vectors": len(vecs), "base_rows": len(base), "build_s": meta["build_s"],
                      "build_peak_gb": meta["peak_gb"], "query_peak_gb": query_peak,
                      "p50_ms": p50, "p95_ms": p95, "recall10": r10,
                      "settings": settings.to_dict()}))


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="part", required=True)
    r = sub.add_parser("real")
    r.add_argument("--tokens", type=int, default=1_000_000)
    s = sub.add_parser("synthetic")
    s.add_argument("--vectors", type=int, default=10_000_000)
    s.add_argument("--noise", type=float, default=0.3)
    s.add_argument("--m", type=int, default=16, help="HNSW links per node (16 fits 8 GB)")
    s.add_argument("--ef-construction", type=int, default=64)
    s.add_argument("--ef-search", type=int, default=128,
                   help="candidates per query (search-time: --queries-only can try others)")
    s.add_argument("--checkpoint-every", type=int, default=1_000_000)
    s.add_argument("--queries-only", action="store_true",
                   help="measure an existing synthetic.faiss again (e.g. on a quiet machine)")
    r.add_argument("--queries-only", action="store_true",
                   help="measure the index built by an earlier run again (e.g. on a quiet machine)")
    for p in (r, s):
        p.add_argument("--work", default=str(Path(tempfile.gettempdir()) / "bench-index"))
        p.add_argument("--queries", type=int, default=1000)
    a = ap.parse_args()
    real(a) if a.part == "real" else synthetic(a)


if __name__ == "__main__":
    main()
