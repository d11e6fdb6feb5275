"""Speed and memory of ``models get`` against a plain download, in one run, over loopback.

Writes a random-weight checkpoint of the published ``small`` size (2x1024_128_2048cnn_1xhighway,
54 MB) in the published layout, serves it under the catalogue's file names from a loopback server
(tests/model_server.py), then in fresh processes (peak memory = the child's max RSS):

* baseline: ``urllib.request.urlretrieve`` of the two files, then SHA-256 of each;
* ``get_model("small")``: the same plus the checks, the load test and the install;
* ``get_model("small")`` with the connection dropped twice mid-file (resumed with ``Range``).

Imports (torch, the engine) happen before the clock starts, in every child. Linux only (the
peak resident size is read from /proc/self/status).

It prints the host, the wall time, MB/s and peak RSS of each and the ratios to the baseline.

    python benchmarks/bench_model_download.py [--model small|medium] [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from hostinfo import host_line  # noqa: E402

CHILD = r"""
import hashlib, json, sys, time, urllib.request
from pathlib import Path
import elmo_engine.model.checkpoint                 # torch and the engine: imported before t0
from elmo_engine.io.catalogue import load_catalogue
from elmo_engine.io.model_get import get_model
mode, out = sys.argv[1], Path(sys.argv[2])
t0 = time.perf_counter()
if mode == "baseline":
    m = load_catalogue().require(sys.argv[3])
    out.mkdir(parents=True)
    for f in m.files:
        path, _ = urllib.request.urlretrieve(f.urls()[0], out / f.name)
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 22), b""):
                h.update(chunk)
else:
    get_model(sys.argv[3], backoff_s=0)
wall = time.perf_counter() - t0
# the peak resident size of this process (VmHWM; ru_maxrss would carry the parent's over exec)
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM:"))
print(json.dumps({"wall_s": wall, "max_rss_mb": int(hwm.split()[1]) / 1024}))
"""


def run_child(mode: str, name: str, out: Path, env: dict) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(out), name], env=env,
                       capture_output=True, text=True, timeout=1200, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="small", choices=("small", "medium"))
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()

    import torch

    from bench_bilm import FILTERS  # noqa: F401  (the published filters)
    from elmo_engine.io.catalogue import load_catalogue
    from elmo_engine.model.bilm import BiLM
    from elmo_engine.model.checkpoint import save_published
    from elmo_engine.model.options import BiLMOptions
    from model_server import ModelServer

    dims = {"small": (1024, 128, 1), "medium": (2048, 256, 1)}[args.model]
    m = load_catalogue().require(args.model)
    print(f"{host_line()}; {platform.platform()}; Python {platform.python_version()}")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        opts = BiLMOptions(filters=FILTERS, lstm_dim=dims[0], projection_dim=dims[1],
                           n_highway=dims[2])
        torch.manual_seed(0)
        model = BiLM(opts)
        save_published(model, tmp / "ckpt")
        files = {m.file("options").path: (tmp / "ckpt" / "options.json").read_bytes(),
                 m.file("weights").path: (tmp / "ckpt" / "lm_weights.hdf5").read_bytes()}
        size_mb = sum(len(b) for b in files.values()) / 1e6
        del model
        print(f"model: {args.model}, {size_mb:.1f} MB served over loopback")
        with ModelServer(files) as srv:
            rows = {}
            for i in range(args.repeats):
                for mode in ("baseline", "get", "get, 2 drops"):
                    if mode == "get, 2 drops":
                        srv.drop_after, srv.drops = len(files[m.file("weights").path]) // 3, 2
                    env = {**os.environ, "ELMO_EXPLORER_MODEL_MIRROR": srv.url,
                           "ELMO_EXPLORER_DATA": str(tmp / f"data-{mode}-{i}"),
                           "PYTHONPATH": str(ROOT)}
                    res = run_child("baseline" if mode == "baseline" else "get", args.model,
                                    tmp / f"plain-{i}", env)
                    rows.setdefault(mode, []).append(res)
        base = min(r["wall_s"] for r in rows["baseline"])
        print(f"{'':14} {'wall s (best)':>14} {'MB/s':>8} {'peak RSS MB':>12} {'x baseline':>11}")
        for mode, rs in rows.items():
            wall = min(r["wall_s"] for r in rs)
            rss = max(r["max_rss_mb"] for r in rs)
            print(f"{mode:14} {wall:14.2f} {size_mb / wall:8.1f} {rss:12.0f} {wall / base:11.2f}")
        print("get = download + SHA-256 + checks + a full load of the checkpoint + install")


if __name__ == "__main__":
    main()
