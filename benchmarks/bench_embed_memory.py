"""``elmo-explorer embed`` in bounded memory (issue 29 item 4): peak memory on 1 MB and 10 MB.

Cuts 1 MB and 10 MB of text (whole lines) from ``../shared/data/openstax_prose/train.txt.gz``
(a paragraph per line), and a 10 kB file as the baseline of the same run (the interpreter,
torch and the model: what every run pays), runs ``elmo-explorer embed`` on each as a child
process with the bundled demo model, and reads each child's peak resident memory from
``os.wait4`` (its own ``ru_maxrss``), its wall time and its output's size. The ratio of the 10 MB
and 1 MB peaks is the figure that counts (target: within 20 %); timings on a shared machine are
only indicative.

    python benchmarks/bench_embed_memory.py [--sizes 10000,1000000,10000000] [--keep DIR]
        [-- EMBED OPTIONS]      # default: --dtype float16 --layers top (keeps the output small)

Results and the command: docs/performance.md ("embed in bounded memory").
"""
from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CORPUS = REPO.parent / "shared" / "data" / "openstax_prose" / "train.txt.gz"
DEFAULT_OPTIONS = ["--dtype", "float16", "--layers", "top"]


def cut(corpus: Path, n_bytes: int, dest: Path) -> int:
    """The first whole lines of ``corpus`` up to ``n_bytes`` bytes into ``dest``; the bytes
    written."""
    written = 0
    with gzip.open(corpus, "rb") as src, open(dest, "wb") as out:
        for line in src:
            if written + len(line) > n_bytes:
                break
            out.write(line)
            written += len(line)
    if written < n_bytes * 0.95:
        raise SystemExit(f"{corpus} holds only {written} bytes, {n_bytes} asked")
    return written


def run_embed(text: Path, out: Path, options) -> dict:
    """One ``embed`` child: its peak RSS (MiB, from wait4), wall time (s), output size (MB)."""
    cmd = [sys.executable, "-m", "elmo_engine.cli", "embed", str(text), "-o", str(out), "--force",
           *options]
    t = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err_lines = []
    assert child.stderr is not None
    for raw in child.stderr:                 # drained while it runs (a full pipe would block)
        err_lines.append(raw.decode("utf-8", "replace").rstrip())
        err_lines = err_lines[-20:]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if child.returncode != 0:
        raise SystemExit(f"embed failed ({child.returncode}):\n" + "\n".join(err_lines))
    wrote = next((line for line in reversed(err_lines) if line.startswith("wrote")), "")
    return {"peak_mib": usage.ru_maxrss / 1024, "wall_s": wall,
            "out_mb": out.stat().st_size / 1e6, "wrote": wrote}


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = DEFAULT_OPTIONS
    if "--" in argv:
        cut_at = argv.index("--")
        argv, extra = argv[:cut_at], argv[cut_at + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000,10000000",
                    help="input sizes in bytes; the first is the baseline")
    ap.add_argument("--keep", type=Path, default=None, help="keep inputs and outputs here")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability

    print(hostinfo.host_line())
    print(f"corpus: {CORPUS.relative_to(REPO.parent)}; embed options: {' '.join(extra)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="bench-embed-")) if args.keep is None else args.keep
    folder.mkdir(parents=True, exist_ok=True)
    peaks = {}
    try:
        for n in sizes:
            text = folder / f"text-{n}.txt"
            got = cut(CORPUS, n, text)
            out = folder / f"out-{n}.hdf5"
            r = run_embed(text, out, extra)
            out.unlink()
            peaks[n] = r["peak_mib"]
            print(f"{got / 1e6:8.2f} MB of text: peak RSS {r['peak_mib']:7.0f} MiB, "
                  f"wall {r['wall_s']:7.1f} s, output {r['out_mb']:8.1f} MB  ({r['wrote']})",
                  flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(folder, ignore_errors=True)
    base, *rest = sizes
    for a, b in zip(rest, rest[1:]):
        print(f"peak ratio {b / 1e6:g} MB / {a / 1e6:g} MB: {peaks[b] / peaks[a]:.3f} "
              f"(target ≤ 1.20); over the {base / 1e3:g} kB baseline: "
              f"+{peaks[a] - peaks[base]:.0f} MiB and +{peaks[b] - peaks[base]:.0f} MiB")


if __name__ == "__main__":
    main()
