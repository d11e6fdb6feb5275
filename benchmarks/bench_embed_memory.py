"""The commands that read a corpus, in bounded memory (issue 29 item 4): peak memory on 1 MB
and 10 MB.

Cuts 1 MB and 10 MB of text (whole lines) from ``../shared/data/openstax_prose/train.txt.gz``
(a paragraph per line), and a 10 kB file as the baseline of the same run (the interpreter,
torch and the model: what every run pays), runs one command on each as a child process with the
bundled demo model, and reads each child's peak resident memory from ``os.wait4`` (its own
``ru_maxrss``), its wall time and its output's size. The ratio of the 10 MB and 1 MB peaks is
the figure that counts (target: within 20 %); timings on a shared machine are only indicative.

``--command``:

* ``embed`` (default): ``embed TEXT -o OUT.hdf5`` with the options after ``--`` (default
  ``--dtype float16 --layers top``, which keeps the output small);
* ``export``: ``export vectors TEXT -o OUT.npz`` with the same options;
* ``layers``: ``layers TEXT --json -o OUT.json`` (a stated sample of ``--max-tokens``);
* ``index``: ``index TEXT --out DIR --layer 2``. Its peak also holds the nearest-neighbour graph
  (the index itself, which grows with the corpus), so the child's high-water mark is read from
  ``/proc`` when it logs "joining the vectors" too: the peak of reading and embedding.

    python benchmarks/bench_embed_memory.py [--command embed|export|layers|index]
        [--sizes 10000,1000000,10000000] [--keep DIR] [-- OPTIONS]

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


def cut(corpus: Path, n_bytes: int, dest: Path) -> tuple:
    """The first whole lines of ``corpus`` up to ``n_bytes`` bytes into ``dest``; the bytes
    written and the longest line in tokens (a batch holds its longest sentence whole)."""
    from elmo_engine.model.tokenize import tokenize

    written = longest = 0
    with gzip.open(corpus, "rb") as src, open(dest, "wb") as out:
        for line in src:
            if written + len(line) > n_bytes:
                break
            out.write(line)
            written += len(line)
            longest = max(longest, len(tokenize(line.decode("utf-8", "replace"))))
    if written < n_bytes * 0.95:
        raise SystemExit(f"{corpus} holds only {written} bytes, {n_bytes} asked")
    return written, longest


def command_line(command: str, text: Path, out: Path, options) -> list:
    """The child's argument list for ``command`` on ``text`` writing ``out``."""
    if command == "embed":
        return ["embed", str(text), "-o", str(out), "--force", *options]
    if command == "export":
        return ["export", "vectors", str(text), "-o", str(out), "--force", *options]
    if command == "layers":
        return ["layers", str(text), "--json", "-o", str(out), "--force", *options]
    return ["index", str(text), "--out", str(out), "--layer", "2", "--force", *options]


#: a line of the child's stderr at which its high-water mark so far is read (``index``: the
#: end of reading and embedding, before the graph is built)
MARK = "joining the vectors"


def high_water_mib(pid: int) -> float:
    """``VmHWM`` of a running process (its peak RSS so far), MiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def size_mb(path: Path) -> float:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6
    return path.stat().st_size / 1e6


def run_embed(text: Path, out: Path, options, command: str = "embed") -> dict:
    """One child: its peak RSS (MiB, from wait4), the peak when it logged :data:`MARK` (if it
    did), wall time (s), output size (MB)."""
    cmd = [sys.executable, "-m", "elmo_engine.cli", *command_line(command, text, out, options)]
    t = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err_lines = []
    at_mark = float("nan")
    assert child.stderr is not None
    for raw in child.stderr:                 # drained while it runs (a full pipe would block)
        line = raw.decode("utf-8", "replace").rstrip()
        if MARK in line and at_mark != at_mark:
            at_mark = high_water_mib(child.pid)
        err_lines.append(line)
        err_lines = err_lines[-20:]
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t
    if child.returncode != 0:
        raise SystemExit(f"{command} failed ({child.returncode}):\n" + "\n".join(err_lines))
    wrote = next((line for line in reversed(err_lines) if line.startswith(("wrote", "note"))),
                 "")
    return {"peak_mib": usage.ru_maxrss / 1024, "wall_s": wall, "at_mark_mib": at_mark,
            "out_mb": size_mb(out), "wrote": wrote}


def main(argv=None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = None
    if "--" in argv:
        cut_at = argv.index("--")
        argv, extra = argv[:cut_at], argv[cut_at + 1:]
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,1000000,10000000",
                    help="input sizes in bytes; the first is the baseline")
    ap.add_argument("--keep", type=Path, default=None, help="keep inputs and outputs here")
    ap.add_argument("--command", choices=["embed", "export", "layers", "index"], default="embed",
                    help="the command measured (default embed)")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability

    print(hostinfo.host_line())
    if extra is None:
        extra = DEFAULT_OPTIONS if args.command in ("embed", "export") else []
    print(f"corpus: {CORPUS.relative_to(REPO.parent)}; command: {args.command} "
          f"{' '.join(extra)}")
    sizes = [int(s) for s in args.sizes.split(",")]
    folder = Path(tempfile.mkdtemp(prefix="bench-embed-")) if args.keep is None else args.keep
    folder.mkdir(parents=True, exist_ok=True)
    peaks, marks = {}, {}
    try:
        for n in sizes:
            text = folder / f"text-{n}.txt"
            got, longest = cut(CORPUS, n, text)
            suffix = {"embed": ".hdf5", "export": ".npz", "layers": ".json", "index": ""}
            out = folder / f"out-{n}{suffix[args.command]}"
            r = run_embed(text, out, extra, args.command)
            if args.keep is None:
                shutil.rmtree(out) if out.is_dir() else out.unlink()
            peaks[n] = r["peak_mib"]
            marks[n] = r["at_mark_mib"]
            mark = "" if r["at_mark_mib"] != r["at_mark_mib"] else \
                f" ({r['at_mark_mib']:.0f} MiB when embedded)"
            print(f"{got / 1e6:8.2f} MB of text (longest line {longest} tokens): "
                  f"peak RSS {r['peak_mib']:7.0f} MiB{mark}, "
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
        if marks[a] == marks[a]:
            print(f"  when embedded (before the graph): {marks[b] / marks[a]:.3f}")


if __name__ == "__main__":
    main()
