"""The app's first seconds, as a newcomer meets them: from a fresh process to the window shown,
to the bundled model loaded, to the Contexts view ready (its comparison and neighbours of
"bank"), offscreen, with a fresh settings folder (the first launch); and the worker's jobs in
the order they ran, so that a job queued ahead of the model shows.

Each run is a fresh interpreter (``python -c`` of the harness below) on this tree and, with
``--baseline REF``, on another revision of this repository (``git archive``; nothing here
changes), alternating, N runs each; the medians and their ratio are printed.

    python benchmarks/bench_app_startup.py [--runs 3] [--baseline 3b65960] [--jobs] \
        [--second-launch]

docs/performance.md ("Start-up", the app) has the numbers.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

#: the harness each run executes: marks (seconds since the interpreter started) and the jobs
HARNESS = r'''
import json, os, sys, tempfile, threading, time
T0 = time.perf_counter()
os.environ["QT_QPA_PLATFORM"] = "offscreen"
marks, jobs = {}, []
import elmo_explorer.state.worker as W
runners = [getattr(W, n) for n in dir(W)
           if isinstance(getattr(W, n), type) and "_run_job" in vars(getattr(W, n))]
if len(runners) != 1:
    sys.exit(f"cannot find the worker's job runner (_run_job) in {W.__file__}")
original = runners[0]._run_job
def run_job(self, handle, *args, **kwargs):
    t = time.perf_counter() - T0
    try:
        return original(self, handle, *args, **kwargs)
    finally:
        jobs.append((round(t, 2), round(time.perf_counter() - T0, 2),
                     str(getattr(handle, "name", "?"))))
runners[0]._run_job = run_job
import elmo_engine.resources as R
if not R.__file__.startswith(os.getcwd()):    # an editable install maps it to another tree
    sys.exit(f"elmo_engine.resources comes from {R.__file__}, not this tree")
from PySide6.QtWidgets import QApplication
app = QApplication(["elmo-explorer"])
from elmo_explorer.state.settings import AppSettings
from elmo_explorer.shell.main_window import MainWindow
settings_dir = os.environ.get("BENCH_SETTINGS_DIR") or tempfile.TemporaryDirectory().name
w = MainWindow(AppSettings(settings_dir))
w.resize(1280, 800); w.show_view("contexts"); w.show(); app.processEvents()
marks["window shown"] = time.perf_counter() - T0
ws = w.workspace
ws.model_changed.connect(lambda: marks.setdefault("model loaded", time.perf_counter() - T0))
w.start(None, None, None)
panel = w.panels["contexts"]
while not (ws.embedder is not None and ws.all_embedded() and panel.is_ready()):
    app.processEvents(); time.sleep(0.005)
    if time.perf_counter() - T0 > 300:
        sys.exit("the Contexts view was not ready after 300 s: " + json.dumps(sorted(jobs)))
marks["Contexts view ready"] = time.perf_counter() - T0
ws.worker.shutdown(timeout_s=30)
print(json.dumps({"marks": marks, "jobs": sorted(jobs)}))
'''
MARKS = ("window shown", "model loaded", "Contexts view ready")


def tree_with_resources(root: Path) -> Path:
    """An extracted tree whose ``elmo_engine.resources`` is its own ``resources/`` (the
    project maps that package there; an editable install maps it to this checkout's)."""
    link = root / "elmo_engine" / "resources"
    if (root / "resources").is_dir() and not link.exists():
        link.symlink_to(Path("..") / "resources")
    return root


def run_once(root: Path, settings: Optional[Path] = None) -> Dict:
    env = dict(os.environ)
    if settings is not None:
        env["BENCH_SETTINGS_DIR"] = str(settings)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(root / "app")])
    env.pop("DISPLAY", None)
    r = subprocess.run([sys.executable, "-c", HARNESS], env=env, cwd=root, capture_output=True,
                       text=True, timeout=600)
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("{")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"the harness failed in {root}:\n{r.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv: Optional[List[str]] = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs per tree (default 3)")
    p.add_argument("--baseline", default=None, metavar="REF",
                   help="a git revision to compare with")
    p.add_argument("--jobs", action="store_true", help="print each run's jobs in order")
    p.add_argument("--second-launch", action="store_true",
                   help="time the second launch: each run first launches once, untimed, into "
                        "its fresh settings folder, then again into the same one (what the "
                        "first launch left there, such as the neighbour index, is found)")
    args = p.parse_args(argv)
    import hostinfo
    from bench_startup import extract

    print(hostinfo.host_line())
    trees = {"now": REPO}
    with tempfile.TemporaryDirectory() as tmp:
        if args.baseline:
            trees[args.baseline] = tree_with_resources(extract(args.baseline, Path(tmp)))
        got: Dict[str, List[Dict]] = {k: [] for k in trees}
        for n in range(args.runs):                      # alternating: the same moments
            for t, (key, root) in enumerate(trees.items()):
                settings = None
                if args.second_launch:
                    settings = Path(tmp) / f"settings-{t}-{n}"
                    run_once(root, settings)                    # the first launch: untimed
                got[key].append(run_once(root, settings))
    which = "second launch" if args.second_launch else "first launch"
    print(f"{args.runs} runs per tree ({which}), median seconds from a fresh interpreter")
    head = f"{'':24}" + "".join(f"{k:>12}" for k in trees)
    print(head + ("       ratio" if args.baseline else ""))
    for mark in MARKS:
        med = {k: statistics.median(r["marks"].get(mark, float("nan")) for r in runs)
               for k, runs in got.items()}
        row = f"{mark:24}" + "".join(f"{med[k]:12.2f}" for k in trees)
        if args.baseline:
            row += f"{med[args.baseline] / med['now']:11.2f}x"
        print(row)
    if args.jobs:
        for key, runs in got.items():
            print(f"\njobs of the last run ({key}): started → finished, name")
            for start, end, name in runs[-1]["jobs"]:
                print(f"  {start:6.2f} → {end:6.2f}  {name[:70]}")


if __name__ == "__main__":
    main()
