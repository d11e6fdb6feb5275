"""One LSTM step of the full published size, part by part: the recurrent GEMM, the gate
arithmetic and the cell's projection, as the inference fast path runs them, on the threads
of one direction (the two directions run side by side, a core each, on a 2-core host).

The gate arithmetic is :func:`elmo_engine.model.lstm_packed.gates` itself and the GEMMs go
through :class:`elmo_engine.model.cpu_fast.FastKernels` (pre-packed weights), so this times the
engine's own code. It prints each part's time, the gate arithmetic's share of the step, and
the GEMMs' share of the host's GEMM ceiling: where bf16 GEMMs run on AMX tiles they take a
fraction of the time they take on AVX-512, and the gate arithmetic's share says how much of
the step is left for them to speed up.

Beyond 64 rows it also times the same arithmetic in blocks of 64 rows (each block's passes
in cache). ``--compile`` also times the gate arithmetic fused by ``torch.compile`` (inductor's
C++ code; it needs a C++ compiler, and compiles for 15 s or more at the first call, once per
shape). ``--primitives`` times torch's element-wise ``sigmoid``, ``exp`` and ``tanh`` on
256 × 16,384 floats. The blocks and the fused code were measured and not adopted
(docs/performance.md, "One LSTM step part by part").

    python benchmarks/bench_gate_step.py [--rows 64 256] [--threads 1] [--compile] [--primitives]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import torch  # noqa: E402

import hostinfo  # noqa: E402
from elmo_engine import runtime  # noqa: E402
from elmo_engine.model.cpu_fast import FastKernels  # noqa: E402
from elmo_engine.model.lstm_packed import gates  # noqa: E402

#: the published model's LSTM: cells D, projection P, cell clip
D, P, CLIP = 4096, 512, 3.0


def best_ms(fn, repeats: int = 20, rounds: int = 5) -> float:
    """The best mean time of ``repeats`` calls over ``rounds`` rounds, in ms (noise only slows
    a run down)."""
    fn()
    fn()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(repeats):
            fn()
        best = min(best, (time.perf_counter() - t) / repeats)
    return best * 1e3


def fused_gates(dtype: torch.dtype):
    """The same arithmetic as one ``torch.compile``d function (inductor fuses it), its output
    rounded to ``dtype`` for the projection as :func:`gates` rounds it."""
    def step(z: torch.Tensor, c: torch.Tensor):
        z = z.float()
        i, f, o = (torch.sigmoid(z[:, k * D:(k + 1) * D]) for k in (0, 2, 3))
        j = 2 * torch.sigmoid(2 * z[:, D:2 * D]) - 1
        c2 = (f * c + i * j).clamp(-CLIP, CLIP)
        return c2, ((2 * torch.sigmoid(2 * c2) - 1) * o).to(dtype)
    return torch.compile(step, dynamic=False)


def one(dtype: torch.dtype, rows: int, compile_too: bool) -> None:
    gen = torch.Generator().manual_seed(0)
    w_rec = (torch.randn(2, P, 4 * D, generator=gen) * 0.02).to(dtype)
    wp = (torch.randn(2, D, P, generator=gen) * 0.02).to(dtype)
    h = torch.randn(rows, P, generator=gen).to(dtype)
    x = torch.randn(rows, 4 * D, generator=gen).to(dtype)             # the input projection
    c = torch.randn(rows, D, generator=gen)
    low = dtype != torch.float32
    m_buf = torch.empty(rows, D)
    z32 = torch.empty(rows, 4 * D) if low else None
    m_low = torch.empty(rows, D, dtype=dtype) if low else None
    h_out = torch.empty(rows, P, dtype=dtype)
    kernels = FastKernels()
    packed = kernels.recurrent_weight(0, 0, w_rec, rows)
    z = kernels.add_recurrent(x.clone(), h, w_rec[0], packed)
    m = gates(z.clone(), c.clone(), CLIP, m_buf, z32, m_low)
    z_keep = z.clone()
    c_keep = c.clone()

    def run_gemm():
        if packed is None:                              # the plain GEMM, out of place
            torch.addmm(x, h, w_rec[0])
        else:
            kernels.add_recurrent(x, h, w_rec[0], packed)

    def run_gates():
        z.copy_(z_keep)
        c.copy_(c_keep)
        gates(z, c, CLIP, m_buf, z32, m_low)

    def run_copies():                     # what run_gates spends restoring its inputs
        z.copy_(z_keep)
        c.copy_(c_keep)

    def run_blocks(block: int = 64):      # the same arithmetic, 64 rows at a time
        z.copy_(z_keep)
        c.copy_(c_keep)
        for a in range(0, rows, block):
            b = min(rows, a + block)
            gates(z[a:b], c[a:b], CLIP, m_buf[a:b], None if z32 is None else z32[a:b],
                  None if m_low is None else m_low[a:b])

    t_gemm = best_ms(run_gemm)
    t_copies = best_ms(run_copies)
    t_gates = best_ms(run_gates) - t_copies
    t_proj = best_ms(lambda: kernels.project(0, 0, wp, m, h_out))
    step = t_gemm + t_gates + t_proj
    name = "bf16" if low else "fp32"
    flops_rec, flops_proj = 2 * rows * P * 4 * D, 2 * rows * D * P
    print(f"{name}, {rows} rows: recurrent GEMM {t_gemm:.3f} ms "
          f"({hostinfo.share_line(flops_rec, t_gemm / 1e3, name)}), "
          f"gates {t_gates:.3f} ms, projection {t_proj:.3f} ms "
          f"({hostinfo.share_line(flops_proj, t_proj / 1e3, name)}); "
          f"the gates are {100 * t_gates / step:.0f} % of the step")
    if rows > 64:
        t_blocks = best_ms(run_blocks) - t_copies
        print(f"  in blocks of 64 rows: {t_blocks:.3f} ms: {t_gates / t_blocks:.2f}× the "
              "engine's gate arithmetic")
    if compile_too:
        fused = fused_gates(dtype)
        t = time.perf_counter()
        fused(z_keep, c_keep)
        first = time.perf_counter() - t
        t_fused = best_ms(lambda: fused(z_keep, c_keep))
        print(f"  fused by torch.compile: {t_fused:.3f} ms (first call {first:.1f} s): "
              f"{t_gates / t_fused:.2f}× the engine's gate arithmetic")


def primitives() -> None:
    """torch's element-wise sigmoid, exp and tanh on 256 × 16,384 float32 values."""
    x = torch.randn(256, 4 * D, generator=torch.Generator().manual_seed(1))
    out = torch.empty_like(x)
    times = {name: best_ms(lambda f=f: f(x, out=out))
             for name, f in (("sigmoid", torch.sigmoid), ("exp", torch.exp),
                             ("tanh", torch.tanh))}
    print("element-wise, 256 × 16,384 floats: " + ", ".join(
        f"{name} {t:.2f} ms" for name, t in times.items())
        + f"; tanh / sigmoid {times['tanh'] / times['sigmoid']:.1f}×")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, nargs="+", default=[64, 256])
    ap.add_argument("--threads", type=int, default=1,
                    help="intra-op threads (1: a direction's share of a 2-core host)")
    ap.add_argument("--compile", action="store_true",
                    help="also time the gate arithmetic fused by torch.compile")
    ap.add_argument("--primitives", action="store_true",
                    help="also time torch's element-wise sigmoid, exp and tanh")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(hostinfo.host_line())
    if args.primitives:
        primitives()
    dtypes = [torch.float32] + ([torch.bfloat16] if runtime.cpu_bf16().offered else [])
    with torch.inference_mode():
        for dtype in dtypes:
            for rows in args.rows:
                one(dtype, rows, args.compile)


if __name__ == "__main__":
    main()
