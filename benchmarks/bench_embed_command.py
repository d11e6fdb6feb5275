"""The whole ``elmo-explorer embed`` command in float32 and in bf16, as a user runs it (issue 43).

Writes a random-weight checkpoint of the full published size (2x4096_512_2048cnn_2xhighway, the
layout of the published files; ``--model small`` for the small size), writes ``--sentences``
held-out sentences (OpenStax's valid split, 1B-Word tokenized, 5-50 tokens) one per line, and
times ``elmo-explorer embed IN -o OUT.hdf5 --checkpoint CKPT --precision P --pretokenized`` as a
child process, the precisions alternating (ABBA) so that both see the same moments of a shared
machine. Prints the host (CPU, bf16 units, GEMM ceilings in both precisions), each command's wall
time (best and median) with the share of its precision's GEMM ceiling that the model's nominal
FLOPs over the whole command reach, the bf16 / float32 ratio, and per layer the cosine of bf16's
vectors to float32's (median, 0.1 % quantile, minimum), read back from the two output files.

``--phases`` also times, in one child process per precision, where a command's time goes: the
interpreter and imports, reading the checkpoint, the conversion to the precision, the first batch
(which packs the weights) and the rest; the fixed part is what a short command cannot amortise.

``--batch-size`` is passed to both commands (default: none, so the command's own, 256): it sets
the rows of each LSTM step's GEMMs (within ``embed``'s budget of 4,096 padded tokens per batch).
Each step streams the whole recurrent weight (32 MB in float32, 16 MB in bf16) for those rows, so
more rows per step pay where the weight's streaming bounds the step: float32 here, and bf16 where
the GEMM units are fast (AMX).

    python benchmarks/bench_embed_command.py                    # 256 sentences, 2 rounds
    python benchmarks/bench_embed_command.py --sentences 1024 --rounds 3 --phases
    python benchmarks/bench_embed_command.py --sentences 1024 --rounds 1 --batch-size 64
    python benchmarks/bench_embed_command.py --baseline 65c4cde      # float32 against a revision

``--baseline REF`` also runs float32 on revision ``REF`` of this repository (``git archive``; its
own ``python -m elmo_engine.cli embed``), in the same ABBA rounds, and prints this tree's float32
speed against it and the largest difference between their vectors: the issue's "float32
unchanged or faster", on any host. On a CPU without bf16 units only the two float32 commands run.

The issue's target: bf16 >= 3x float32, whole command, on a host with AMX (``amx_bf16``), with
the layer-2 cosine >= 0.999 at the 0.1 % quantile.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import h5py
import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

CORPUS = ROOT.parent / "shared" / "data" / "openstax_prose" / "valid.txt"
#: the child that times a command's phases (``--phases``): prints one JSON line
PHASES = r"""
import json, sys, time
t0 = time.perf_counter()
import torch
from elmo_engine.cli.embed import chunk_embedder
from elmo_engine.embed.embedder import Embedder
from elmo_engine.model.checkpoint import load_checkpoint
t1 = time.perf_counter()
model = load_checkpoint(sys.argv[1])
t2 = time.perf_counter()
sents = [line.split() for line in open(sys.argv[2], encoding="utf-8")]
emb = chunk_embedder(model, "cpu", sys.argv[3], max(len(s) for s in sents), int(sys.argv[4]))
t3 = time.perf_counter()
emb.embed(sents[:64])
t4 = time.perf_counter()
emb.embed(sents[64:])
t5 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "load": t2 - t1, "to precision": t3 - t2,
                  "first 64 sentences (packs)": t4 - t3, "rest": t5 - t4}))
"""


def held_out_sentences(n: int, path: Path = CORPUS) -> list:
    """The first ``n`` sentences of 5-50 tokens of OpenStax's valid split (not seen by the
    demo model's training), tokenized as the app tokenizes typed text."""
    from elmo_engine.model.tokenize import tokenize
    found = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("= "):
                continue
            for sent in re.split(r"(?<=[.!?])\s+(?=[A-Z])", line.strip()):
                toks = tokenize(sent)
                if 5 <= len(toks) <= 50:
                    found.append(toks)
                    if len(found) == n:
                        return found
    raise SystemExit(f"{path} has only {len(found)} sentences of 5-50 tokens")


@dataclass(frozen=True)
class Variant:
    """One command timed: ``precision`` on this tree (``tree`` None) or on an extracted
    revision's tree, run as ``python -m elmo_engine.cli`` with that tree first on the path."""

    name: str
    precision: str
    tree: Optional[Path] = None

    def argv(self, exe: str) -> list:
        return [exe] if self.tree is None else [sys.executable, "-m", "elmo_engine.cli"]

    def env(self, env: dict) -> dict:
        if self.tree is None:
            return env
        return {**env, "PYTHONPATH": str(self.tree)}


def command(prefix: list, text: Path, out: Path, ckpt: Path, precision: str,
            batch: Optional[int]) -> list:
    return [*prefix, "embed", str(text), "-o", str(out), "--checkpoint", str(ckpt),
            "--precision", precision, "--pretokenized",
            *([] if batch is None else ["--batch-size", str(batch)])]


def run_timed(argv: list, env: dict, cwd: Optional[Path] = None) -> float:
    t = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=cwd)
    wall = time.perf_counter() - t
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr}")
    return wall


