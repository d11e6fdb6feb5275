"""The one figure path: every exported figure — app exports, app reports, CLI reports — is drawn
here with matplotlib's Agg backend (no Qt, no display, no global pyplot state), as PNG, SVG or PDF.
On-screen plots stay pyqtgraph; they take their colours from :func:`task_color` and
:data:`PALETTE` so that the screen and the files agree.

Rules every figure follows:

- colours by task kind: syntactic tasks blue, semantic tasks red, anything else from a fixed
  palette (never by run order);
- legends outside the data area, never clipped (figures are saved with a tight bounding box
  that includes every artist);
- baselines as labelled horizontal lines; a control task as a dashed line in its task's colour;
- sequential colour maps over the data's own range, with a labelled colour bar (a diverging map
  only for signed data that straddles zero, centred on zero);
- files written atomically (a temporary file beside the target, then renamed) with the mode an
  ordinary new file gets under the user's umask.

This module holds the style (colours, legends, baselines, heatmaps, scatter panels) and the
saving; each analysis draws its figures in its own module on these helpers:
:mod:`.contexts`, :mod:`.projection`, :mod:`.probes`, :mod:`.layers`, :mod:`.language_model`,
:mod:`.corpus`. The app only calls them (and sets size and resolution).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_write_bytes
from elmo_engine.errors import InputError

FORMATS = ("png", "svg", "pdf")

#: task kinds → their colour family (dark, light); "syntax" and "semantics" are fixed
KIND_COLORS: Dict[str, Tuple[str, str]] = {
    "syntax": ("#1f5aa6", "#8fb3e0"),
    "semantics": ("#c0392b", "#eaa39b"),
}
#: everything else, in this order (no blue or red, so never confused with the two kinds)
PALETTE: Tuple[str, ...] = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
                            "#17becf", "#ff7f0e")
#: per-layer colours (layer 0, 1, 2, 3 …, then the mix)
LAYER_COLORS: Tuple[str, ...] = ("#7f7f7f", "#2c7fb8", "#253494", "#41b6c4", "#a1dab4")
MIX_COLOR = "#d95f02"
BASELINE_COLOR = "#444444"


def task_color(kind: str, index: int = 0, light: bool = False) -> str:
    """The colour of a task of ``kind`` ("syntax", "semantics" or anything else); ``index``
    picks from :data:`PALETTE` for other kinds (e.g. the task's position in a fixed task list)."""
    if kind in KIND_COLORS:
        return KIND_COLORS[kind][1 if light else 0]
    return PALETTE[index % len(PALETTE)]


def layer_color(layer: int) -> str:
    return LAYER_COLORS[layer % len(LAYER_COLORS)]


def new_figure(width: float = 6.4, height: float = 4.0, dpi: int = 100):
    """A fresh ``(Figure, Axes)`` on the Agg canvas (thread-safe: no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    return fig, ax


def legend_outside(ax, title: Optional[str] = None, ncol: int = 1) -> None:
    """The axes' legend to the right of the data area (it is kept whole when saving)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        ax.legend(handles, labels, loc="upper left", bbox_to_anchor=(1.02, 1.0),
                  borderaxespad=0.0, frameon=False, title=title, ncol=ncol, fontsize="small")


def baseline(ax, y: float, label: str, color: str = BASELINE_COLOR, style: str = ":") -> None:
    """A labelled horizontal line across the axes (the label sits at its right end)."""
    ax.axhline(y, color=color, linestyle=style, linewidth=1.2, zorder=1)
    ax.annotate(label, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(4, 0),
                textcoords="offset points", va="center", ha="left", fontsize="x-small",
                color=color, annotation_clip=False)


def grouped_bars(ax, categories: Sequence[str], series: Sequence[dict], ylabel: str = "",
                 width: float = 0.8) -> None:
    """Bars grouped by category. Each series: ``label``, ``values``, optional ``errors``
    (± one sd, drawn as error bars), ``color`` and ``hatch``."""
    n = max(len(series), 1)
    step = width / n
    x = np.arange(len(categories), dtype=float)
    for i, s in enumerate(series):
        pos = x - width / 2 + step * (i + 0.5)
        err = s.get("errors")
        ax.bar(pos, s["values"], step * 0.92, yerr=err, color=s.get("color"),
               hatch=s.get("hatch"), label=s["label"], capsize=2.5 if err is not None else 0,
               edgecolor="white", linewidth=0.5, error_kw={"elinewidth": 0.9})
    ax.set_xticks(x)
    ax.set_xticklabels(categories)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)


