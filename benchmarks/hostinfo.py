"""What every benchmark prints about its host: the CPU, its bf16 units, torch's SIMD level, the
threads, and the measured matrix-multiply rates in float32 and bf16 (the ceilings that tokens/s
are compared with: :func:`ceiling`, measured once per process, and :func:`ceiling_share`, which
every benchmark prints against the FLOPs it did, counted by
:func:`elmo_engine.model.flops.flops_per_token` for the biLM). Imported by the benchmarks in
this folder (``import hostinfo``)."""
from __future__ import annotations

import functools
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


#: precision names (as ``--precision`` spells them) → torch dtypes
DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def gemm_rate(dtype: torch.dtype = torch.float32,
              shapes: Iterable[Tuple[int, int, int]] = SQUARE, repeats: int = 7,
              device: str = "cpu") -> float:
    """The best GFLOP/s of ``torch.mm`` in ``dtype`` over ``shapes`` ((m, k, n) each), the
    minimum time of ``repeats`` (a shared machine's noise only slows a run down)."""
    best = 0.0
    gen = torch.Generator().manual_seed(0)
    cuda = device.startswith("cuda")
    for m, k, n in shapes:
        a = torch.randn(m, k, generator=gen).to(device=device, dtype=dtype)
        b = torch.randn(k, n, generator=gen).to(device=device, dtype=dtype)
        a @ b
        t_min = float("inf")
        for _ in range(repeats):
            if cuda:
                torch.cuda.synchronize(device)
            t = time.perf_counter()
            a @ b
            if cuda:
                torch.cuda.synchronize(device)
            t_min = min(t_min, time.perf_counter() - t)
        best = max(best, 2 * m * k * n / t_min / 1e9)
    return best


@functools.lru_cache(maxsize=None)
def ceiling(precision: str = "fp32", device: str = "cpu") -> float:
    """This host's measured GEMM ceiling in GFLOP/s: the best of 7 timed 2048² ``mm`` in
    ``precision`` ("fp32", "bf16", "fp16") on ``device``, measured once per process (the first
    call takes about a second). On a CUDA device float32 is measured as the engine runs it, with
    TF32 as :func:`elmo_engine.runtime.configure` left it (off)."""
    if precision not in DTYPES:
        raise ValueError(f"unknown precision {precision!r} (use {', '.join(DTYPES)})")
    return gemm_rate(DTYPES[precision], SQUARE, repeats=7, device=device)


def ceiling_share(flops: float, seconds: float, precision: str = "fp32",
                  device: str = "cpu") -> float:
    """The share of this host's measured GEMM ceiling (:func:`ceiling`) that ``flops`` done in
    ``seconds`` reach: 1.0 is the rate of a large square ``mm`` in that precision."""
    return flops / seconds / 1e9 / ceiling(precision, device)


def share_line(flops: float, seconds: float, precision: str = "fp32",
               device: str = "cpu") -> str:
    """``"34 % of the fp32 GEMM ceiling (140 GFLOP/s)"``: the phrase every benchmark prints."""
    share = ceiling_share(flops, seconds, precision, device)
    return (f"{100 * share:.0f} % of the {precision} GEMM ceiling "
            f"({ceiling(precision, device):.0f} GFLOP/s, 2048² mm on {device})")


def rates_line(shapes: Iterable[Tuple[int, int, int]] = SQUARE) -> Tuple[str, float, float]:
    """(line, fp32 GFLOP/s, bf16 GFLOP/s or 0 where the CPU has no bf16 units)."""
    shapes = list(shapes)
    square = shapes == list(SQUARE)
    fp32 = ceiling("fp32", "cpu") if square else gemm_rate(torch.float32, shapes)
    bf16 = 0.0
    if runtime.cpu_bf16().offered:
        bf16 = ceiling("bf16", "cpu") if square else gemm_rate(torch.bfloat16, shapes)
    where = "2048² mm" if shapes == list(SQUARE) else f"mm on {len(shapes)} shapes"
    line = f"measured GEMM rate ({where}): float32 {fp32:.0f} GFLOP/s"
    line += (f", bf16 {bf16:.0f} GFLOP/s ({bf16 / fp32:.1f}x)" if bf16
             else ", bf16 not measured (no bf16 units)")
    return line, fp32, bf16
