"""The Contexts view's figures, drawn with the helpers of :mod:`elmo_engine.io.figures`, the one
figure module (matplotlib Agg).

One function per figure, shared by the app's exports, the app's report and
``elmo-explorer export report``, so the three give the same pictures:

* :func:`contexts_heatmaps` — the cosine matrices of a word's occurrences, one per view (layer
  0 … L, mix), rows and columns ordered by group with lines between the groups, one labelled
  colour bar over the data's range;
* :func:`contexts_summary` — self-, within- and between-group similarity per view, with the
  permutation p-value of within − between above each view.

Each returns a matplotlib ``Figure``; :func:`elmo_engine.io.figures.save` writes it as PNG, SVG
or PDF.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from elmo_engine.io import figures as F


def _occurrence_labels(comp, snippets: bool) -> list:
    out = []
    for i, lab in enumerate(comp.labels):
        out.append(f"{i + 1} {lab.strip('…')}" if snippets else str(i + 1))
    return out


def contexts_heatmaps(comp, views: Optional[Sequence[int]] = None, width: float = 0.0):
    """The cosine matrices of ``comp`` (a
    :class:`~elmo_engine.analysis.contexts.compare.Comparison`) for ``views`` (indices into
    ``comp.names``; default all) side by side."""
    views = list(range(len(comp.names))) if views is None else list(views)
    n = comp.matrices.shape[1]
    mats = comp.matrices[views]
    lo, hi = float(np.nanmin(mats)), float(np.nanmax(mats))
    snippets = n <= 16
    cell = 0.32 if n <= 16 else max(0.06, 5.0 / n)
    side = max(2.6, cell * n)
    label_w = 2.6 if snippets else 0.5
    fig_w = width or (label_w + len(views) * (side + 0.6) + 1.2)
    fig_h = side + 1.8
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(fig_w, fig_h), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(views), squeeze=False)[0]
    groups = list(comp.groups) if any(comp.groups) else None
    rows = _occurrence_labels(comp, snippets)
    cols = [str(i + 1) for i in range(n)]
    bar = "cosine similarity" + (", anisotropy-corrected" if comp.corrected else "")
    for a, (ax, k) in enumerate(zip(axes, views)):
        F.heatmap(fig, ax, comp.matrices[k], rows if a == 0 else [""] * n, cols, bar, lo, hi,
                  row_groups=groups if a == 0 else None, col_groups=groups,
                  annotate=n <= 8 and len(views) <= 2, xlabel="occurrence (column)",
                  ylabel="occurrence (row)" if a == 0 else "", colorbar=False)
        if groups and a > 0:
            for i in range(1, n):
                if groups[i] != groups[i - 1]:
                    ax.axhline(i - 0.5, color="white", linewidth=2)
        ax.set_aspect("equal")
        ax.set_title(_view_title(comp, k), fontsize="medium")
    im = axes[-1].images[0]
    cbar = fig.colorbar(im, ax=list(axes), fraction=0.046 / max(1, len(views)) ** 0.5, pad=0.02)
    cbar.set_label(bar)
    half = "" if comp.direction == "both" else f", {comp.direction} halves"
    fig.suptitle(f"'{comp.word}' in {n} contexts: cosine similarity of its occurrences{half}",
                 fontsize="large")
    return fig


def _view_title(comp, k: int) -> str:
    name = comp.names[k]
    if name == "mix":
        norm = ", layers normalised" if getattr(comp, "layer_norm", False) else ""
        return "mix (" + ", ".join(f"{w:.2f}" for w in comp.weights) + norm + ")"
    return f"{name} (character CNN)" if name == "layer 0" else f"{name} (biLSTM)"


def contexts_summary(comp):
    """Self-, within- and between-group similarity per view, p-values of within − between."""
    fig, ax = F.new_figure(1.3 * len(comp.names) + 3.0, 3.6)
    series = [{"label": "self-similarity", "values": comp.self_sim, "color": F.PALETTE[4]}]
    if not np.isnan(comp.within).all():
        series += [{"label": "within groups", "values": comp.within, "color": F.PALETTE[0]},
                   {"label": "between groups", "values": comp.between, "color": F.PALETTE[1]}]
    F.grouped_bars(ax, list(comp.names), series, ylabel="mean cosine")
    vals = np.concatenate([np.asarray(s["values"], float) for s in series])
    vals = vals[np.isfinite(vals)]
    lo = max(0.0, float(vals.min()) - 0.1) if vals.size else 0.0
    ax.set_ylim(lo, 1.04)
    for k, p in enumerate(comp.p_value):
        if not math.isnan(p):
            ax.annotate(f"p = {p:.3f}", (k, 1.012), ha="center", va="bottom", fontsize="x-small")
    ax.set_title(f"'{comp.word}': similarity per view"
                 + (f" (p: {comp.test.describe()})" if comp.test and comp.test.n else ""),
                 fontsize="small", wrap=True)
    F.legend_outside(ax)
    return fig


__all__ = ["contexts_heatmaps", "contexts_summary"]