def lines(ax, x: Sequence, series: Sequence[dict], xlabel: str = "", ylabel: str = "") -> None:
    """Labelled curves. Each series: ``label``, ``values``, optional ``errors`` (a shaded ± sd
    band), ``color``, ``style`` ("-", "--", ":") and ``marker``."""
    for s in series:
        vals = np.asarray(s["values"], dtype=float)
        ax.plot(x[:len(vals)], vals, linestyle=s.get("style", "-"), marker=s.get("marker", "o"),
                markersize=3.5, color=s.get("color"), label=s["label"], linewidth=1.5)
        err = s.get("errors")
        if err is not None:
            err = np.asarray(err, dtype=float)
            ax.fill_between(x[:len(vals)], vals - err, vals + err, color=s.get("color"),
                            alpha=0.15, linewidth=0)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.spines[["top", "right"]].set_visible(False)


def heatmap(fig, ax, matrix, row_labels: Sequence[str], col_labels: Sequence[str],
            cbar_label: str, vmin: Optional[float] = None, vmax: Optional[float] = None,
            row_groups: Optional[Sequence[str]] = None, col_groups: Optional[Sequence[str]] = None,
            annotate: Optional[bool] = None, cmap: Optional[str] = None,
            xlabel: str = "", ylabel: str = "", colorbar: bool = True) -> None:
    """A matrix with a labelled colour bar. The colour map is sequential over the data's range
    (``vmin``/``vmax`` override it), or diverging centred on 0 when the data straddle 0. With
    ``row_groups``/``col_groups`` (a group name per row/column, rows already ordered by group)
    lines separate the groups and the group names label the blocks. Cells are annotated with
    their values when the matrix is small (≤ 12×12) unless ``annotate`` says otherwise."""
    m = np.asarray(matrix, dtype=float)
    finite = m[np.isfinite(m)]
    lo = float(finite.min()) if vmin is None and finite.size else (vmin if vmin is not None else 0.0)
    hi = float(finite.max()) if vmax is None and finite.size else (vmax if vmax is not None else 1.0)
    if cmap is None:
        if lo < 0 < hi and vmin is None and vmax is None:
            cmap, bound = "RdBu_r", max(abs(lo), abs(hi))
            lo, hi = -bound, bound
        else:
            cmap = "viridis"
    if hi <= lo:
        hi = lo + 1e-9
    im = ax.imshow(m, cmap=cmap, vmin=lo, vmax=hi, aspect="auto", interpolation="nearest")
    if colorbar:
        cbar = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
        cbar.set_label(cbar_label)
    ax.set_xticks(range(len(col_labels)))
    ax.set_xticklabels(col_labels, rotation=45 if max(map(len, col_labels), default=0) > 3 else 0,
                       ha="right" if max(map(len, col_labels), default=0) > 3 else "center",
                       fontsize="small")
    ax.set_yticks(range(len(row_labels)))
    ax.set_yticklabels(row_labels, fontsize="small")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if annotate is None:
        annotate = m.shape[0] <= 12 and m.shape[1] <= 12
    if annotate:
        mid = (lo + hi) / 2
        for (r, c), v in np.ndenumerate(m):
            if np.isfinite(v):
                dark = v < mid if cmap == "viridis" else abs(v) > (hi - lo) / 4
                ax.text(c, r, f"{v:.2f}", ha="center", va="center", fontsize="x-small",
                        color="white" if dark else "black")
    for groups, axis in ((row_groups, "rows"), (col_groups, "cols")):
        if not groups:
            continue
        for i in range(1, len(groups)):
            if groups[i] != groups[i - 1]:
                if axis == "rows":
                    ax.axhline(i - 0.5, color="white", linewidth=2)
                else:
                    ax.axvline(i - 0.5, color="white", linewidth=2)
        if axis == "rows":
            for name, (a, b) in _blocks(groups):
                ax.annotate(name, xy=(0, (a + b) / 2), xycoords=("axes fraction", "data"),
                            xytext=(-(6 * max(map(len, row_labels), default=0) + 14), 0),
                            textcoords="offset points", ha="right", va="center",
                            fontsize="small", fontweight="bold", annotation_clip=False)


