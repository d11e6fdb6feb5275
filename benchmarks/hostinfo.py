"""What every benchmark prints about its host: the CPU, its bf16 units, torch's SIMD level, the
threads, and the measured matrix-multiply rates in float32 and bf16 (the ceilings that tokens/s
are compared with). Imported by the benchmarks in this folder (``import hostinfo``)."""
from __future__ import annotations

import time
from typing import Iterable, Tuple

import torch

from elmo_engine import runtime

#: a square GEMM big enough to reach the cores' rate and small enough to time in a second
SQUARE = ((2048, 2048, 2048),)


def host_line() -> str:
    """One line: CPU model, flags (avx512f / avx512_bf16 / amx_bf16), torch capability, bf16
    units, torch version and threads."""
    cpu = runtime.cpu_bf16()
    return (f"host: {cpu.describe()}; torch {torch.__version__}, "
            f"{torch.get_num_threads()} threads")


def gemm_rate(dtype: torch.dtype = torch.float32,
              shapes: Iterable[Tuple[int, int, int]] = SQUARE, repeats: int = 7) -> float:
    """The best GFLOP/s of ``torch.mm`` in ``dtype`` over ``shapes`` ((m, k, n) each), the
    minimum time of ``repeats`` (a shared machine's noise only slows a run down)."""
    best = 0.0
    gen = torch.Generator().manual_seed(0)
    for m, k, n in shapes:
        a = torch.randn(m, k, generator=gen).to(dtype)
        b = torch.randn(k, n, generator=gen).to(dtype)
        a @ b
        t_min = float("inf")
        for _ in range(repeats):
            t = time.perf_counter()
            a @ b
            t_min = min(t_min, time.perf_counter() - t)
        best = max(best, 2 * m * k * n / t_min / 1e9)
    return best


def rates_line(shapes: Iterable[Tuple[int, int, int]] = SQUARE) -> Tuple[str, float, float]:
    """(line, fp32 GFLOP/s, bf16 GFLOP/s or 0 where the CPU has no bf16 units)."""
    shapes = list(shapes)
    fp32 = gemm_rate(torch.float32, shapes)
    bf16 = gemm_rate(torch.bfloat16, shapes) if runtime.cpu_bf16().offered else 0.0
    where = "2048² mm" if shapes == list(SQUARE) else f"mm on {len(shapes)} shapes"
    line = f"measured GEMM rate ({where}): float32 {fp32:.0f} GFLOP/s"
    line += (f", bf16 {bf16:.0f} GFLOP/s ({bf16 / fp32:.1f}x)" if bf16
             else ", bf16 not measured (no bf16 units)")
    return line, fp32, bf16
