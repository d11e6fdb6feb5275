"""Speed of the language-model views on the full-size model, against a baseline in the same run.

* predictions of one 25-token sentence with a 793,471-word synthetic softmax (the published
  original's shapes, W in float16 as :mod:`elmo_engine.model.softmax` keeps it), top-10 for both
  directions plus the substitutes: ours (:func:`~elmo_engine.analysis.language_model.predict`,
  one chunked pass over the vocabulary) vs a dense baseline (W as float32, the whole (2n+2, V)
  logit matrix, ``log_softmax`` and ``topk``); target ≤ 1 s on 2 cores;
* the reach matrix of a 25-token sentence on a random-weight model of the original's shapes
  (options 4096/512): ours (the 26 variants in one batch) vs the baseline of one embedder call
  per variant; target ≤ 2 s.

    python benchmarks/bench_lm.py [--threads 2] [--repeats 3] [--vocab 793471]
"""
from __future__ import annotations

import argparse
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

from bench_bilm import WORDS, random_checkpoint  # noqa: E402
from bench_lm_softmax import host  # noqa: E402

from elmo_engine import runtime  # noqa: E402
from elmo_engine.analysis.language_model import predict, reach  # noqa: E402
from elmo_engine.analysis.language_model.states import framed_layers, lm_rows  # noqa: E402
from elmo_engine.embed.embedder import Embedder  # noqa: E402
from elmo_engine.model.checkpoint import load_checkpoint  # noqa: E402
from elmo_engine.model.softmax import Softmax  # noqa: E402


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
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=793_471)
    args = ap.parse_args()
    runtime.configure()
    torch.set_num_threads(args.threads)
    print(f"host: {host()}; torch {torch.__version__}, {args.threads} threads")
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

    ours = timed(lambda: predict(emb, soft, [sent], top_k=10), args.repeats)
    w32 = w.float()
    base = timed(lambda: dense_baseline(emb, soft, sent, w32), args.repeats)
    del w32
    got = predict(emb, soft, [sent], top_k=10)[0]
    (tf, _), _ = dense_baseline(emb, soft, sent, w.float())
    same = all(r.top[0].word == tokens[int(i)] for r, i in zip(got.forward, tf[:25, 0]))
    print(f"predictions, 25 tokens, V = {args.vocab:,}, top-10 both directions + substitutes: "
          f"{ours:.2f} s (target <= 1 s); dense float32 baseline {base:.2f} s "
          f"(+{args.vocab * 512 * 4 / 2**30:.1f} GiB for W in float32); ratio "
          f"{base / ours:.2f}x; same top-1: {same}")

    ours_r = timed(lambda: reach(emb, sent), args.repeats)
    variants = [sent[:j] + ["<UNK>"] + sent[j + 1:] for j in range(len(sent))]

    def one_by_one():
        emb.clear_cache()
        return [emb.embed([v]) for v in [sent] + variants]

    base_r = timed(one_by_one, args.repeats)
    print(f"reach matrix, 25 tokens, full-size model (4096/512): {ours_r:.2f} s (target <= 2 s); "
          f"one embedder call per variant {base_r:.2f} s; ratio {base_r / ours_r:.2f}x")


if __name__ == "__main__":
    main()
