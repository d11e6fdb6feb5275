"""One unit over a corpus (the Units view's *Unit* tab and ``units top``): the step path run
for every layer and both directions (``inspect``) against only what the unit needs
(``inspect(…, states_only=True)``: its direction, up to its layer), on the bundled model over
the first ``--tokens`` words of the reference corpus, in the same process, alternating.

    python benchmarks/bench_unit_values.py [--tokens 30000] [--threads 2] [--rounds 2]

Prints the host, the best time of each way per unit (layer 0 forward, layer 1 backward), the
ratio, and the largest difference between the two ways' values (they are the same states).
docs/performance.md ("Units") has the numbers.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]


def values(model, sentences, layer: int, direction: int, unit: int, vectors,
           states_only: bool) -> np.ndarray:
    """The unit's value at every word, 64 sentences a batch (as ``unit_values`` batches)."""
    from elmo_engine.analysis.units.contexts import BATCH
    from elmo_engine.model.lstm_inspect import Capture, StateKind, framed_tokens, inspect

    out = []
    for start in range(0, len(sentences), BATCH):
        chunk = [list(s) for s in sentences[start:start + BATCH]]
        tok, lengths = framed_tokens(model, chunk, vectors)
        res = inspect(model, tok, lengths, Capture(kinds=(StateKind.C,), layers=(layer,),
                                                   directions=(direction,),
                                                   dtype=torch.float32),
                      states_only=states_only)
        held = res.states[(layer, direction, StateKind.C)][:, :, unit].numpy()     # (B, T)
        out += [held[r, 1:len(s) + 1] for r, s in enumerate(chunk)]
    return np.concatenate(out)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tokens", type=int, default=30_000)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostinfo

    from elmo_engine import runtime
    from elmo_engine.analysis.layers import reference_corpus_path
    from elmo_engine.analysis.units.corpus import read_units_corpus
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.checkpoint import load_checkpoint

    runtime.configure()
    torch.set_num_threads(args.threads)
    print(hostinfo.host_line())
    model = load_checkpoint(REPO / "resources" / "demo_model").eval()
    vectors = Embedder(model, device="cpu").token_vectors
    corpus = read_units_corpus(reference_corpus_path(), args.tokens)
    sents = corpus.sentences
    n = sum(len(s) for s in sents)
    print(f"the bundled model, {n:,} words of the reference corpus, {args.threads} threads, "
          f"best of {args.rounds} alternating rounds")
    values(model, sents[:64], 0, 0, 0, vectors, True)                 # warm up (packing)
    for layer, direction in ((0, 0), (1, 1)):
        best = {False: float("inf"), True: float("inf")}
        got = {}
        for _ in range(args.rounds):
            for states_only in (False, True):
                t0 = time.perf_counter()
                got[states_only] = values(model, sents, layer, direction, 7, vectors,
                                          states_only)
                best[states_only] = min(best[states_only], time.perf_counter() - t0)
        diff = float(np.abs(got[True] - got[False]).max())
        name = f"layer {layer} {('forward', 'backward')[direction]}"
        print(f"{name:>18}: every layer and direction {best[False]:6.2f} s, what the unit "
              f"needs {best[True]:6.2f} s, {best[False] / best[True]:.2f}x; "
              f"{n / best[True]:,.0f} words/s; largest difference {diff:.1e}")


if __name__ == "__main__":
    main()
