"""Commands that answer at once (issue 39): the wall time of ``elmo-explorer`` commands that need
no model — ``--version``, ``--help``, a usage error, an output that exists, ``models list``,
``info`` (the demo model's headers) — and of ``info --check`` (which loads it), each run N times
in a fresh process; the median, and the libraries each one imports, by cumulative import time
(``python -X importtime``).

``--baseline REF`` runs the same commands on another revision of this repository (extracted with
``git archive`` into a temporary folder; nothing here is changed) and prints the ratio:
``--baseline e0d0486`` is the code before issue 39, which imported torch for every command.
``--busy K`` keeps K processes spinning on the CPU meanwhile (a loaded machine: the issue's
"8 s loaded" was 2 cores shared with another job).

    python benchmarks/bench_startup.py [--runs N] [--baseline REF] [--busy K]

docs/performance.md ("Start-up") has the numbers.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

REPO = Path(__file__).resolve().parents[1]
#: the model store's folder (elmo_engine.io.model_store.DATA_ENV; not imported: this process
#: must not load the engine before it measures it)
DATA_ENV = "ELMO_EXPLORER_DATA"
#: label → arguments of ``elmo-explorer`` ({input}: a one-line text; {existing}: a file that
#: exists); every one but ``info --check`` answers without loading a model
COMMANDS: Tuple[Tuple[str, Sequence[str]], ...] = (
    ("--version", ("--version",)),
    ("--help", ("--help",)),
    ("usage error (embed, no INPUT)", ("embed",)),
    ("embed … -o EXISTING", ("embed", "{input}", "-o", "{existing}")),
    ("export vectors … -o EXISTING", ("export", "vectors", "{input}", "-o", "{existing}")),
    ("models list", ("models", "list")),
    ("info (the demo model's headers)", ("info",)),
    ("info --check (loads the demo model)", ("info", "--check")),
)


def _env(root: Path, data_dir: Path) -> Dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "app")])
    env[DATA_ENV] = str(data_dir)                  # models list: an empty store, not the user's
    env.pop("DISPLAY", None)
    return env


def _argv(args: Sequence[str], files: Dict[str, str]) -> List[str]:
    return [a.format(**files) for a in args]


def time_command(root: Path, args: List[str], env: Dict[str, str], runs: int) -> float:
    """The median wall time of ``runs`` runs (seconds)."""
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-m", "elmo_explorer.entry", *args], env=env, cwd=root,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def top_imports(root: Path, args: List[str], env: Dict[str, str], n: int = 4
                ) -> List[Tuple[str, float]]:
    """The ``n`` top-level imports that cost most (cumulative seconds, ``-X importtime``)."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "elmo_explorer.entry", *args],
                       env=env, cwd=root, capture_output=True, text=True, timeout=300)
    costs: Dict[str, float] = {}
    for line in r.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        _self, cumulative, name = line[len("import time:"):].split("|")
        if cumulative.strip().isdigit() and not name.startswith("  "):   # a top-level import
            key = name.strip()
            costs[key] = costs.get(key, 0.0) + int(cumulative) / 1e6
    return sorted(costs.items(), key=lambda kv: -kv[1])[:n]


def extract(ref: str, into: Path) -> Path:
    """The tree of revision ``ref`` of this repository, in ``into``."""
    archive = into / "tree.tar"
    with open(archive, "wb") as fh:
        subprocess.run(["git", "-C", str(REPO), "archive", ref], stdout=fh, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def _spin(stop) -> None:
    while not stop.is_set():
        sum(i * i for i in range(10_000))


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=5, help="runs per command (default 5)")
    p.add_argument("--baseline", default=None, metavar="REF",
                   help="a git revision to compare with (e.g. e0d0486, before issue 39)")
    p.add_argument("--busy", type=int, default=0, metavar="K",
                   help="keep K processes busy on the CPU while measuring")
    args = p.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import hostinfo                 # the host: CPU, flags (AMX / AVX512_BF16), torch, threads

    print(hostinfo.host_line())
    print(f"{os.cpu_count()} CPUs; {args.runs} runs per command, median wall time; "
          f"{args.busy} busy processes")
    stop = multiprocessing.Event()
    spinners = [multiprocessing.Process(target=_spin, args=(stop,), daemon=True)
                for _ in range(args.busy)]
    for s in spinners:
        s.start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            files = {"input": str(folder / "in.txt"), "existing": str(folder / "out.hdf5")}
            Path(files["input"]).write_text("He sat on the bank of the river .\n", "utf-8")
            Path(files["existing"]).write_bytes(b"an output that exists")
            (folder / "data").mkdir()
            env = _env(REPO, folder / "data")
            old = extract(args.baseline, folder) if args.baseline else None
            old_env = _env(old, folder / "data") if old is not None else None
            head = f"{'command':<32} {'now':>8}"
            if old is not None:
                head += f" {args.baseline:>10} {'ratio':>7}"
            print(head + "   top imports now (cumulative s)")
            for label, command in COMMANDS:
                cmd = _argv(command, files)
                now = time_command(REPO, cmd, env, args.runs)
                line = f"{label:<32} {now:7.2f}s"
                if old is not None and old_env is not None:
                    before = time_command(old, cmd, old_env, args.runs)
                    line += f" {before:9.2f}s {before / now:6.1f}x"
                tops = ", ".join(f"{name} {s:.2f}" for name, s in top_imports(REPO, cmd, env))
                print(f"{line}   {tops}")
    finally:
        stop.set()
        for s in spinners:
            s.join(timeout=5)


if __name__ == "__main__":
    main()
