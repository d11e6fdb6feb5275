"""Full-size model throughput on CUDA: eager against CUDA graphs, in fp32 (TF32 off), bf16 and
fp16, for 256 / 1,024 / 4,096 sentences, with the share of the GPU's measured GEMM ceiling and
the largest difference from the CPU's float32 vectors.

    python benchmarks/bench_gpu.py [--sentences 256 1024 4096] [--length 25] [--repeats 3]

Random weights of the published original size (``bench_bilm.random_checkpoint``). Each
configuration embeds the sentences once to warm up (and, with graphs, to capture each shape
bucket), then the best of ``--repeats`` timed runs with every cache emptied; eager and graphs
get the same batch size, chosen from free GPU memory
(``elmo_engine.model.lstm_graphs.gpu_batch_rows``, at most 4,096 rows).
"max |Δ| vs CPU fp32" compares the first ``--check`` sentences with the CPU's float32 embedder
(the engine's conformance reference). Needs a CUDA device: without one it says so and exits 2.
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

import hostinfo
from hostinfo import DTYPES
from bench_bilm import random_checkpoint, sentences
from elmo_engine import runtime
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.checkpoint import load_checkpoint
from elmo_engine.model.flops import flops_per_token
from elmo_engine.model.lstm_graphs import GPU_BATCH_STEPS, gpu_batch_rows


def timed(emb: Embedder, sents, repeats: int):
    """(best seconds, vectors) of ``emb.embed(sents)`` with the caches emptied each time."""
    best, out = float("inf"), None
    for _ in range(repeats):
        emb.clear_cache()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = emb.embed(sents)
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t0)
    return best, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sentences", type=int, nargs="+", default=[256, 1024, 4096])
    ap.add_argument("--length", type=int, default=25)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16", "fp16"],
                    choices=("fp32", "bf16", "fp16"))
    ap.add_argument("--check", type=int, default=32, help="sentences compared with the CPU")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_gpu.py needs a CUDA device; torch sees none "
              f"(torch {torch.__version__}, CUDA build: {torch.version.cuda or 'no'})",
              file=sys.stderr)
        return 2
    runtime.configure()                          # strict float32: no TF32 on the GPU
    print(hostinfo.host_line())
    print(f"GPU: {torch.cuda.get_device_name(0)}; GEMM ceiling (2048² mm): " + ", ".join(
        f"{p} {hostinfo.ceiling(p, 'cuda'):.0f} GFLOP/s" for p in args.precisions), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = random_checkpoint("original", Path(tmp))
        opts = load_checkpoint(path).opts
        per_token = flops_per_token(opts).total
        pool = sentences(max(args.sentences), args.length)
        check = pool[:args.check]
        reference = Embedder(load_checkpoint(path), device="cpu").embed(check)
        free, _ = torch.cuda.mem_get_info()         # the same batch for eager and graphs
        rows = {p: gpu_batch_rows(opts, GPU_BATCH_STEPS, DTYPES[p].itemsize, free)
                for p in args.precisions}
        print(f"{'sentences':>9s} {'precision':>9s} {'loop':>7s} {'tokens/s':>11s} "
              f"{'rows':>5s} {'share':>26s}  max |Δ| vs CPU fp32")
        for n in args.sentences:
            sents = pool[:n]
            n_tok = sum(len(s) for s in sents)
            for precision in args.precisions:
                for graphs in (False, True):
                    emb = Embedder(load_checkpoint(path), device="cuda", precision=precision,
                                   cuda_graphs=graphs, max_batch_rows=rows[precision],
                                   token_budget=rows[precision] * GPU_BATCH_STEPS)
                    emb.embed(sents)                          # warm-up and graph capture
                    seconds, _ = timed(emb, sents, args.repeats)
                    emb.clear_cache()
                    got = emb.embed(check)
                    diff = max(float(np.abs(a - b).max()) for a, b in zip(reference, got))
                    share = hostinfo.share_line(per_token * n_tok, seconds, precision, "cuda")
                    runner = emb.model.lstm.graphs
                    failed = f" (capture failed: {len(runner.failed())})" \
                        if runner is not None and runner.failed() else ""
                    print(f"{n:9d} {precision:>9s} {'graphs' if graphs else 'eager':>7s} "
                          f"{n_tok / seconds:11,.0f} {emb.max_batch_rows:5d} "
                          f"{share.split(' (')[0]:>26s}  {diff:.2e}{failed}", flush=True)
                    del emb
                    torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
