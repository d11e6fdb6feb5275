"""How smooth the Corpus view's map stays: one layer's plot redrawn for 10^5 and 10^6 points.

Run by hand (offscreen is fine)::

    QT_QPA_PLATFORM=offscreen python benchmarks/bench_corpus_map.py [--points 100000 1000000]

For each size it prints the time of one redraw zoomed out (the density image, binned at the
plot's resolution) and zoomed in (the points in view), the median of ``--repeats``, beside the
baseline of drawing every point as a pyqtgraph scatter (what a plain plot does), timed in the same
run; a Shift+drag box selection over the middle of the map zoomed out (the numpy mask over every
point, linked overlay and redraw) beside a per-point Python loop, the same selection made
plainly; and the PCA of the points' vectors (512-wide float16, fitted on 20,000, applied to all).
``--selection-only`` skips the scatter baseline and the PCA (minutes at 10^6 points).
The results are recorded in docs/guide/corpus-index.md ("The Corpus view").
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from hostinfo import host_line

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "app"))


def timed(fn, repeats: int) -> float:
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return statistics.median(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--points", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--selection-only", action="store_true",
                    help="time the redraws and the box selection only")
    args = ap.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    import pyqtgraph as pg
    from PySide6.QtWidgets import QApplication

    from elmo_explorer.views.corpus.atlas import MapMode, project_layer, synthetic_map
    from elmo_explorer.views.corpus.mapplot import MapPlot

    app = QApplication.instance() or QApplication([])
    print(f"{host_line()}; load {os.getloadavg()[0]:.1f}")
    for n in args.points:
        data = synthetic_map(n, layers=(1,))
        plot = MapPlot("bench")
        plot.resize(420, 320)
        plot.show()
        app.processEvents()
        plot.set_data(data.coords[1], data.codes, data.colours())
        app.processEvents()
        assert plot.mode is MapMode.DENSITY
        dens = timed(lambda: (plot.refresh(), app.processEvents(), plot.grab()), args.repeats)
        (x0, x1), (y0, y1) = plot.view.viewRange()
        box = (x0 + (x1 - x0) / 4, y0 + (y1 - y0) / 4, x1 - (x1 - x0) / 4, y1 - (y1 - y0) / 4)
        sel = timed(lambda: (plot.select_in_rect(box), app.processEvents(), plot.grab()),
                    args.repeats)
        n_sel = len(plot.selection)
        xy = data.coords[1]

        def loop():
            return [i for i, (x, y) in enumerate(xy.tolist())
                    if box[0] <= x <= box[2] and box[1] <= y <= box[3]]

        loop_s = timed(loop, max(1, min(args.repeats, 3)))
        assert loop() == plot.selection.tolist()
        dens_sel = timed(lambda: (plot.refresh(), app.processEvents(), plot.grab()),
                         args.repeats)
        plot.set_selection([])
        print(f"{n:>9,} points: box selection of {n_sel:,} (zoomed out: mask, grey density, "
              f"redraw) {sel * 1000:7.1f} ms | per-point Python loop, selection alone "
              f"{loop_s * 1000:7.1f} ms ({loop_s / sel:4.1f}x) | density redraw with it "
              f"{dens_sel * 1000:7.1f} ms")
        cx, cy = np.median(data.coords[1], axis=0)
        half = 0.25 if n <= 200_000 else 0.08
        plot.zoom_to((cx - half, cy - half, cx + half, cy + half))
        assert plot.mode is MapMode.POINTS, plot.mode
        shown = len(plot.shown)
        pts = timed(lambda: (plot.refresh(), app.processEvents(), plot.grab()), args.repeats)
        if args.selection_only:
            print(f"{n:>9,} points: density redraw {dens * 1000:7.1f} ms | points redraw "
                  f"({shown:,} in view) {pts * 1000:7.1f} ms")
            plot.close()
            continue
        base = pg.PlotWidget()
        base.resize(420, 320)
        base.show()
        brushes = [pg.mkBrush(c) for c in data.colours()]

        def every():
            base.clear()
            base.addItem(pg.ScatterPlotItem(
                x=data.coords[1][:, 0], y=data.coords[1][:, 1], pxMode=True, size=4, pen=None,
                brush=[brushes[c] for c in data.codes]))
            app.processEvents()
            return base.grab()

        baseline = timed(every, max(1, min(args.repeats, 2)))
        vecs = np.random.default_rng(0).normal(size=(n, 512)).astype(np.float16)
        t = time.perf_counter()
        project_layer(vecs, np.arange(n))
        pca_s = time.perf_counter() - t
        print(f"{n:>9,} points: density redraw {dens * 1000:7.1f} ms | points redraw "
              f"({shown:,} in view) {pts * 1000:7.1f} ms | baseline: every point as a scatter "
              f"{baseline * 1000:8.1f} ms ({baseline / dens:5.1f}x the density redraw) | "
              f"PCA of {n:,}x512 {pca_s:5.1f} s")
        plot.close()
        base.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
