"""Where ``embed --precision bf16`` (and float32) spends its time on this CPU, and which oneDNN
kernels run: torch.profiler's per-operator table and a summary of oneDNN's verbose log.

The full published size (``original``: 4,096 cells, projection 512, random weights written by
``bench_bilm.random_checkpoint``) embeds a batch of real sentences once per precision, after a
warm-up and with every cache emptied. For each precision it prints

* the top operators by self CPU time, with their input shapes and their share of the total;
* oneDNN's primitives as they executed (``torch.backends.mkldnn.verbose``): per primitive kind
  and implementation (the ISA: ``avx512_core_bf16``, ``avx512_core_amx``, ``avx512_core``, ...),
  how many calls and how much time, and the reorders (layout or type conversions) per LSTM step.

A GEMM that does not appear in oneDNN's log ran in MKL (float32 ``mm``/``addmm``) or in torch's
own kernels. The directions run one after the other in the calling thread (the profiler does
not follow the side-by-side worker threads); read the shares, not the times, and on a shared
machine the shares only. See docs/performance.md, "What runs where in bf16".

    python benchmarks/profile_bf16.py [--batch 64] [--length 25] [--threads 2] [--rows 25]
"""
from __future__ import annotations

import argparse
import collections
import dataclasses
import functools
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Callable, Dict, List, Tuple

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import hostinfo
from bench_bilm import CORPUS, corpus_sentences, random_checkpoint, sentences
from elmo_engine import runtime
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.checkpoint import load_checkpoint


@dataclasses.dataclass
class PrimitiveRow:
    """One (kind, implementation, data types) group of oneDNN's executed primitives."""

    kind: str
    impl: str
    types: str
    calls: int = 0
    ms: float = 0.0
    shapes: collections.Counter = dataclasses.field(default_factory=collections.Counter)


def capture_stdout(fn: Callable[[], object]) -> str:
    """Run ``fn`` with the process's file descriptor 1 sent to a temporary file (oneDNN's
    verbose log is written by C code, which Python's ``sys.stdout`` does not see); return what
    was written."""
    sys.stdout.flush()
    saved = os.dup(1)
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        os.dup2(tmp.fileno(), 1)
        try:
            fn()
        finally:
            sys.stdout.flush()
            os.dup2(saved, 1)
            os.close(saved)
        tmp.seek(0)
        return tmp.read().decode("utf-8", "replace")


def _types(desc: str) -> str:
    """``src:bf16::blocked:ab::f0 wei:bf16:a:blocked:... dst:f32::...`` → ``src bf16, wei bf16,
    dst f32``."""
    found = re.findall(r"(src|wei|dst|bia)[^:\s]*:([a-z0-9]+)", desc)
    return ", ".join(f"{name} {dtype}" for name, dtype in found)


def parse_verbose(log: str) -> List[PrimitiveRow]:
    """Group oneDNN's ``exec`` lines (``onednn_verbose[,timestamp],v1,primitive,exec,cpu,kind,
    impl,prop,descs,attrs,aux,shape,ms`` and the older ``dnnl_verbose,exec,cpu,...``) by kind,
    implementation and data types."""
    rows: Dict[Tuple[str, str, str], PrimitiveRow] = {}
    for line in log.splitlines():
        if not (line.startswith("onednn_verbose") or line.startswith("dnnl_verbose")):
            continue
        fields = line.split(",")
        if "exec" not in fields:
            continue
        at = fields.index("exec")
        if len(fields) < at + 9 or fields[at + 1] != "cpu":
            continue
        kind, impl, descs = fields[at + 2], fields[at + 3], fields[at + 5]
        try:
            ms = float(fields[-1])
        except ValueError:
            continue
        key = (kind, impl, _types(descs))
        row = rows.setdefault(key, PrimitiveRow(*key))
        row.calls += 1
        row.ms += ms
        row.shapes[fields[-2]] += 1
    return sorted(rows.values(), key=lambda r: -r.ms)


