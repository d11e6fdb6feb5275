"""Full-size model throughput on CUDA (fp32 with TF32 off, and fp16), random weights.

    python benchmarks/bench_gpu.py --batch 256 [--length 25]
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_bilm import random_checkpoint, sentences
from elmo_engine import runtime
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.checkpoint import load_checkpoint


def main():
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--length", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    runtime.configure()                          # strict float32: no TF32 on the GPU
    with tempfile.TemporaryDirectory() as tmp:
        path = random_checkpoint("original", Path(tmp))
        sents = sentences(args.batch, args.length)
        n_tok = sum(len(s) for s in sents)
        outs = {}
        for precision in ["fp32", "fp16"]:
            emb = Embedder(load_checkpoint(path), device="cuda", precision=precision,
                           token_budget=10 ** 7, max_batch_rows=args.batch)
            emb.embed(sents[:8])
            best = float("inf")
            for _ in range(args.repeats):
                emb.clear_cache()
                torch.cuda.synchronize()
                t0 = time.perf_counter()
                outs[precision] = emb.embed(sents)
                torch.cuda.synchronize()
                best = min(best, time.perf_counter() - t0)
            print(f"{precision}: {n_tok / best:,.0f} tokens/s (batch {args.batch}, {n_tok} tokens)")
        cpu = Embedder(load_checkpoint(path), device="cpu").embed(sents[:4])
        diff = max(float(np.abs(a - b).max()) for a, b in zip(cpu, outs["fp32"][:4]))
        half = max(float(np.abs(a - b).max()) for a, b in zip(outs["fp32"], outs["fp16"]))
        print(f"max |cuda fp32 - cpu fp32| = {diff:.2e}; max |fp16 - fp32| = {half:.2e}")


if __name__ == "__main__":
    main()
