"""Contextual nearest-neighbour queries over 100,000 reference tokens: index vs naive.

The index (``elmo_engine.neighbours.NeighbourIndex``) keeps L2-normalised float32 halves and takes
the top k with ``np.argpartition``; the naive baseline normalises the float64 matrix at query time
and sorts every score. Vectors are random with the width 2P of the demo model (or the shared
fixture model when the demo model is absent, or ``--dim``).

    python benchmarks/bench_neighbours.py [--tokens 100000] [--queries 50] [--k 10] [--dim 2P]
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from elmo_engine.neighbours import NeighbourIndex


def model_width() -> tuple:
    """(2P, where it came from): the demo model's, else the shared fixture's."""
    try:
        from elmo_engine.resources import demo_checkpoint_path
        folder = Path(demo_checkpoint_path())
        for name in ("bilm.json", "options.json"):
            f = folder / name
            if f.is_file():
                cfg = json.loads(f.read_text(encoding="utf-8"))
                lstm = cfg.get("options", cfg)["lstm"]
                return 2 * int(lstm["projection_dim"]), f"demo model ({folder})"
    except (ImportError, OSError, KeyError, ValueError):
        pass
    fixture = Path(__file__).resolve().parents[2] / "shared/fixtures/elmo/allennlp/options.json"
    if fixture.is_file():
        p = json.loads(fixture.read_text(encoding="utf-8"))["lstm"]["projection_dim"]
        return 2 * int(p), "shared fixture model"
    return 1024, "published ELMo width (no model found)"


def naive_query(x: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    """Normalise everything per query, score, sort all: the straightforward way."""
    xn = x / np.linalg.norm(x, axis=1, keepdims=True)
    scores = xn @ (q / np.linalg.norm(q))
    return np.argsort(-scores)[:k]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--dim", type=int, default=0, help="vector width 2P (default: the model's)")
    ap.add_argument("--layers", type=int, default=2)
    args = ap.parse_args(argv)
    dim, source = (args.dim, "--dim") if args.dim else model_width()
    rng = np.random.default_rng(0)
    sent_len = 25
    n_sent = -(-args.tokens // sent_len)
    tokens = [[f"w{(i * sent_len + j) % 5000}" for j in range(sent_len)] for i in range(n_sent)]
    n = n_sent * sent_len
    layers = [rng.normal(size=(n, dim)).astype(np.float32) for _ in range(args.layers)]
    t0 = time.perf_counter()
    index = NeighbourIndex(tokens, layers)
    build = time.perf_counter() - t0
    x64 = layers[-1].astype(np.float64)
    queries = rng.normal(size=(args.queries, dim)).astype(np.float32)
    t0 = time.perf_counter()
    for q in queries:
        index.query(args.layers, q, k=args.k)
    fast = (time.perf_counter() - t0) / args.queries
    t0 = time.perf_counter()
    for q in queries[: max(1, args.queries // 5)]:
        naive_query(x64, q.astype(np.float64), args.k)
    slow = (time.perf_counter() - t0) / max(1, args.queries // 5)
    agree = all(
        [index.flat(nb.sentence, nb.token) for nb in index.query(args.layers, q, k=args.k)]
        == list(naive_query(x64, q.astype(np.float64), args.k)) for q in queries[:5])
    t0 = time.perf_counter()
    for q in queries:
        index.query(args.layers, q, k=args.k, direction="forward")
    fwd = (time.perf_counter() - t0) / args.queries
    print(f"reference tokens: {n:,}  width 2P = {dim} ({source}), k = {args.k}")
    print(f"index build (normalise halves): {build * 1e3:8.1f} ms")
    print(f"query, both halves:             {fast * 1e3:8.2f} ms")
    print(f"query, forward half:            {fwd * 1e3:8.2f} ms")
    print(f"naive (normalise + full sort):  {slow * 1e3:8.2f} ms")
    print(f"speed-up vs naive: {slow / fast:.1f}x   same top-{args.k} as naive: {agree}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