def read_vectors(path: Path) -> list:
    """Per sentence the (layers, tokens, dim) array of an ``embed`` HDF5 file, in key order."""
    with h5py.File(path, "r") as f:
        keys = sorted((k for k in f.keys() if k.isdigit()), key=int)
        return [np.asarray(f[k], dtype=np.float32) for k in keys]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=["original", "small"], default="original")
    ap.add_argument("--sentences", type=int, default=256)
    ap.add_argument("--rounds", type=int, default=2,
                    help="ABBA rounds: each precision runs twice a round")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS for the commands (default: torch's)")
    ap.add_argument("--phases", action="store_true", help="also time each command's phases")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="embed's --batch-size (default: the command's own, 256 sentences); "
                         "the rows of each step's GEMMs, within embed's 4,096 padded tokens")
    ap.add_argument("--baseline", default=None, metavar="REF",
                    help="also time float32 on this git revision (float32 unchanged or faster)")
    args = ap.parse_args()

    import torch

    import hostinfo
    from bench_bilm import FILTERS, MODELS, random_checkpoint
    from bench_startup import extract
    from elmo_engine.cli.embed import STREAM_BATCH_ROWS
    from elmo_engine import runtime
    from elmo_engine.embed.fidelity import layer_fidelity
    from elmo_engine.model.flops import flops_per_token
    from elmo_engine.model.options import BiLMOptions

    if args.threads:
        torch.set_num_threads(args.threads)
    print(hostinfo.host_line())
    bf16_units = runtime.cpu_bf16().offered
    print(hostinfo.rates_line()[0])      # bf16 measured only where the CPU has bf16 units
    if not bf16_units and not args.baseline:
        raise SystemExit("this CPU has no bf16 units: embed --precision bf16 is refused here "
                         "(--baseline REF still compares float32 with a revision)")
    if not bf16_units:
        print("this CPU has no bf16 units: float32 only, against the baseline")
    exe = shutil.which("elmo-explorer") or str(Path(sys.executable).with_name("elmo-explorer"))
    env = dict(os.environ)
    env["OMP_NUM_THREADS"] = str(torch.get_num_threads())

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        variants = [Variant("fp32", "fp32")] + ([Variant("bf16", "bf16")] if bf16_units else [])
        if args.baseline:
            (folder / "baseline").mkdir()
            variants.append(Variant(f"fp32@{args.baseline}", "fp32",
                                    extract(args.baseline, folder / "baseline")))
        ckpt = random_checkpoint(args.model, folder)
        os.sync()          # the new checkpoint's pages written back before anything is timed
        sents = held_out_sentences(args.sentences)
        text = folder / "held_out.txt"
        text.write_text("".join(" ".join(s) + "\n" for s in sents), encoding="utf-8")
        tokens = sum(len(s) for s in sents)
        print(f"[{args.model}] {len(sents)} held-out sentences, {tokens} tokens; "
              f"`elmo-explorer embed … --precision P"
              f"{'' if args.batch_size is None else f' --batch-size {args.batch_size}'}` as "
              f"{', '.join(v.name for v in variants)}, {args.rounds} ABBA round(s)")
        times: dict = {v.name: [] for v in variants}
        outs = {v.name: folder / f"{v.name.replace('@', '-')}.hdf5" for v in variants}
        for _ in range(args.rounds):
            for v in variants + variants[::-1]:
                outs[v.name].unlink(missing_ok=True)
                times[v.name].append(run_timed(
                    command(v.argv(exe), text, outs[v.name], ckpt, v.precision,
                            args.batch_size), v.env(env), v.tree))
        version = min(run_timed([exe, "--version"], env) for _ in range(3))
        flops = flops_per_token(BiLMOptions(filters=FILTERS, **MODELS[args.model])).total
        for v in variants:
            ts = times[v.name]
            print(f"  {v.name}: best {min(ts):.2f} s, median {statistics.median(ts):.2f} s "
                  f"({tokens / min(ts):.0f} tokens/s whole command; "
                  f"{hostinfo.share_line(flops * tokens, min(ts), v.precision)} at "
                  f"{flops / 1e6:.0f} MFLOP per token)")
        print(f"  `elmo-explorer --version` {version:.2f} s")
        if bf16_units:
            ratio = min(times["fp32"]) / min(times["bf16"])
            median_ratio = statistics.median(times["fp32"]) / statistics.median(times["bf16"])
            print(f"  bf16 / fp32, whole command: {ratio:.2f}x best, {median_ratio:.2f}x median "
                  "(target >= 3x on an AMX host)")
            fid = layer_fidelity(read_vectors(outs["fp32"]), read_vectors(outs["bf16"]))
            for f in fid:
                print(f"  layer {f.layer}: cosine to fp32 median {f.median:.6f}, "
                      f"0.1 % quantile {f.q001:.6f}, min {f.minimum:.6f} ({f.n} tokens)")
        if args.baseline:
            base = variants[-1].name
            ratio = min(times[base]) / min(times["fp32"])
            median_ratio = statistics.median(times[base]) / statistics.median(times["fp32"])
            diff = max(float(np.abs(a - b).max()) for a, b in
                       zip(read_vectors(outs["fp32"]), read_vectors(outs[base])))
            print(f"  fp32 now against {base}: {ratio:.2f}x best, {median_ratio:.2f}x median "
                  f"(> 1: now faster); largest |difference| of the vectors {diff:.2e}")
        if args.phases:
            for precision in ("fp32", "bf16") if bf16_units else ("fp32",):
                rows = STREAM_BATCH_ROWS if args.batch_size is None else args.batch_size
                done = subprocess.run([sys.executable, "-c", PHASES, str(ckpt), str(text),
                                       precision, str(rows)], env=env,
                                      capture_output=True, text=True, cwd=ROOT)
                if done.returncode != 0:
                    raise SystemExit(done.stderr)
                phases = json.loads(done.stdout.strip().splitlines()[-1])
                print(f"  phases, {precision}: " + ", ".join(
                    f"{k} {v:.2f} s" for k, v in phases.items()))


if __name__ == "__main__":
    main()