def _blocks(groups: Sequence[str]) -> List[Tuple[str, Tuple[int, int]]]:
    out = []
    start = 0
    for i in range(1, len(groups) + 1):
        if i == len(groups) or groups[i] != groups[start]:
            out.append((groups[start], (start, i - 1)))
            start = i
    return out


def scatter_panels(panels: Sequence[dict], ncols: int = 2, size: float = 3.6,
                   legend: Optional[Sequence[Tuple[str, str]]] = None, title: str = ""):
    """A grid of 2-D maps with equal axes. Each panel: ``title``, ``xy`` (n, 2), ``colors``
    (n colours), optional ``labels`` (n strings, drawn when there are at most 60 points) and
    ``highlight`` (a boolean mask drawn on top with an outline). ``legend``: (label, colour)
    pairs shown once, outside the grid."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    n = len(panels)
    rows = max(1, -(-n // ncols))
    fig = Figure(figsize=(size * ncols + (2.2 if legend else 0), size * rows), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, ncols, squeeze=False)
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_visible(False)
            continue
        p = panels[k]
        xy = np.asarray(p["xy"], dtype=float)
        ax.scatter(xy[:, 0], xy[:, 1], c=list(p["colors"]), s=14, linewidths=0, alpha=0.85)
        mask = p.get("highlight")
        if mask is not None and np.any(mask):
            sel = xy[np.asarray(mask, bool)]
            ax.scatter(sel[:, 0], sel[:, 1], s=40, facecolors="none", edgecolors="black",
                       linewidths=1.0)
        labels = p.get("labels")
        if labels is not None and len(labels) <= 60:
            for (x, y), lab in zip(xy, labels):
                ax.annotate(lab, (x, y), xytext=(3, 2), textcoords="offset points",
                            fontsize="xx-small")
        ax.set_title(p.get("title", ""), fontsize="medium")
        ax.set_aspect("equal", adjustable="datalim")
        ax.tick_params(labelsize="x-small")
    if legend:
        handles = [Line2D([], [], marker="o", linestyle="", color=c, label=lab)
                   for lab, c in legend]
        fig.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.0, 0.98),
                   frameon=False, fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def run_colors(kinds: Sequence[str]) -> List[str]:
    """One colour per run from its task kind: the first run of a kind gets the kind's dark
    colour, the second its light one, later ones (and other kinds) the fixed palette in turn."""
    seen: Dict[str, int] = {}
    out: List[str] = []
    for kind in kinds:
        n = seen.get(kind, 0)
        seen[kind] = n + 1
        out.append(task_color(kind, light=n == 1) if kind in KIND_COLORS and n < 2
                   else task_color("other", len(out)))
    return out


def render(fig, fmt: str, dpi: int = 150) -> bytes:
    """The figure as bytes of ``fmt`` (png, svg or pdf), cropped to include every artist."""
    fmt = fmt.lower().lstrip(".")
    if fmt not in FORMATS:
        raise InputError(f"unknown figure format {fmt!r}; use one of {', '.join(FORMATS)}")
    from matplotlib import rc_context

    buf = io.BytesIO()
    meta = {"png": {"Software": "ELMo Explorer"}, "svg": {"Creator": "ELMo Explorer"},
            "pdf": {"Creator": "ELMo Explorer", "CreationDate": None}}[fmt]
    with rc_context({"svg.fonttype": "none", "pdf.fonttype": 42}):    # text stays text
        fig.savefig(buf, format=fmt, dpi=dpi, bbox_inches="tight", pad_inches=0.15,
                    metadata=meta)
    return buf.getvalue()


def save(fig, path, formats: Optional[Iterable[str]] = None, dpi: int = 150) -> List[Path]:
    """Write the figure atomically. ``path`` with a suffix writes that format; without one (or
    with ``formats``) one file per format (``fig.png``, ``fig.svg`` …). New files get the mode
    the user's umask gives an ordinary file. Returns the paths written."""
    path = Path(path)
    if formats is None:
        formats = [path.suffix.lstrip(".")] if path.suffix else list(FORMATS)
        stem = path.with_suffix("") if path.suffix else path
    else:
        stem = path.with_suffix("") if path.suffix.lstrip(".").lower() in FORMATS else path
    written = []
    for fmt in formats:
        target = stem.with_name(f"{stem.name}.{fmt.lower()}")
        atomic_write_bytes(target, render(fig, fmt, dpi))
        os.chmod(target, 0o666 & ~_umask())
        written.append(target)
    return written


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
