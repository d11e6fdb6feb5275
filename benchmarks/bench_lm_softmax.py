"""Peak memory of ``eval-lm`` with the published original's softmax shapes (793,471 × 512).

Writes, in a temporary folder, a random-weight model of the original's shapes
(``2x4096_512_2048cnn_2xhighway``, :func:`bench_bilm.random_checkpoint`) in the published layout
and beside it a synthetic ``*_softmax_weights.hdf5`` of the published layout (``softmax/W``
793,471 × 512 float32 = 1.6 GB, written block by block) with its vocabulary, then runs
``elmo-explorer eval-lm`` on a short text in a fresh process and reads its peak RSS (VmHWM).
The softmax is kept in float16 (0.8 GB); target: peak under 3 GB. The baseline printed beside
it is what a float32 W alone would take (and the former path's (256, V) float32 buffer).

    python benchmarks/bench_lm_softmax.py [--vocab 793471] [--keep DIR]
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_bilm import WORDS, random_checkpoint
from hostinfo import host_line


def write_softmax(folder: Path, vocab: int, dim: int = 512, block: int = 65536) -> Path:
    import h5py

    rng = np.random.default_rng(0)
    path = folder / "elmo_2x4096_512_2048cnn_2xhighway_softmax_weights.hdf5"
    with h5py.File(path, "w") as fh:
        w = fh.create_dataset("softmax/W", (vocab, dim), dtype="f4")
        for a in range(0, vocab, block):
            n = min(block, vocab - a)
            w[a:a + n] = rng.normal(0, 0.05, (n, dim)).astype(np.float32)
        fh.create_dataset("softmax/b", data=rng.normal(0, 0.1, vocab).astype(np.float32))
    words = ["</S>", "<S>", "<UNK>"] + WORDS + [f"w{i}" for i in range(vocab - 3 - len(WORDS))]
    (folder / "vocab-2016-09-10.txt").write_text("\n".join(words) + "\n", encoding="utf-8")
    return path


def run_eval(model: Path, text: Path) -> tuple:
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from elmo_engine.cli.main import main\n"
            "rc = main(['eval-lm', %r, '--checkpoint', %r, '--json', '--no-progress', '--batch-size', '2', "
            "'--unroll', '20', '--device', 'cpu'])\n"
            "for line in open('/proc/self/status'):\n"
            "    if line.startswith('VmHWM:'):\n"
            "        print('HWM', int(line.split()[1]) * 1024, file=sys.stderr)\n"
            "sys.exit(rc)\n") % (str(ROOT), str(text), str(model))
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise SystemExit(out.stderr)
    hwm = int(next(line for line in out.stderr.splitlines() if line.startswith("HWM")).split()[1])
    return hwm, wall, out.stdout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--vocab", type=int, default=793_471)
    ap.add_argument("--keep", type=Path, default=None, help="build the files here and keep them")
    args = ap.parse_args()
    print(host_line())
    with tempfile.TemporaryDirectory() as tmp:
        root = args.keep or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        model = random_checkpoint("original", root)
        soft = write_softmax(model, args.vocab)
        print(f"wrote the model and a {args.vocab:,} x 512 softmax "
              f"({soft.stat().st_size / 2**30:.2f} GiB) in {time.perf_counter() - t0:.0f} s")
        text = root / "text.txt"
        rng = np.random.default_rng(1)
        text.write_text("\n".join(" ".join(rng.choice(WORDS, 12)) + " ." for _ in range(12)),
                        encoding="utf-8")
        hwm, wall, out = run_eval(model, text)
        w32 = args.vocab * 512 * 4
        print(f"eval-lm: peak RSS {hwm / 2**30:.2f} GiB in {wall:.1f} s "
              f"(target < 3 GiB); W in float32 alone would be {w32 / 2**30:.2f} GiB, the former "
              f"dense path's (256, V) float32 logit buffer {256 * args.vocab * 4 / 2**30:.2f} "
              f"GiB more; ratio peak / float32 W = {hwm / w32:.2f}")
        print(out.strip().replace("\n", " ")[:400])


if __name__ == "__main__":
    main()
