"""Redraw rate of the Projection view's Trajectories tab: 20,000 points morphing between layers.

Run by hand (not a test)::

    python benchmarks/bench_trajectories.py                  # 20,000 points, 3 layers, 60 frames
    python benchmarks/bench_trajectories.py --points 2000 --frames 10    # a quick check

What one frame of the slider or the play button costs in the app
(:meth:`elmo_explorer.views.projection.trajectory_panel.TrajectoryPanel.set_ticks`): the linear
interpolation of the aligned positions
(:func:`elmo_engine.analysis.projection.aligned.interpolate`), ``ScatterPlotItem.setData`` with
the shared brushes, the trails, and a full repaint of the widget (``grab()``, offscreen, at
1000×700). Prints the host (``hostinfo``), the median and the 90th percentile of the frame
time and the frames per second they allow; the issue's target is at least 20 frames per second
for 20,000 points.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "app"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--points", type=int, default=20_000)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--frames", type=int, default=60)
    ap.add_argument("--trails", type=int, default=12, help="tokens with trails")
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import hostinfo
    from PySide6.QtWidgets import QApplication

    from elmo_engine.analysis.projection.aligned import (AlignedLayer, AlignedLayouts,
                                                         AlignMethod)
    from elmo_engine.analysis.projection.tokens import all_tokens
    from elmo_explorer.views.projection.model import ProjectionModel
    from elmo_explorer.views.projection.plots import categories
    from elmo_explorer.views.projection.trajectory_model import TICKS_PER_LAYER
    from elmo_explorer.views.projection.trajectory_panel import TrajectoryPanel

    print(hostinfo.host_line())
    app = QApplication.instance() or QApplication([])
    rng = np.random.default_rng(0)
    n, n_layers = args.points, args.layers
    words = [f"w{i}" for i in rng.integers(0, 500, n)]
    tokens = all_tokens([words])
    base = rng.normal(size=(n, 2))
    coords = np.stack([base + rng.normal(size=(n, 2)) * 0.3 * k for k in range(n_layers)])
    layouts = AlignedLayouts(tuple(AlignedLayer(k) for k in range(n_layers)),
                             coords.astype(np.float32), AlignMethod.PROCRUSTES, "pca", 0,
                             tuple(0.0 for _ in range(n_layers)), 0.0)
    maps = ProjectionModel()
    maps.legend_codes, _ = categories(words)
    panel = TrajectoryPanel(maps, jobs=None, n_layers=lambda: n_layers)  # type: ignore[arg-type]
    panel.resize(1000, 700)
    panel.show()
    m = panel.model
    m.tokens, m.layouts = tokens, layouts
    panel.view.map.set_codes(maps.legend_codes, n)
    panel.view.slider.setRange(0, m.max_ticks)
    panel.view.map.fit(layouts.coords)
    panel.set_trails(range(args.trails))
    app.processEvents()
    panel.grab()
    step = max(1, m.max_ticks // max(1, args.frames))
    times = []
    for f in range(args.frames):
        t0 = time.perf_counter()
        panel.set_ticks((f * step) % (m.max_ticks + 1))
        panel.grab()                                   # the full repaint, as on screen
        times.append(time.perf_counter() - t0)
    t = np.array(times)
    med, p90 = float(np.median(t)), float(np.percentile(t, 90))
    print(f"{n:,} points, {n_layers} layers ({TICKS_PER_LAYER} slider ticks each), "
          f"{args.trails} trails, {args.frames} frames at 1000×700 offscreen")
    print(f"frame: median {1000 * med:.1f} ms, p90 {1000 * p90:.1f} ms → "
          f"{1 / med:.1f} frames/s (median), {1 / p90:.1f} frames/s (p90); target ≥ 20")


if __name__ == "__main__":
    main()
