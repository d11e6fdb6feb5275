"""UMAP of 10,000 tokens: our pipeline (PCA to 50 → exact cosine kNN → umap) vs plain umap.

Run by hand (not a test)::

    python benchmarks/bench_umap.py                      # demo model, else random vectors
    python benchmarks/bench_umap.py --checkpoint DIR     # any checkpoint
    python benchmarks/bench_umap.py --random             # random clustered vectors, width 256
    python benchmarks/bench_umap.py --render             # only: draw 20,000 points × 4 plots

Prints, in one run: the one-time compile cost of each path (paid once per process), then the
time of our pipeline and of the baseline (``umap.UMAP(metric="cosine")`` on the raw vectors,
which uses pynndescent) on the same vectors, and their ratio. Both use ``random_state`` (the app's
default, reproducible and single-threaded). The tokens come from the OpenStax validation text
(``../shared/data/openstax_prose/valid.txt``) embedded with the model.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from elmo_engine.analysis.projection import (LayerSpec, Projector, all_tokens,
                                             exact_knn, layer_features, pca, warm_up)
from elmo_engine.analysis.projection.umapfit import _fit, _quiet_third_party

TEXT = REPO.parent / "shared" / "data" / "openstax_prose" / "valid.txt"


def demo_checkpoint():
    """The demo model's folder, or None while it is not installed."""
    try:
        from elmo_engine.resources import demo_checkpoint_path
        path = demo_checkpoint_path()
    except ImportError:
        path = REPO / "resources" / "demo_model"
    return path if (path / "options.json").is_file() else None


def model_vectors(checkpoint, n_tokens: int):
    """Tokens of the OpenStax validation text and their activations under ``checkpoint``."""
    from elmo_engine import runtime

    from elmo_engine.model.checkpoint import load_checkpoint
    from elmo_engine.embed.embedder import Embedder
    from elmo_engine.model.tokenize import tokenize

    runtime.configure(threads=max(1, (os.cpu_count() or 2) - 1))
    sents, total = [], 0
    with open(TEXT, encoding="utf-8") as fh:
        for line in fh:
            toks = tokenize(line.strip())[:60]
            if toks:
                sents.append(toks)
                total += len(toks)
            if total >= n_tokens:
                break
    model = load_checkpoint(checkpoint)
    t0 = time.perf_counter()
    acts = Embedder(model, device="cpu").embed(sents)
    print(f"embedded {total:,} tokens in {len(sents):,} sentences with {model.info.name} "
          f"in {time.perf_counter() - t0:.1f} s")
    tokens = all_tokens(sents).sample(n_tokens, seed=0)
    return tokens, acts, model.info.checksum


