"""Speed of the language-model views on the full-size model, against a baseline in the same run.

* predictions of one 25-token sentence with a 793,471-word synthetic softmax (the published
  original's shapes, W in float16 as :mod:`elmo_engine.model.softmax` keeps it), top-10 for both
  directions plus the substitutes: ours (:func:`~elmo_engine.analysis.language_model.predict`,
  one chunked pass over the vocabulary) vs a dense baseline (W as float32, the whole (2n+2, V)
  logit matrix, ``log_softmax`` and ``topk``); target ≤ 1 s on 2 cores;
* the reach matrix of a 25-token sentence on a random-weight model of the original's shapes
  (options 4096/512): ours (the 26 variants in one batch) vs the baseline of one embedder call
  per variant; target ≤ 2 s.

    python benchmarks/bench_lm.py [--threads 2 1] [--repeats 2] [--vocab 793471]

Each figure is the median of ``--repeats`` runs after a warm-up, for each thread count given (on
a machine shared with other jobs two intra-op threads can be much slower than one: every small
parallel operation waits for a descheduled thread); the load average is printed beside them.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_bilm import WORDS, random_checkpoint
from hostinfo import host_line

from elmo_engine import runtime
from elmo_engine.analysis.language_model import predict, reach
from elmo_engine.analysis.language_model.states import framed_layers, lm_rows
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.softmax import Softmax


def timed(fn, repeats: int) -> float:
    fn()                                                             # warm-up
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def dense_baseline(emb, soft, sent, w32):
    layers = framed_layers(emb, [sent])
    fwd, bwd = lm_rows(layers, 0, len(sent), emb.opts.output_dim)
    h = torch.cat([fwd, bwd])
    logits = torch.addmm(soft.b, h, w32.t())                         # (2n+2, V) float32
    logp = torch.log_softmax(logits, 1)
    top = logp.topk(10, 1)
    n = len(sent)
    pair = logp[:n] + logp[n + 2:2 * n + 2]
    return top, torch.log_softmax(pair, 1).topk(10, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--vocab", type=int, default=793_471)
    ap.add_argument("--parts", nargs="+", choices=["predictions", "reach"],
                    default=["predictions", "reach"], help="what to time (default both)")
    args = ap.parse_args()
    runtime.configure()
    print(host_line())
    rng = np.random.default_rng(0)
    sent = [str(w) for w in rng.choice(WORDS, 25)]
    with tempfile.TemporaryDirectory() as tmp:
        model = load_checkpoint(random_checkpoint("original", Path(tmp)))
    emb = Embedder(model, device="cpu")
    g = torch.Generator().manual_seed(0)
    w = (torch.randn(args.vocab, 512, generator=g) * 0.05).half()
    b = torch.randn(args.vocab, generator=g) * 0.1
    tokens = ["</S>", "<S>", "<UNK>"] + WORDS + [f"w{i}" for i in range(args.vocab - 3 - len(WORDS))]
    soft = Softmax(w, b, tokens)

    w32 = w.float()
    got = predict(emb, soft, [sent], top_k=10)[0]
    (_, tf), _ = dense_baseline(emb, soft, sent, w32)
    same = all(r.top[0].word == tokens[int(i)] for r, i in zip(got.forward, tf[:25, 0]))
    variants = [sent[:j] + ["<UNK>"] + sent[j + 1:] for j in range(len(sent))]

    def one_by_one():
        emb.clear_cache()
        return [emb.embed([v]) for v in [sent] + variants]

    for threads in args.threads:
        torch.set_num_threads(threads)
        load = "/".join(f"{x:.1f}" for x in os.getloadavg())
        if "predictions" in args.parts:
            ours = timed(lambda: predict(emb, soft, [sent], top_k=10), args.repeats)
            base = timed(lambda: dense_baseline(emb, soft, sent, w32), args.repeats)
            print(f"[{threads} thread(s), load {load}] predictions, 25 tokens, V = "
                  f"{args.vocab:,}, top-10 both directions + substitutes: {ours:.2f} s (target "
                  f"<= 1 s on 2 cores); dense float32 baseline {base:.2f} s "
                  f"(+{args.vocab * 512 * 4 / 2**30:.1f} GiB for W in float32); ratio "
                  f"{base / ours:.2f}x; same top-1 as the baseline: {same}", flush=True)
        if "reach" not in args.parts:
            continue
        ours_r = timed(lambda: reach(emb, sent), args.repeats)
        base_r = timed(one_by_one, args.repeats)
        print(f"[{threads} thread(s)] reach matrix, 25 tokens, full-size model (4096/512): "
              f"{ours_r:.2f} s (target <= 2 s); one embedder call per variant {base_r:.2f} s; "
              f"ratio {base_r / ours_r:.2f}x", flush=True)


if __name__ == "__main__":
    main()
