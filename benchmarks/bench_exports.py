"""Speed of the vector exports and of saving/loading a workspace (run by hand).

Random activations shaped like the published original model's (3 layers × 1024 values per token)
are exported in every format; prints seconds, tokens/s, MB written and each format's time
relative to npz. Then a workspace of many sentences is saved and loaded.

    python benchmarks/bench_exports.py [--sentences 500] [--tokens 20] [--dim 1024]
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elmo_engine.io.vectors import LayerChoice, export_vectors
from elmo_engine.io.workspace_file import (WorkspaceData, load_workspace,
                                           save_workspace)


def size_mb(path: Path) -> float:
    files = path.rglob("*") if path.is_dir() else [path]
    return sum(f.stat().st_size for f in files if f.is_file()) / 1e6


def main() -> None:
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=500)
    ap.add_argument("--tokens", type=int, default=20)
    ap.add_argument("--dim", type=int, default=1024)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    toks = [[f"w{i}_{j}" for j in range(args.tokens)] for i in range(args.sentences)]
    acts = [rng.standard_normal((3, args.tokens, args.dim)).astype(np.float32) for _ in toks]
    n = args.sentences * args.tokens
    out = Path(tempfile.mkdtemp(prefix="bench-exports-"))
    try:
        times = {}
        print(f"{n:,} tokens × 3 layers × {args.dim} values")
        for fmt, name, mode in (("npz", "a.npz", "each"), ("hdf5", "a.hdf5", "each"),
                                ("npz", "top.npz", "top"), ("tsv", "tsv", "top"),
                                ("csv", "top.csv", "top")):
            t = time.perf_counter()
            export_vectors(out / name, toks, acts, fmt, LayerChoice(mode))
            dt = time.perf_counter() - t
            times[(fmt, mode)] = dt
            print(f"  {fmt:5s} {mode:5s} {dt:6.2f} s  {n / dt:10,.0f} tokens/s  "
                  f"{size_mb(out / name):7.1f} MB  ×{dt / times[('npz', 'each' if mode == 'each' else 'top')]:.1f} npz")
        data = WorkspaceData(sentences=[" ".join(t) for t in toks] * 20,
                             views={"contexts": {"weights": [0.2, 0.3, 0.5]}})
        t = time.perf_counter()
        save_workspace(out / "w.elmows.json", data)
        t_save = time.perf_counter() - t
        t = time.perf_counter()
        load_workspace(out / "w.elmows.json")
        t_load = time.perf_counter() - t
        print(f"workspace of {len(data.sentences):,} sentences: save {t_save * 1000:.0f} ms, "
              f"load {t_load * 1000:.0f} ms, {size_mb(out / 'w.elmows.json'):.1f} MB")
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