def random_vectors(n_tokens: int, width: int = 256):
    """Clustered random vectors standing in for a model's layers (3 layers, width 2×128)."""
    rng = np.random.default_rng(0)
    centres = rng.normal(size=(60, width)).astype(np.float32)
    per = 20
    sents = [[f"w{i}_{j}" for j in range(per)] for i in range(n_tokens // per)]
    acts = []
    for s in sents:
        c = centres[rng.integers(0, len(centres), len(s))]
        acts.append(np.stack([c + rng.normal(scale=s_, size=c.shape).astype(np.float32)
                              for s_ in (0.3, 0.6, 0.9)]))
    return all_tokens(sents), acts, "random"


def timed(fn, *args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, time.perf_counter() - t0


def baseline_fit(x: np.ndarray, seed: int = 42) -> np.ndarray:
    with warnings.catch_warnings():
        _quiet_third_party()
        import umap
        return umap.UMAP(n_neighbors=15, min_dist=0.1, metric="cosine", random_state=seed,
                         n_jobs=1).fit_transform(x)


def bench_render(n_points: int = 20_000, n_plots: int = 4, frames: int = 20) -> None:
    """Time full repaints of the projection plots (offscreen) while panning and zooming."""
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication

    from elmo_explorer.views.projection.plots import ProjectionPlots, categories

    app = QApplication.instance() or QApplication([])
    plots = ProjectionPlots()
    plots.resize(1600, 600)
    plots.set_layers([f"plot {k}" for k in range(n_plots)])
    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in rng.integers(0, 500, n_points)]
    codes, _ = categories(words)
    t0 = time.perf_counter()
    plots.set_codes(codes)
    for k in range(n_plots):
        plots.set_coords(k, rng.normal(size=(n_points, 2)) * (k + 1), f"plot {k}")
    t_set = time.perf_counter() - t0
    plots.show()
    app.processEvents()
    plots.grab()
    times = []
    for f in range(frames):
        for lp in plots.plots:
            lp.view.translateBy(x=0.05, y=0.0)
            lp.view.scaleBy((0.97, 0.97))
        t0 = time.perf_counter()
        plots.grab()                               # a full paint of every plot
        times.append(time.perf_counter() - t0)
    from PySide6.QtCore import QRectF
    from PySide6.QtGui import QImage, QPainter

    one = []                                       # a pan/zoom repaints only its own plot
    lp = plots.plots[0]
    rect = lp.plot.sceneBoundingRect()
    image = QImage(int(rect.width()), int(rect.height()), QImage.Format.Format_ARGB32)
    for f in range(frames):
        lp.view.translateBy(x=0.05, y=0.0)
        lp.view.scaleBy((0.97, 0.97))
        t0 = time.perf_counter()
        painter = QPainter(image)
        plots.scene().render(painter, QRectF(0, 0, rect.width(), rect.height()), rect)
        painter.end()
        one.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    plots.set_selection(np.arange(0, n_points, 7))
    t_sel = time.perf_counter() - t0
    print(f"render: {n_plots} plots × {n_points:,} points; setData+colours {t_set:.2f} s; "
          f"repaint of one plot median {1000 * np.median(one):.0f} ms (max {1000 * max(one):.0f}), "
          f"of all {n_plots} median {1000 * np.median(times):.0f} ms (max "
          f"{1000 * max(times):.0f}) over {frames} pan/zoom frames; linked selection of "
          f"{len(plots.selection):,} points {1000 * t_sel:.0f} ms")


def main(argv=None) -> int:
    import hostinfo                 # the host: CPU, flags, bf16 units, torch capability
    print(hostinfo.host_line())
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--checkpoint", help="checkpoint folder (default: the demo model)")
    ap.add_argument("--random", action="store_true", help="random clustered vectors, width 256")
    ap.add_argument("--tokens", type=int, default=10_000)
    ap.add_argument("--layer", type=int, default=1)
    ap.add_argument("--render", action="store_true", help="only time drawing 20,000 points")
    args = ap.parse_args(argv)
    if args.render:
        bench_render()
        return 0

    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    ckpt = None if args.random else (args.checkpoint or demo_checkpoint())
    if ckpt is None:
        print("no demo model found: using RANDOM clustered vectors of width 2×128 instead")
        tokens, acts, checksum = random_vectors(args.tokens)
    else:
        tokens, acts, checksum = model_vectors(ckpt, args.tokens)
    layer = LayerSpec.single(args.layer)
    x = layer_features(acts, tokens, layer)
    print(f"{len(tokens):,} tokens, {layer.name}, width {x.shape[1]}")

    _, t = timed(warm_up)
    print(f"compile, our path (import umap + tiny fit):          {t:6.1f} s  (once per process)")
    rng = np.random.default_rng(1)
    _, t = timed(baseline_fit, rng.normal(size=(4200, 8)).astype(np.float32))
    print(f"compile, baseline path (fit of 4,200 random points): {t:6.1f} s  (once per process)")

    red, t_pca = timed(pca, x, 50)
    (idx, dist), t_knn = timed(exact_knn, red.coords, 15)
    from elmo_engine.analysis.projection import UmapParams
    _, t_fit = timed(_fit, red.coords, idx, dist, 15, UmapParams())
    ours = t_pca + t_knn + t_fit
    print(f"ours: PCA→50 {t_pca:5.2f} s + exact kNN {t_knn:5.2f} s + umap {t_fit:5.2f} s "
          f"= {ours:6.2f} s")
    _, t_base = timed(baseline_fit, x)
    print(f"baseline: umap(metric=cosine) on the raw {x.shape[1]}-d vectors   = {t_base:6.2f} s")
    print(f"ratio baseline / ours: {t_base / ours:.2f}x")

    proj = Projector()
    layers = [LayerSpec.single(k) for k in range(acts[0].shape[0])]
    layers.append(LayerSpec.mix([1.0] * len(layers)))
    _, t_all = timed(proj.run, acts, tokens, layers, "umap", UmapParams(), checksum)
    print(f"all {len(layers)} plots of the view (layers + mix), PCA+UMAP each: {t_all:6.1f} s")
    _, t_hit = timed(proj.run, acts, tokens, layers, "umap", UmapParams(), checksum)
    print(f"the same again from the cache: {t_hit * 1000:.1f} ms")
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
