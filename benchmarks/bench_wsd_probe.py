"""Word-sense probe training: the row-wise Adam heads against the sparse-embedding baseline.

Issue 15 asks for SemCor → Senseval-2 in at most 5 minutes on 2 cores, embedding included.
Training the per-layer heads is the part that grows with SemCor's ~30,000 senses. This script
builds SemCor's real candidate structure (WordNet candidates of every instance, the dev split
the probe command holds out) with random vectors in place of the biLM's — the cost of a step
does not depend on the values — and times one epoch of the three per-layer heads two ways:

* baseline: the class weights as an ``nn.Embedding(sparse=True)`` gathered per candidate and
  ``torch.optim.SparseAdam`` (the previous implementation);
* ``Heads`` + ``RowAdam``: the distinct candidate rows of a batch gathered once from a
  ``(C, H, E+1)`` table, each example scored against its own candidates by sampled matrix
  products (``probes/sampled.py``: no weight row copied per candidate), and the rows updated
  with the same Adam arithmetic.

Both see the same batches; the script prints seconds per epoch, the ratio, and the largest
difference between the two tables after the epoch (the same training up to rounding).

    python benchmarks/bench_wsd_probe.py [--threads 2] [--steps N]

Needs ``../shared/data`` (SemCor, SemEval-2007, WordNet).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared" / "data"


class SparseBaseline(torch.nn.Module):
    """The previous heads: a sparse embedding of rows ``H·(E+1)`` gathered per candidate."""

    def __init__(self, table: torch.Tensor):
        super().__init__()
        c, h, e1 = table.shape
        self.h, self.e1 = h, e1
        self.emb = torch.nn.Embedding(c + 1, h * e1, sparse=True)      # last row: padding
        with torch.no_grad():
            self.emb.weight.zero_()
            self.emb.weight[:c] = table.reshape(c, -1)

    def forward(self, x, cand):
        h, b, _ = x.shape
        idx = torch.where(cand >= 0, cand, self.emb.num_embeddings - 1)
        wc = self.emb(idx).view(b, idx.shape[1], h, self.e1)
        xa = torch.cat([x, x.new_ones(h, b, 1)], dim=2)
        return torch.einsum("hbe,bmhe->hbm", xa, wc).masked_fill(cand[None] < 0, -1e9)


class RandomVectors:
    """Stands in for the biLM: ``embed`` gives random ``(3, n, 512)`` vectors per sentence."""

    def __init__(self, seed: int = 0):
        self.rng = np.random.default_rng(seed)

    def embed(self, sentences):
        return [self.rng.standard_normal((3, len(s), 512), dtype=np.float32) for s in sentences]


def semcor_split():
    from elmo_engine.analysis.probes.features import split_off, wsd_examples
    from elmo_engine.analysis.probes.runner import Encoder
    from elmo_engine.analysis.probes.tasks import TaskFiles, load_task_data

    sc, se = SHARED / "semcor30", SHARED / "wsd_eval_raganato2017" / "semeval2007"
    files = TaskFiles("wsd", sc / "semcor.data.xml.gz", se / "semeval2007.data.xml", None,
                      sc / "semcor.gold.key.txt.gz", se / "semeval2007.gold.key.txt")
    for f in (files.train, files.test, files.train_keys, files.test_keys):
        if not f.is_file():
            sys.exit(f"needs {f} (../shared/data beside the checkout)")
    data = load_task_data(files)
    train, _ = split_off(data["train"], 0.1, 0)
    ex = wsd_examples(RandomVectors(), train, first_sense_fn=data["first_sense_fn"])
    enc = Encoder(ex, restricted=True)
    return enc.split(ex, "cpu"), len(enc.classes)


def epoch(model, opts, split, norm, batches):
    """Seconds for the training steps of ``batches`` (the probe's own step)."""
    from elmo_engine.analysis.probes.classifiers import train_step

    t0 = time.perf_counter()
    for idx in batches:
        train_step(model, opts, split, idx, norm, 3)
    return time.perf_counter() - t0


def main() -> int:
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=None, help="steps to time (default: one epoch)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from elmo_engine.analysis.probes.classifiers import Heads, Normaliser, RowAdam, _batches

    t0 = time.perf_counter()
    split, n_classes = semcor_split()
    norm = Normaliser(split.x.numpy())
    batches = _batches(split, 1024, torch.Generator().manual_seed(0))
    steps = args.steps or len(batches)
    width = (split.cand >= 0).sum(dim=1)
    print(f"SemCor training split: {len(split)} instances, {n_classes} senses, "
          f"{steps} steps of ≤ 1024 (mean candidates {float(width.float().mean()):.1f}); "
          f"built in {time.perf_counter() - t0:.0f} s, torch threads {args.threads}")
    heads = Heads(3, 512, n_classes, seed=0, restricted=True)
    base = SparseBaseline(heads.table.detach().clone())
    t_base = epoch(base, [torch.optim.SparseAdam(list(base.parameters()), lr=1e-3)], split, norm,
                   batches[:steps])
    t_new = epoch(heads, [RowAdam(heads, lr=1e-3)], split, norm, batches[:steps])
    got = heads.table.reshape(n_classes, -1)
    diff = float((got - base.emb.weight.detach()[:n_classes]).abs().max())
    print(f"baseline (sparse embedding + SparseAdam): {t_base:7.1f} s")
    print(f"Heads (sampled products) + RowAdam     : {t_new:7.1f} s   "
          f"ratio {t_base / t_new:.2f}×   max |Δ table| {diff:.1e}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