def print_primitives(rows: List[PrimitiveRow], lstm_steps: int) -> None:
    """The oneDNN summary: one line per (kind, implementation, types), then the reorders per
    LSTM step of one direction and layer."""
    total = sum(r.ms for r in rows) or 1.0
    print(f"  oneDNN primitives executed ({sum(r.calls for r in rows)} calls, {total:.0f} ms):")
    for r in rows:
        top = ", ".join(f"{s} ×{c}" for s, c in r.shapes.most_common(3))
        print(f"    {r.kind:14s} {r.impl:32s} {r.types:30s} {r.calls:6d} calls "
              f"{r.ms:8.1f} ms ({100 * r.ms / total:4.1f} %)  {top}")
    reorders = sum(r.calls for r in rows if r.kind == "reorder")
    found = (re.search(r"(avx[0-9a-z_]*|amx[a-z_]*|sse41|ref|gemv|gemm)", r.impl) for r in rows)
    isas = sorted({m.group(0) for m in found if m})
    print(f"  ISAs: {', '.join(isas) or 'none (no oneDNN primitive ran)'}; reorders: {reorders} "
          f"({reorders / max(1, lstm_steps):.2f} per LSTM step of one layer-direction, "
          f"{lstm_steps} such steps)")


def lstm_step_count(model, sents) -> int:
    """Steps the packed LSTM runs per layer and direction over the batch (boundaries dropped:
    framed length n + 2, one step skipped), summed over layers and directions."""
    steps = max(len(s) for s in sents) + 1
    return steps * 2 * model.opts.n_layers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--length", type=int, default=25)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rows", type=int, default=25, help="operators shown per precision")
    ap.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=("fp32", "bf16"))
    ap.add_argument("--model", default="original", choices=("original", "small"))
    args = ap.parse_args()
    runtime.configure(threads=args.threads)
    print(hostinfo.host_line(), flush=True)
    if "bf16" in args.precisions and not runtime.cpu_bf16().offered:
        print("this CPU has no bf16 units: profiling float32 only")
        args.precisions = ["fp32"]
    from torch.profiler import ProfilerActivity, profile

    sents = corpus_sentences(args.batch, args.length) if CORPUS.exists() else \
        sentences(args.batch, args.length)
    n_tok = sum(len(s) for s in sents)
    with tempfile.TemporaryDirectory() as tmp:
        path = random_checkpoint(args.model, Path(tmp))
        for precision in args.precisions:
            emb = Embedder(load_checkpoint(path), device="cpu", token_budget=10 ** 6,
                           precision=precision)
            emb.model.fast_path = dataclasses.replace(emb.model.fast_path,
                                                      parallel_min_rows=10 ** 9)
            emb.embed(sents)                                  # warm-up: packs the weights
            emb.clear_cache()
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                emb.embed(sents)
            events = prof.key_averages(group_by_input_shape=True)
            total_us = sum(e.self_cpu_time_total for e in events) or 1.0
            print(f"\n[{args.model}] {precision}: {len(sents)} sentences, {n_tok} tokens, "
                  f"{args.threads} threads (directions one after the other)")
            print(f"  {'operator':38s} {'calls':>6s} {'self ms':>9s} {'share':>6s}  shapes")
            for e in sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.rows]:
                shapes = str(e.input_shapes)[:70]
                print(f"  {e.key[:38]:38s} {e.count:6d} {e.self_cpu_time_total / 1e3:9.1f} "
                      f"{100 * e.self_cpu_time_total / total_us:5.1f}%  {shapes}")
            emb.clear_cache()
            log = capture_stdout(functools.partial(_verbose_embed, emb, sents))
            print_primitives(parse_verbose(log), lstm_step_count(emb.model, sents))
            del emb


def _verbose_embed(emb: Embedder, sents) -> None:
    """One embed with oneDNN's verbose log on (execution lines only)."""
    with torch.backends.mkldnn.verbose(torch.backends.mkldnn.VERBOSE_ON):
        emb.embed(sents)


if __name__ == "__main__":
    main()
