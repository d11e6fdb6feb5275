"""Contextual nearest-neighbour queries over 100,000 reference tokens: index vs naive.

The index (``elmo_engine.analysis.contexts.neighbours.NeighbourIndex``) keeps L2-normalised float32
halves and takes the top k with ``np.argpartition``; the naive baseline normalises the float64
matrix at query time and sorts every score. Vectors are random with the width 2P of the demo model
(or the shared fixture model when the demo model is absent, or ``--dim``); with ``--corpus FILE``
they are the real activations of the first ``--tokens`` tokens of a text file (one sentence or
paragraph per line), embedded by ``--checkpoint`` (default: the demo model, else the shared fixture
model), and the build time includes embedding.

    python benchmarks/bench_neighbours.py [--tokens 100000] [--queries 50] [--k 10] [--dim 2P]
    python benchmarks/bench_neighbours.py --corpus ../shared/data/wikitext2_eval/wiki.valid.tokens
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from elmo_engine.analysis.contexts.neighbours import NeighbourIndex


def default_checkpoint() -> Path:
    """The demo model's folder, else the shared fixture model's."""
    from elmo_engine.resources import demo_checkpoint_available, demo_checkpoint_path
    if demo_checkpoint_available():
        return Path(demo_checkpoint_path())
    return Path(__file__).resolve().parents[1] / "tests/fixtures/elmo/allennlp"


def real_index(path: str, checkpoint: str, n_tokens: int):
    """Embed the first ``n_tokens`` tokens of a text file and index them; (index, seconds)."""
    from elmo_engine import runtime

    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.analysis.contexts.neighbour_corpus import build_index, read_corpus

    runtime.configure(threads=1)
    sents, total = [], 0
    for s in read_corpus(path, split_sentences=False, max_tokens=10 ** 8).sentences:
        s = s[: n_tokens - total]
        sents.append(s)
        total += len(s)
        if total >= n_tokens:
            break
    emb = Embedder(load_checkpoint(checkpoint or default_checkpoint()), device="cpu")
    t0 = time.perf_counter()
    index = build_index(emb, sents)
    return index, time.perf_counter() - t0


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
    fixture = Path(__file__).resolve().parents[1] / "tests/fixtures/elmo/allennlp/options.json"
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
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--dim", type=int, default=0, help="vector width 2P (default: the model's)")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--corpus", help="embed this text file instead of random vectors")
    ap.add_argument("--checkpoint", help="with --corpus: the model (default: demo, else fixture)")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    if args.corpus:
        index, build = real_index(args.corpus, args.checkpoint, args.tokens)
        args.layers = index.n_layers - 1
        dim, source = 2 * index.fwd[0].shape[1], f"real activations of {args.corpus}"
        n = index.n_tokens
        # rebuild the raw last layer from the halves and coefficients: x / |x|
        a, b = index.coef[-1]
        x64 = np.concatenate([index.fwd[-1] * a[:, None], index.bwd[-1] * b[:, None]], 1)
        x64 = x64.astype(np.float64)
        picks = rng.choice(n, size=args.queries, replace=False)
        queries = x64[picks].astype(np.float32)
    else:
        dim, source = (args.dim, "--dim") if args.dim else model_width()
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
    what = "embed + index" if args.corpus else "normalise halves"
    print(f"index build ({what}): {build * 1e3:10.1f} ms")
    print(f"query, both halves:             {fast * 1e3:8.2f} ms")
    print(f"query, forward half:            {fwd * 1e3:8.2f} ms")
    print(f"naive (normalise + full sort):  {slow * 1e3:8.2f} ms")
    print(f"speed-up vs naive: {slow / fast:.1f}x   same top-{args.k} as naive: {agree}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
