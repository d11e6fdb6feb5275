"""The trainer's step with glibc's default heap against ``runtime.reuse_freed_blocks`` (what
``train-lm`` sets), in one run; with ``--baseline REF``, also as revision REF ran it.

The setting is process-wide and cannot be undone, so each variant runs in its own child
process, in ABBA order over the rounds, so that a change in the machine's load hits both alike.
A child builds the fused trainer of ``benchmarks/bench_train.py`` (the preset's batch, real text
from the shipped corpora's dev files) in float32 and, where the CPU has bf16 units, in bf16,
warms each up for 3 steps, then times ``--steps`` steps and counts the minor page faults they
took. The parent prints the host, the medians, the ratios, the faults per step, each
child's peak resident memory, and the share of the host's GEMM ceiling the step reaches (its
arithmetic per token counted as ``bench_train.py`` counts it). ``--baseline REF`` adds a
third child, the trainer of revision REF of this repository (``git archive``, as
``bench_embed_command.py --baseline``) with the heap as that revision's ``train-lm`` set it,
and the ratio of this tree's ``train-lm`` step to it.

    python benchmarks/bench_train_malloc.py [--preset demo] [--steps 20] [--rounds 2] [--threads 2]
    python benchmarks/bench_train_malloc.py --baseline df92adf --steps 20 --rounds 4
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

MODES = ("default", "reuse")


def child(args) -> None:
    if args.tree:                              # a baseline revision's tree, its own modules
        sys.path[:0] = [str(Path(args.tree) / "benchmarks"), args.tree]
    import torch

    import bench_train as bt
    from elmo_engine import runtime
    from elmo_engine.train.dataset import prepare_data
    from elmo_engine.train.presets import preset
    from elmo_engine.train.trainer import TrainConfig

    runtime.configure(threads=args.threads)
    reuse = getattr(runtime, "reuse_freed_blocks", None)        # a revision before it: None
    applied = reuse() if (args.child == "reuse" and reuse is not None) else False
    cfg = TrainConfig.from_dict(preset(args.preset))
    # the texts beside this checkout (an extracted tree has no ../shared beside it)
    texts = [ROOT.parent / t.relative_to(bt.ROOT.parent) for t in bt.TEXTS]
    data = prepare_data(texts[:1], texts[1:], Path("/nonexistent"), cfg,
                        torch.device("cpu"), write=False)
    out = {"applied": applied}
    kinds = ["fp32"] + (["bf16"] if runtime.cpu_bf16().offered else [])
    for kind in kinds:
        r = bt.Runner(data, cfg, cfg.batch_size, True, bf16=kind == "bf16")
        if "flops_per_token" not in out and not args.tree:   # as bench_train counts it
            out["flops_per_token"] = 6 * bt.forward_macs(cfg.bilm_options(), *bt.window_shape(r))
        r.run(3)
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        out[kind] = r.run(args.steps)
        out[f"{kind}_faults"] = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / args.steps
    out["peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", default="demo")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--baseline", default=None, metavar="REF",
                    help="also time the trainer of this git revision, as its train-lm ran it")
    ap.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    ap.add_argument("--tree", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    import bench_train as bt
    import hostinfo

    missing = [p for p in bt.TEXTS if not p.is_file()]
    if missing:
        sys.exit(f"needs ../shared/data beside the checkout (missing {missing[0]})")
    print(hostinfo.host_line())
    print(f"preset {args.preset}, fused trainer, {args.steps} steps per child after 3 warm-up "
          f"steps, {args.threads} threads, {args.rounds} ABBA rounds")
    import tempfile

    from bench_startup import extract

    scratch = tempfile.TemporaryDirectory()
    variants = {m: (m, None) for m in MODES}
    if args.baseline:
        (Path(scratch.name) / "baseline").mkdir()
        tree = extract(args.baseline, Path(scratch.name) / "baseline")
        variants[f"@{args.baseline}"] = ("reuse", str(tree))      # as its train-lm ran
    runs = {name: [] for name in variants}
    names = list(variants)
    for i in range(args.rounds):
        for name in (names if i % 2 == 0 else names[::-1]):
            mode, tree = variants[name]
            t = time.perf_counter()
            cmd = [sys.executable, __file__, "--child", mode, "--preset", args.preset,
                   "--steps", str(args.steps), "--threads", str(args.threads)]
            res = subprocess.run(cmd + (["--tree", tree] if tree else []), capture_output=True,
                                 text=True)
            if res.returncode:
                sys.exit(res.stderr.strip().splitlines()[-1])
            doc = json.loads(res.stdout.strip().splitlines()[-1])
            runs[name].append(doc)
            rates = ", ".join(f"{k} {doc[k]:.0f}" for k in ("fp32", "bf16") if k in doc)
            print(f"round {i + 1} {name:9s}: {rates} tokens/s; faults per step "
                  + ", ".join(f"{k} {doc[k + '_faults']:.0f}" for k in ("fp32", "bf16")
                              if k in doc)
                  + f"; peak {doc['peak_mb']:.0f} MB ({time.perf_counter() - t:.0f} s)",
                  flush=True)
    if not runs["reuse"][0]["applied"]:
        print("note: reuse_freed_blocks() is not available here (not glibc): both are default")
    for kind in ("fp32", "bf16"):
        if kind not in runs["default"][0]:
            continue
        a = statistics.median(d[kind] for d in runs["default"])
        b = statistics.median(d[kind] for d in runs["reuse"])
        fa = statistics.median(d[kind + "_faults"] for d in runs["default"])
        fb = statistics.median(d[kind + "_faults"] for d in runs["reuse"])
        print(f"fused {kind}: default {a:.0f}, reuse {b:.0f} tokens/s (median): {b / a:.2f}x; "
              f"minor faults per step {fa:.0f} -> {fb:.0f}")
        flops = runs["reuse"][0]["flops_per_token"]
        print(f"fused {kind}, reuse: {flops / 1e6:.1f} MFLOP per token, "
              + hostinfo.share_line(flops * b, 1.0, kind))
        if args.baseline:
            c = statistics.median(d[kind] for d in runs[f"@{args.baseline}"])
            print(f"fused {kind}: train-lm's step now {b:.0f} against {c:.0f} tokens/s at "
                  f"{args.baseline} (median): {b / c:.2f}x")
    pa = max(d["peak_mb"] for d in runs["default"])
    pb = max(d["peak_mb"] for d in runs["reuse"])
    print(f"peak resident memory of a child: default {pa:.0f} MB, reuse {pb:.0f} MB")


if __name__ == "__main__":
    main()
