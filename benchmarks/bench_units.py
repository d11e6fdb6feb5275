"""Speed of the Units analyses (issue 40) on the bundled model.

* ranking 100k labelled tokens: the cell and projected-output states of every layer and
  direction gathered on the step path (:func:`elmo_engine.analysis.units.collect`), then
  ranked by the elastic net and the class-mean difference (:func:`~elmo_engine.analysis.units.
  rank_units`, no top-k curve); target ≤ 1 min on 2 cores. Labels: UPOS of UD English EWT's
  train split from ``../shared/data`` beside the checkout when it is there, else the bundled
  demo POS task (21.7k tokens) repeated up to the count, which the output says;
* one intervention re-measure of the 90 bundled minimal pairs: 16 cell units of the top layer
  zeroed in both directions, both LMs scored (:func:`~elmo_engine.analysis.units.
  pair_accuracy`); target ≤ 10 s.

    python benchmarks/bench_units.py [--tokens 100000] [--threads 2] [--repeats 3]

Each figure is the median of ``--repeats`` runs (the ranking: one run, it is long); the load
average is printed beside them (a shared machine slows every figure down).
"""
from __future__ import annotations

import argparse
import itertools
import os
import statistics
import sys
import time
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
EWT = REPO.parent / "shared" / "data" / "ud_english_ewt" / "en_ewt-ud-train.conllu.gz"


def labelled(tokens: int):
    from elmo_engine.io.datasets.conllu import read_conllu
    from elmo_engine.io.datasets.demo import load_demo_task

    if EWT.is_file():
        source, sents = "UD English EWT train, UPOS", read_conllu(EWT, label="upos")
    else:
        source = "the bundled demo POS task (repeated): EWT not found beside the checkout"
        sents = itertools.cycle(load_demo_task("pos", "train"))
    out, count = [], 0
    for s in sents:
        out.append(s)
        count += len(s.targets())
        if count >= tokens:
            break
    return source, out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=100_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostinfo

    from elmo_engine import runtime
    from elmo_engine.analysis.language_model.pairs import bundled_pairs, read_pairs
    from elmo_engine.analysis.units.ablate import pair_accuracy
    from elmo_engine.analysis.units.collect import collect
    from elmo_engine.analysis.units.rank import RankSettings, rank_units
    from elmo_engine.analysis.units.ablate import ablate
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.model.lstm_inspect import StateKind
    from elmo_engine.model.softmax import load_softmax

    runtime.configure()
    torch.set_num_threads(args.threads)
    print(hostinfo.host_line())
    folder = REPO / "resources" / "demo_model"
    model = load_checkpoint(folder).eval()
    softmax = load_softmax(folder, output_dim=model.opts.output_dim)
    vectors = Embedder(model, device="cpu").token_vectors
    source, sents = labelled(args.tokens)

    t = time.perf_counter()
    data = collect(model, sents, [StateKind.C, StateKind.H], max_tokens=args.tokens,
                   token_vectors=vectors)
    t_collect = time.perf_counter() - t
    t = time.perf_counter()
    rank_units(data, RankSettings(ks=()))
    t_rank = time.perf_counter() - t
    print(f"ranking {len(data):,} tokens ({source}; c and h of {model.opts.n_layers} layers × 2 "
          f"directions, {len(data.states)} rankings × 2 methods): states {t_collect:.1f} s + "
          f"ranking {t_rank:.1f} s = {t_collect + t_rank:.1f} s (target ≤ 60 s); load "
          f"{os.getloadavg()[0]:.1f}")

    pairs = [q for f in bundled_pairs() for q in read_pairs(f)]
    top = model.opts.n_layers - 1
    ivs = ablate(top, StateKind.C, {0: range(16), 1: range(16)})
    pair_accuracy(model, softmax, pairs[:4], ivs, vectors)             # warm-up
    times = []
    for _ in range(args.repeats):
        t = time.perf_counter()
        acc = pair_accuracy(model, softmax, pairs, ivs, vectors)
        times.append(time.perf_counter() - t)
    print(f"one intervention re-measure of {len(pairs)} minimal pairs (16 cells zeroed per "
          f"direction): {statistics.median(times):.2f} s median of {args.repeats} (target ≤ "
          f"10 s); accuracy {', '.join(f'{v:.3f}' for v in acc.overall)}; load "
          f"{os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
