"""The one figure path: every exported figure — app exports, app reports, CLI reports — is drawn
here with matplotlib's Agg backend (no Qt, no display, no global pyplot state), as PNG, SVG or PDF.
On-screen plots stay pyqtgraph; they take their colours from :func:`task_color` and
:data:`PALETTE` so that the screen and the files agree.

Rules every figure follows:

- colours by task kind: syntactic tasks blue, semantic tasks red, anything else from a fixed
  palette (never by run order);
- the size asked for is the size written: a :class:`FigureStyle` (width in inches, dpi) sets
  the figure's size exactly (6.5 in at 300 dpi → a PNG 1950 px wide), the layout is
  matplotlib's constrained layout (never ``bbox_inches="tight"``, which changes the size);
- fonts in points relative to the printed width (:meth:`FigureStyle.font_pt`: 8.5 pt at 6.5 in,
  never under 7 pt), so text reads the same on paper at any width;
- colour-blind-safe colours: Okabe & Ito (2008) for categories, viridis/cividis for sequences;
- bars start at zero (or the axis says why not);
- the user's own points are drawn above reference points and named in the legend; a panel that
  carries no information (all points the same, e.g. layer 0 of one word) becomes a note;
- legends outside the data area, never clipped (constrained layout makes room for them);
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
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.atomic import atomic_write_bytes, ordinary_mode
from elmo_engine.errors import InputError

FORMATS = ("png", "svg", "pdf")

#: Okabe & Ito (2008), "Color Universal Design": eight colours told apart with every common
#: colour-vision deficiency
OKABE_ITO: Tuple[str, ...] = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2",
                              "#D55E00", "#CC79A7")
#: categories of the map views (Projection, Corpus) and their figures: 20 distinguishable colours
#: (Tableau 20, reordered so that neighbours differ), one palette for screen and paper
CATEGORY_PALETTE: Tuple[str, ...] = (
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf",
    "#bcbd22", "#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94",
    "#f7b6d2", "#9edae5", "#dbdb8d", "#393b79")
#: task kinds → their colour family (dark, light); "syntax" and "semantics" are fixed
KIND_COLORS: Dict[str, Tuple[str, str]] = {
    "syntax": ("#0072B2", "#56B4E9"),          # Okabe–Ito blue, sky blue
    "semantics": ("#D55E00", "#E69F00"),       # Okabe–Ito vermillion, orange
}
#: everything else, in this order (Okabe–Ito's remaining colours and two greys; no blue or
#: vermillion, so never confused with the two kinds)
PALETTE: Tuple[str, ...] = ("#009E73", "#CC79A7", "#000000", "#999999", "#F0E442", "#5E3C99",
                            "#B2DF8A", "#8C510A")
#: per-layer colours (layer 0, 1, 2, 3 …, then the mix): a sequence, viridis-like
LAYER_COLORS: Tuple[str, ...] = ("#999999", "#21918C", "#440154", "#5EC962", "#3B528B")
MIX_COLOR = "#E69F00"
BASELINE_COLOR = "#444444"
#: the sequential colour map of every heatmap (perceptually uniform, colour-blind-safe)
SEQUENTIAL_CMAP = "viridis"
#: the user's own points over reference points (projection figures)
USER_COLOR = "#D55E00"
REFERENCE_ZORDER, USER_ZORDER = 2, 5


@dataclass(frozen=True)
class FigureStyle:
    """The size and resolution a figure is written at, and the formats: every figure of the app
    and the CLI goes through it. ``height_in`` None: the figure's own proportions."""

    width_in: float = 6.5              # a full text width
    dpi: int = 300
    formats: Tuple[str, ...] = ("png", "svg")
    height_in: Optional[float] = None

    def __post_init__(self) -> None:
        if not (1.0 <= self.width_in <= 40.0):
            raise InputError(f"figure width {self.width_in:g} in is outside 1–40 in")
        if not (10 <= self.dpi <= 1200):
            raise InputError(f"figure resolution {self.dpi} dpi is outside 10–1200 dpi")
        if self.height_in is not None and not (1.0 <= self.height_in <= 40.0):
            raise InputError(f"figure height {self.height_in:g} in is outside 1–40 in")
        bad = [f for f in self.formats if f not in FORMATS]
        if bad or not self.formats:
            raise InputError(f"unknown figure format {bad[0] if bad else '(none)'!r}; use "
                             + ", ".join(FORMATS))

    def font_pt(self) -> float:
        """The base font size in points at this width: 8.5 pt at 6.5 in, proportional to the
        width, 7–12 pt."""
        return min(12.0, max(7.0, 8.5 * self.width_in / 6.5))

    def pixel_width(self) -> int:
        return int(round(self.width_in * self.dpi))

    def describe(self) -> str:
        return f"{self.width_in:g} in wide at {self.dpi} dpi ({self.pixel_width()} px)"


