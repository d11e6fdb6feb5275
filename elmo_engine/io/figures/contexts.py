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
    ``comp.names``; default all), two a row, one colour bar. A view whose matrix is all ones
    (layer 0 of one word: the character CNN gives every occurrence the same vector) is a note
    instead of a uniform square."""
    views = list(range(len(comp.names))) if views is None else list(views)
    n = comp.matrices.shape[1]
    mats = comp.matrices[views]
    informative = [k for k in views if not _all_same(comp.matrices[k])]
    vals = comp.matrices[informative] if informative else mats
    lo, hi = float(np.nanmin(vals)), float(np.nanmax(vals))
    ncols = 1 if len(views) == 1 else 2
    nrows = -(-len(views) // ncols)
    snippets = n <= 12 and ncols == 1
    fig = F.figure(width or 6.5, 2.9 * nrows + 0.5 if ncols == 2 else 5.0)
    axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    groups = list(comp.groups) if any(comp.groups) else None
    rows = _occurrence_labels(comp, snippets)
    cols = [str(i + 1) for i in range(n)]
    bar = "cosine similarity" + (", anisotropy-corrected" if comp.corrected else "")
    im_axes = []
    for a, ax in enumerate(axes):
        if a >= len(views):
            ax.set_visible(False)
            continue
        k = views[a]
        ax.set_title(_view_title(comp, k), fontsize="medium")
        if k not in informative and informative:
            F.note_panel(ax, f"{comp.names[k]}: all {n} occurrences of '{comp.word}' have the "
                              "same vector (the character CNN sees only the word), so every "
                              "cosine is 1.00.")
            continue
        first = a % ncols == 0
        F.heatmap(fig, ax, comp.matrices[k], rows if snippets else cols, cols, bar, lo, hi,
                   row_groups=None, col_groups=groups, cmap=F.SEQUENTIAL_CMAP,
                   annotate=n <= 8 and ncols == 1, xlabel="occurrence",
                   ylabel="occurrence" if first else "", colorbar=False)
        if groups:
            for i in range(1, n):
                if groups[i] != groups[i - 1]:
                    ax.axhline(i - 0.5, color="white", linewidth=1.5)
        ax.set_aspect("equal")
        im_axes.append(ax)
    if im_axes:
        cbar = fig.colorbar(im_axes[0].images[0], ax=im_axes, shrink=0.8)
        cbar.set_label(bar)
    half = "" if comp.direction == "both" else f", {comp.direction} halves"
    head = f"'{comp.word}' in {n} contexts{half}"
    if groups:
        head += ": " + ", ".join(f"{g} {i0 + 1}–{i1 + 1}" for g, (i0, i1) in F._blocks(groups))
    fig.suptitle(head, fontsize="medium")
    return fig


def _all_same(m) -> bool:
    m = np.asarray(m, float)
    return bool(np.isfinite(m).all() and np.allclose(m, 1.0, atol=1e-5))


def _view_title(comp, k: int) -> str:
    name = comp.names[k]
    if name == "mix":
        norm = ", normalised" if getattr(comp, "layer_norm", False) else ""
        return "mix (" + "/".join(f"{w:.2f}" for w in comp.weights) + norm + ")"
    return f"{name} (character CNN)" if name == "layer 0" else f"{name} (biLSTM)"


def contexts_summary(comp):
    """Self-, within- and between-group similarity per view (bars from 0), the permutation
    p-value of within − between above each view."""
    fig, ax = F.new_figure(6.5, 3.4)
    series = [{"label": "self-similarity", "values": comp.self_sim, "color": F.OKABE_ITO[2]}]
    if not np.isnan(comp.within).all():
        series += [{"label": "within groups", "values": comp.within, "color": F.OKABE_ITO[5]},
                   {"label": "between groups", "values": comp.between, "color": F.OKABE_ITO[1]}]
    F.grouped_bars(ax, list(comp.names), series, ylabel="mean cosine")
    if ax.get_ylim()[0] >= 0:
        ax.set_ylim(0.0, 1.12)
    for k, p in enumerate(comp.p_value):
        if not math.isnan(p):
            ax.annotate(f"p = {p:.3f}", (k, 1.02), ha="center", va="bottom", fontsize="x-small")
    ax.set_title(f"'{comp.word}': similarity of its {len(comp.occurrences)} occurrences per view",
                 fontsize="medium")
    F.legend_outside(ax)
    if comp.test and comp.test.n:
        fig.supxlabel(f"p: {comp.test.describe()}", fontsize="x-small")
    return fig


__all__ = ["contexts_heatmaps", "contexts_summary"]
