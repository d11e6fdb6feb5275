"""How much bf16 changes the results, measured three ways (docs/performance.md, bf16 section).

- ``cosine``: per layer, the cosine between the bf16 and float32 vectors of every token of a
  held-out text (default: the first sentences of WikiText-2's validation set, which the demo
  model never saw), for a checkpoint (default: the bundled demo model) — the median, the 0.1 %
  quantile and the minimum (:mod:`elmo_engine.embed.fidelity`).
- ``probe``: the ``demo-pos`` probe (``elmo-explorer probe --task demo-pos``, 3 seeds) with bf16
  features against float32 ones: per layer and for the scalar mix, the test accuracies and their
  difference.
- ``train``: ``train-lm --preset demo`` for ``--steps`` steps in bf16 and in float32, same seed,
  same data (trained on pd_fiction's valid.txt; dev = the first ``--dev-lines`` lines of
  openstax_prose's valid.txt, evaluated in float32), and the dev perplexities' relative
  difference.

Needs ``../shared/data`` beside the checkout and a CPU with bf16 units (or a GPU). Prints the
host line (CPU, flags, torch capability, threads), a table per part, and writes JSON.

    python scripts/bf16_fidelity.py [--parts cosine,probe,train] [--checkpoint CKPT]
        [--sentences 1000] [--steps 300] [--seeds 3] [--first-seed 0] [--dev-lines 400]
        [--threads 2] [--json OUT.json]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import hostinfo
from elmo_engine import runtime
from elmo_engine.errors import InputError

DATA = ROOT.parent / "shared" / "data"
HELD_OUT = DATA / "wikitext2_eval" / "wiki.valid.tokens"
TRAIN_TEXT = DATA / "pd_fiction" / "valid.txt"
DEV_TEXT = DATA / "openstax_prose" / "valid.txt"


def held_out_sentences(path: Path, n: int):
    """The first ``n`` non-empty, non-heading lines of a pre-tokenized file, split on spaces
    (at most 200 tokens each)."""
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            toks = line.split()
            if not toks or toks[0] == "=":
                continue
            out.append(toks[:200])
            if len(out) == n:
                break
    return out


def part_cosine(args) -> dict:
    from elmo_engine.cli.common import checkpoint_or_demo
    from elmo_engine.embed.fidelity import compare_precisions
    from elmo_engine.model.checkpoint import load_checkpoint

    sents = held_out_sentences(args.text, args.sentences)
    model = load_checkpoint(checkpoint_or_demo(args.checkpoint))
    t0 = time.perf_counter()
    fid = compare_precisions(model, sents, "bf16")
    print(f"cosine: {args.checkpoint or 'demo model'}, {len(sents)} sentences of "
          f"{args.text.relative_to(ROOT.parent)}, {fid[0].n} tokens "
          f"({time.perf_counter() - t0:.0f} s)")
    print("  layer   median      0.1 % quantile   minimum")
    for f in fid:
        print(f"  {f.layer:5d}   {f.median:.6f}    {f.q001:.6f}         {f.minimum:.6f}")
    return {"checkpoint": str(args.checkpoint or "demo"), "text": str(args.text.name),
            "sentences": len(sents), "tokens": fid[0].n,
            "layers": [{"layer": f.layer, "median": f.median, "q001": f.q001,
                        "min": f.minimum} for f in fid]}


def _probe(precision: str, args, tmp: Path) -> dict:
    out = tmp / f"probe-{precision}.json"
    cmd = [sys.executable, "-c", "import sys; from elmo_engine.cli.main import main; "
           "sys.exit(main(sys.argv[1:]))", "probe", "--task", "demo-pos",
           "--precision", precision, "--device", "cpu", "--seeds", "3",
           "--threads", str(args.threads), "--out", str(out)]
    if args.checkpoint:
        cmd += ["--checkpoint", str(args.checkpoint)]
    subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text())


def part_probe(args, tmp: Path) -> dict:
    res = {p: _probe(p, args, tmp) for p in ("fp32", "bf16")}
    rows = []
    print("probe: demo-pos, 3 seeds, test accuracy (mean over seeds)")
    print("  layer   float32   bf16      bf16 - float32")
    entries = [(str(lay["layer"]), i) for i, lay in enumerate(res["fp32"]["layers"])] + [("mix", None)]
    for name, i in entries:
        a = res["fp32"]["layers"][i] if i is not None else res["fp32"]["mix"]
        b = res["bf16"]["layers"][i] if i is not None else res["bf16"]["mix"]
        rows.append({"layer": name, "fp32": a["test"], "bf16": b["test"],
                     "fp32_per_seed": a["test_per_seed"], "bf16_per_seed": b["test_per_seed"],
                     "diff": b["test"] - a["test"]})
        print(f"  {name:>5}   {a['test']:.4f}    {b['test']:.4f}    {b['test'] - a['test']:+.4f}")
    return {"task": "demo-pos", "seeds": 3, "rows": rows,
            "max_abs_diff": max(abs(r["diff"]) for r in rows),
            "wall_s": {p: r["wall_time_s"] for p, r in res.items()}}


def _train_once(precision: str, seed: int, dev: Path, out: Path, steps: int) -> dict:
    from elmo_engine.train.presets import preset
    from elmo_engine.train.trainer import TrainConfig, train

    cfg = TrainConfig.from_dict(preset("demo"))
    cfg.max_steps, cfg.precision, cfg.log_every, cfg.seed = steps, precision, 50, seed
    cfg.epochs = 10 ** 6                                   # --steps decides
    t0 = time.perf_counter()
    res = train([TRAIN_TEXT], [dev], out, cfg, device="cpu", show_progress=False,
                log=lambda m: None)
    return {"seed": seed, "dev_perplexity": res.dev["mean"], "steps": res.steps,
            "train_s": res.train_seconds, "tokens_per_s": res.tokens / res.train_seconds,
            "wall_s": time.perf_counter() - t0}


def part_train(args, tmp: Path) -> dict:
    """Dev perplexity after ``--steps`` steps in float32 and in bf16, for ``--seeds`` seeds each
    (the mean over seeds is compared: one pair cannot separate the precision from the
    run-to-run spread), plus, when the seeds start at 0, float32 seed 0 a second time (is a
    run repeatable?)."""
    dev = tmp / "dev.txt"
    with open(DEV_TEXT, encoding="utf-8") as fh:
        dev.write_text("".join(line for _, line in zip(range(args.dev_lines), fh)),
                       encoding="utf-8")
    runs: dict = {"fp32": [], "bf16": []}
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        for precision in ("fp32", "bf16"):
            r = _train_once(precision, seed, dev, tmp / f"train-{precision}-{seed}", args.steps)
            runs[precision].append(r)
            print(f"  seed {seed} {precision}: dev perplexity {r['dev_perplexity']:.2f}, "
                  f"{r['tokens_per_s']:.0f} tokens/s", flush=True)
    first = args.first_seed
    out: dict = {"runs": runs}
    for p in ("fp32", "bf16"):
        ppl = np.array([r["dev_perplexity"] for r in runs[p]])
        out[p] = {"mean": float(ppl.mean()), "sd": float(ppl.std(ddof=1)) if len(ppl) > 1 else 0.0,
                  "tokens_per_s": float(np.mean([r["tokens_per_s"] for r in runs[p]]))}
    a, b = out["fp32"]["mean"], out["bf16"]["mean"]
    out["relative_diff"] = (b - a) / a
    if first == 0:                          # is a run repeatable? (once, with seed 0)
        again = _train_once("fp32", 0, dev, tmp / "train-fp32-0-again", args.steps)
        out["fp32_seed0_again"] = again
        out["same_seed_relative_diff"] = (again["dev_perplexity"]
                                          - runs["fp32"][0]["dev_perplexity"]) \
            / runs["fp32"][0]["dev_perplexity"]
    print(f"train: --preset demo, {args.steps} steps, seeds {first}..{first + args.seeds - 1}, on "
          f"{TRAIN_TEXT.name} of pd_fiction, dev the first {args.dev_lines} lines of "
          f"{DEV_TEXT.relative_to(ROOT.parent)}")
    for p in ("fp32", "bf16"):
        o = out[p]
        print(f"  {p}: dev perplexity {o['mean']:.2f} ± {o['sd']:.2f} (sd over seeds), "
              f"{o['tokens_per_s']:.0f} tokens/s")
    print(f"  bf16 against float32 (means): {100 * out['relative_diff']:+.2f} %")
    if "same_seed_relative_diff" in out:
        print(f"  float32 seed 0 run again: {100 * out['same_seed_relative_diff']:+.2f} %")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parts", default="cosine,probe,train")
    ap.add_argument("--checkpoint", type=Path, default=None)
    ap.add_argument("--text", type=Path, default=HELD_OUT, help="held-out, pre-tokenized text")
    ap.add_argument("--sentences", type=int, default=1000,
                    help="held-out lines for the cosines (default 1000: ~111k tokens)")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--seeds", type=int, default=3, help="training runs per precision")
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds --first-seed … (to add seeds to an earlier run's)")
    ap.add_argument("--dev-lines", type=int, default=400,
                    help="dev lines for the perplexity (default 400: ~41k tokens)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    if set(parts) - {"cosine", "probe", "train"}:
        ap.error("--parts takes cosine, probe and train")
    runtime.configure(threads=args.threads)
    print(hostinfo.host_line())
    if not runtime.cpu_bf16().offered:
        print(runtime.cpu_bf16().refusal(), file=sys.stderr)
        return 1
    missing = [p for p in (args.text, TRAIN_TEXT, DEV_TEXT) if not p.is_file()]
    if missing:
        print(f"needs ../shared/data beside the checkout (missing {missing[0]})", file=sys.stderr)
        return 1
    result = {"host": hostinfo.host_line()}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for part in parts:
                if part == "cosine":
                    result["cosine"] = part_cosine(args)
                elif part == "probe":
                    result["probe"] = part_probe(args, Path(tmp))
                else:
                    result["train"] = part_train(args, Path(tmp))
    except InputError as e:
        print(f"bf16_fidelity: error: {e}", file=sys.stderr)
        return 1
    if args.json:
        from elmo_engine.atomic import atomic_write_text
        atomic_write_text(args.json, json.dumps(result, indent=1))
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