def task_color(kind: str, index: int = 0, light: bool = False) -> str:
    """The colour of a task of ``kind`` ("syntax", "semantics" or anything else); ``index``
    picks from :data:`PALETTE` for other kinds (e.g. the task's position in a fixed task list)."""
    if kind in KIND_COLORS:
        return KIND_COLORS[kind][1 if light else 0]
    return PALETTE[index % len(PALETTE)]


def layer_color(layer: int) -> str:
    return LAYER_COLORS[layer % len(LAYER_COLORS)]


def figure(width: float = 6.5, height: float = 4.0, dpi: int = 100):
    """A fresh ``Figure`` with constrained layout on the Agg canvas (thread-safe: no pyplot
    state). Its size is a proportion: :func:`save` scales it to the style's width."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def new_figure(width: float = 6.5, height: float = 4.0, dpi: int = 100):
    """A fresh ``(Figure, Axes)`` (see :func:`figure`)."""
    fig = figure(width, height, dpi)
    ax = fig.add_subplot(1, 1, 1)
    return fig, ax


def note_panel(ax, text: str) -> None:
    """Replace an axes that would carry no information by a framed note saying why, its lines
    wrapped to the axes' width (matplotlib's own ``wrap`` follows the figure's)."""
    import textwrap

    from matplotlib.font_manager import FontProperties

    ax.set_axis_off()
    size_pt = FontProperties(size="small").get_size_in_points()
    width_in = ax.get_position().width * ax.figure.get_figwidth()
    chars = max(16, int(width_in * 72 / (0.55 * size_pt)) - 4)   # ~0.55 em a character, pad
    ax.text(0.5, 0.5, textwrap.fill(text, chars), ha="center", va="center", fontsize="small",
            transform=ax.transAxes, color=BASELINE_COLOR,
            bbox={"boxstyle": "round,pad=0.6", "facecolor": "#f2f2f2", "edgecolor": "#bbbbbb"})


def bars_from_zero(ax, why: Optional[str] = None, top: Optional[float] = None) -> None:
    """Bars start at zero: the y axis from 0 (``top``: its upper limit). With ``why`` (a bar
    chart whose values are negative, say) the lower limit is left as it is and the axis says
    why in a note under the axes."""
    if why:
        ax.annotate(why, xy=(0, 0), xycoords="axes fraction", xytext=(0, -28),
                    textcoords="offset points", fontsize="x-small", color=BASELINE_COLOR,
                    va="top", ha="left", annotation_clip=False)
        return
    ax.set_ylim(0.0, top if top is not None else None)


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
    values = np.concatenate([np.asarray(s["values"], float).ravel() for s in series]
                            or [np.zeros(1)])
    values = values[np.isfinite(values)]
    if values.size and values.min() < 0:
        ax.axhline(0.0, color=BASELINE_COLOR, linewidth=0.8, zorder=1)
        bars_from_zero(ax, why="negative values: the axis extends below 0 (line at 0)")
    else:
        bars_from_zero(ax)


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
            cmap = SEQUENTIAL_CMAP
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
                dark = v < mid if cmap in ("viridis", "cividis") else abs(v) > (hi - lo) / 4
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


def constant_points(xy, tol: float = 1e-6) -> bool:
    """Whether every point of ``xy`` (n, 2) is the same (up to ``tol`` of the coordinates'
    scale): such a map carries no information."""
    xy = np.asarray(xy, dtype=float)
    if len(xy) < 2:
        return True
    spread = np.ptp(xy, axis=0).max()
    return bool(spread <= tol * max(1.0, float(np.abs(xy).max())))


