"""The top-k curve of ``units rank``: its probes fitted one at a time against one batch per k.

For each ranking and each k the curve fits 2 × (1 + seeds) small softmax probes (each method's
top k units, then k random units per seed). :func:`elmo_engine.analysis.units.rank.rank_units`
fits those of one k as one batch (one batched GEMM per Adam step); the baseline, timed in the
same run on the same data, fits them one at a time (``RankSettings(batched=False)``), which is
what the ranking did before. Synthetic standardised states (``--rows`` labelled words, 4
classes, ``--width`` units, 4 keys), k = 1, 4, 16, 64 (and 256 when wide enough); the held-out
accuracies of the two must be equal (printed).

    python benchmarks/bench_units_curve.py [--rows 6000] [--width 256] [--threads 1]
"""
from __future__ import annotations

import argparse
import dataclasses
import os
import time

import numpy as np
import torch

from hostinfo import host_line

from elmo_engine.analysis.units import rank as rank_mod
from elmo_engine.analysis.units.collect import UnitData



def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=6000)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(host_line())
    g = np.random.default_rng(0)
    labels = g.integers(0, 4, args.rows)
    states = {(layer, d, "c"): (g.standard_normal((args.rows, args.width))
                                + labels[:, None] * (g.random(args.width) > 0.9)).astype(np.float16)
              for layer in (0, 1) for d in (0, 1)}
    data = UnitData(states, labels, ("a", "b", "c", "d"), np.arange(args.rows) // 10)
    ks = tuple(k for k in (1, 4, 16, 64, 256) if k <= args.width)
    st = rank_mod.RankSettings(ks=ks)
    times, curves = {}, {}
    for name in ("one at a time", "batched", "one at a time ", "batched "):   # alternated
        t = time.perf_counter()
        res = rank_mod.rank_units(data, dataclasses.replace(
            st, batched=name.startswith("batched")))
        times.setdefault(name.strip(), []).append(time.perf_counter() - t)
        curves[name.strip()] = [(p.top, p.random) for r in res for p in r.curve]
    base, new = min(times["one at a time"]), min(times["batched"])
    print(f"{args.rows:,} rows × {args.width} units, 4 keys, k = {ks}, {st.seeds} seeds; "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"ranking with its curve, best of 2: one at a time {base:.2f} s, batched {new:.2f} s "
          f"= {base / new:.2f}×; held-out accuracies equal: "
          f"{curves['one at a time'] == curves['batched']}")


if __name__ == "__main__":
    main()