def scatter_panels(panels: Sequence[dict], ncols: int = 2, size: float = 3.2,
                   legend: Optional[Sequence[Tuple[str, str]]] = None, title: str = "",
                   user_label: str = "your sentences"):
    """A grid of 2-D maps with equal axes. Each panel: ``title``, ``xy`` (n, 2), ``colors``
    (n colours), optional ``labels`` (n strings, drawn when there are at most 60 points),
    ``highlight`` (a boolean mask: the user's own points, drawn above the others with a black
    outline and named ``user_label`` in the legend) and ``note`` (when given, the text shown
    instead of the map: :func:`elmo_engine.analysis.projection.collapsed_note` for a layer whose
    tokens fall on a few points; a map whose points are all the same is a note anyway).
    ``legend``: (label, colour) pairs shown once, outside the grid."""
    from matplotlib.lines import Line2D

    n = len(panels)
    rows = max(1, -(-n // ncols))
    fig = figure(size * ncols + (1.6 if legend else 0), size * rows)
    axes = fig.subplots(rows, ncols, squeeze=False)
    any_user = False
    user_colours: set = set()
    for k, ax in enumerate(axes.flat):
        if k >= n:
            ax.set_visible(False)
            continue
        p = panels[k]
        xy = np.asarray(p["xy"], dtype=float)
        ax.set_title(p.get("title", ""), fontsize="medium")
        if p.get("note") or constant_points(xy):
            note_panel(ax, p.get("note") or f"All {len(xy)} points are the same here: "
                                             "nothing to map.")
            continue
        colors = np.asarray(list(p["colors"]), dtype=object)
        mask = p.get("highlight")
        mask = np.zeros(len(xy), bool) if mask is None else np.asarray(mask, bool)
        ref = ~mask
        ax.scatter(xy[ref, 0], xy[ref, 1], c=list(colors[ref]), s=10, linewidths=0, alpha=0.55,
                   zorder=REFERENCE_ZORDER, label="_reference")
        if mask.any():
            any_user = True
            user_colours.update(str(c) for c in colors[mask])
            ax.scatter(xy[mask, 0], xy[mask, 1], c=list(colors[mask]), s=34, edgecolors="black",
                       linewidths=0.9, zorder=USER_ZORDER, label=user_label)
        labels = p.get("labels")
        if labels is not None and len(labels) <= 60:
            for (x, y), lab in zip(xy, labels):
                ax.annotate(lab, (x, y), xytext=(3, 2), textcoords="offset points",
                            fontsize="xx-small", zorder=USER_ZORDER + 1)
        ax.set_aspect("equal", adjustable="datalim")
        ax.tick_params(labelsize="x-small")
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=lab)
               for lab, c in (legend or [])]
    if any_user:          # their one colour, or white: "ringed", whatever the colour says
        face = next(iter(user_colours)) if len(user_colours) == 1 else "white"
        handles.append(Line2D([], [], marker="o", linestyle="", markerfacecolor=face,
                              markeredgecolor="black", label=user_label))
    if handles:
        fig.legend(handles=handles, loc="outside right upper", frameon=False, fontsize="small")
    if title:
        fig.suptitle(title, fontsize="medium")
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


def fit(fig, style: FigureStyle) -> None:
    """Give ``fig`` the style's size exactly (its height in proportion unless the style sets
    one) with constrained layout, and its text the style's font size: every text's size is
    scaled by ``font_pt / 10`` (the 10 pt matplotlib draws with by default)."""
    from matplotlib.text import Text

    w, h = fig.get_size_inches()
    height = style.height_in if style.height_in is not None else h * style.width_in / w
    fig.set_size_inches(style.width_in, height)
    engine = fig.get_layout_engine()
    if engine is None or type(engine).__name__ != "ConstrainedLayoutEngine":
        try:
            fig.set_layout_engine("constrained")
        except RuntimeError:               # a colour bar made for another engine: keep that one
            pass
    k = style.font_pt() / 10.0
    done = getattr(fig, "_elmo_font_scale", 1.0)
    for ax in fig.axes:                    # create the ticks now so that they are scaled too
        for axis in (ax.xaxis, ax.yaxis):
            axis.get_major_ticks()
    for t in fig.findobj(Text):
        t.set_fontsize(t.get_fontsize() * k / done)
    fig._elmo_font_scale = k


def render(fig, fmt: str, dpi: int = 150) -> bytes:
    """The figure as bytes of ``fmt`` (png, svg or pdf) at its own size (never cropped)."""
    fmt = fmt.lower().lstrip(".")
    if fmt not in FORMATS:
        raise InputError(f"unknown figure format {fmt!r}; use one of {', '.join(FORMATS)}")
    from matplotlib import rc_context

    buf = io.BytesIO()
    meta = {"png": {"Software": "ELMo Explorer"}, "svg": {"Creator": "ELMo Explorer"},
            "pdf": {"Creator": "ELMo Explorer", "CreationDate": None}}[fmt]
    scale = getattr(fig, "_elmo_font_scale", 1.0)
    with rc_context({"svg.fonttype": "none", "pdf.fonttype": 42,     # text stays text
                     "font.size": 10.0 * scale}):
        if fig.get_layout_engine() is None:
            fig.set_layout_engine("constrained")
        fig.savefig(buf, format=fmt, dpi=dpi, metadata=meta)
    return buf.getvalue()


def save(fig, path, formats: Optional[Iterable[str]] = None, dpi: Optional[int] = None,
         style: Optional[FigureStyle] = None) -> List[Path]:
    """Write the figure atomically at ``style``'s size and dpi (default :class:`FigureStyle`;
    ``dpi`` overrides its dpi). ``path`` with a suffix writes that format; without one (or with
    ``formats``) one file per format (``fig.png``, ``fig.svg`` …). New files get the mode the
    user's umask gives an ordinary file. Returns the paths written."""
    style = style or FigureStyle()
    fit(fig, style)
    dpi = style.dpi if dpi is None else dpi
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
        os.chmod(target, ordinary_mode())
        written.append(target)
    return written

