"""The Corpus view's figures (a word's occurrences mapped per layer, its induced senses per
layer), drawn with the helpers of :mod:`elmo_engine.io.figures`, the one figure module.

A map of 10^5–10^6 points is drawn as a **density image** (Embedding Atlas, Ren et al. 2025,
draws its zoomed-out views this way): the points are binned onto a pixel grid, each bin's colour
is the count-weighted mean of its points' category colours and its opacity grows with the log of
its count. :func:`density_rgba` is that binning; the app's on-screen map uses the same function,
so the screen and the files agree.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from elmo_engine.io.figures import layer_color, new_figure

#: up to this many points a map panel draws points; above, the density image
FIGURE_POINTS_MAX = 20_000
#: a selection shaded as a density image: opacity scale over the map (the app's own)
SELECTION_SHADE = 0.5
#: the map's legend, under the panels: this many entries a row, this many inches a row
LEGEND_COLUMNS = 4
LEGEND_ROW_IN = 0.24


def hex_rgb(colour: str) -> Tuple[float, float, float]:
    c = colour.lstrip("#")
    return tuple(int(c[i:i + 2], 16) / 255.0 for i in (0, 2, 4))     # type: ignore[return-value]


def density_rgba(coords: np.ndarray, codes: np.ndarray, colours: Sequence[str],
                 rect: Tuple[float, float, float, float], shape: Tuple[int, int],
                 min_alpha: float = 0.3) -> np.ndarray:
    """The points ``coords`` ``(N, 2)`` of categories ``codes`` ``(N,)`` (indices into
    ``colours``) binned over ``rect = (x0, y0, x1, y1)`` onto ``shape = (rows, cols)``.

    Returns ``(rows, cols, 4)`` uint8 RGBA, row 0 at ``y0``: a bin's colour is the mean of its
    points' colours, its alpha ``min_alpha`` + the rest scaled by log(1 + count) against the
    fullest bin; empty bins are transparent."""
    h, w = int(shape[0]), int(shape[1])
    x0, y0, x1, y1 = (float(v) for v in rect)
    k = len(colours)
    xy = np.asarray(coords, np.float32)
    ix = np.floor((xy[:, 0] - x0) / max(x1 - x0, 1e-12) * w).astype(np.int64)     # (N,)
    iy = np.floor((xy[:, 1] - y0) / max(y1 - y0, 1e-12) * h).astype(np.int64)     # (N,)
    inside = (ix >= 0) & (ix < w) & (iy >= 0) & (iy < h)
    flat = (np.asarray(codes, np.int64)[inside] * h + iy[inside]) * w + ix[inside]
    counts = np.bincount(flat, minlength=k * h * w).reshape(k, h, w).astype(np.float32)
    total = counts.sum(0)                                                          # (h, w)
    rgb = np.array([hex_rgb(c) for c in colours], np.float32)                     # (K, 3)
    mean = np.einsum("khw,kc->hwc", counts, rgb) / np.maximum(total, 1)[..., None]
    top = float(total.max()) if total.size else 0.0
    alpha = np.where(total > 0, min_alpha + (1 - min_alpha) * np.log1p(total)
                     / max(np.log1p(top), 1e-12), 0.0)
    out = np.empty((h, w, 4), np.uint8)
    out[..., :3] = np.clip(mean * 255 + 0.5, 0, 255).astype(np.uint8)
    out[..., 3] = np.clip(alpha * 255 + 0.5, 0, 255).astype(np.uint8)
    return out


Rect = Tuple[float, float, float, float]          # x0, y0, x1, y1 (data coordinates)


@dataclass(frozen=True)
class MapPanel:
    """One layer's panel of the map: ``xy`` ``(N, 2)`` coloured by ``codes`` ``(N,)``
    (indices into the figure's colours); ``query``: the point of the query's occurrence (ringed
    in :attr:`MapMarks.query_colour`); ``box``: the selection box drawn on this panel (data
    coordinates, any corner order)."""

    title: str
    xy: np.ndarray
    codes: np.ndarray
    query: Optional[int] = None
    box: Optional[Rect] = None


@dataclass(frozen=True)
class MapMarks:
    """What is marked over every panel, and in which colours (the app passes its on-screen
    ones): the query's ring, and the selected points (indices into every panel's ``xy``: the
    same occurrences in every layer) ringed — or, above :data:`FIGURE_POINTS_MAX` of them, shaded
    as a grey density image — and the box outlined."""

    query_colour: str = "#000000"
    selected: Optional[np.ndarray] = None             # (n,) int64
    selection_colour: str = "#000000"


def _bounds(xy: np.ndarray) -> Tuple[float, float, float, float]:
    lo, hi = xy.min(0), xy.max(0)
    pad = np.maximum((hi - lo) * 0.03, 1e-6)
    return float(lo[0] - pad[0]), float(lo[1] - pad[1]), float(hi[0] + pad[0]), \
        float(hi[1] + pad[1])


def _draw_selection(ax, xy: np.ndarray, rect: Rect, idx: np.ndarray, colour: str) -> None:
    """Ring the points ``idx`` of ``xy`` in ``colour`` (more than :data:`FIGURE_POINTS_MAX`: a
    grey density image of them over ``rect``, as the app shades a big selection)."""
    if len(idx) > FIGURE_POINTS_MAX:
        img = density_rgba(xy[idx], np.zeros(len(idx), np.int32), ["#202020"], rect,
                           (300, 300), min_alpha=0.35)
        img[..., 3] = (img[..., 3] * SELECTION_SHADE).astype(np.uint8)
        ax.imshow(img, origin="lower", extent=(rect[0], rect[2], rect[1], rect[3]),
                  interpolation="nearest", aspect="auto", zorder=2)
    elif len(idx):
        ax.scatter(xy[idx, 0], xy[idx, 1], s=16, facecolors="none", edgecolors=colour,
                   linewidths=0.6, zorder=3)


def _draw_box(ax, box: Rect, colour: str) -> None:
    """The box's outline, clipped to the panel's limits (a box dragged past the data does not
    widen the panel); nothing when it lies outside them."""
    from matplotlib.patches import Rectangle

    (ax0, ax1), (ay0, ay1) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
    x0, y0 = max(min(box[0], box[2]), ax0), max(min(box[1], box[3]), ay0)
    x1, y1 = min(max(box[0], box[2]), ax1), min(max(box[1], box[3]), ay1)
    if x1 < x0 or y1 < y0:
        return
    ax.add_patch(Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, edgecolor=colour,
                           linestyle="--", linewidth=1.2, zorder=4, label="selection box"))
    ax.set_xlim(ax0, ax1)
    ax.set_ylim(ay0, ay1)


def _draw_query(ax, x: float, y: float, colour: str) -> None:
    """A ring in ``colour`` edged in black (a yellow ring would vanish on white alone)."""
    ax.scatter([x], [y], s=90, facecolors="none", edgecolors="black", linewidths=3.4,
               zorder=5)
    ax.scatter([x], [y], s=90, facecolors="none", edgecolors=colour, linewidths=2.0,
               zorder=6, label="query")


def corpus_map_figure(panels: Sequence[MapPanel], colours: Sequence[str],
                      legend: Sequence[Tuple[str, str, int]] = (), title: str = "",
                      size: float = 3.4, marks: MapMarks = MapMarks()):
    """A word's occurrences mapped per layer, one :class:`MapPanel` each. Up to
    :data:`FIGURE_POINTS_MAX` points a panel draws them, above it the :func:`density_rgba`
    image; over them the :class:`MapMarks` (the selection, then the box, then the query's
    ring). ``legend``: ``(name, colour, count)`` rows."""
    from matplotlib.lines import Line2D

    n = max(1, len(panels))
    selected = (np.zeros(0, np.int64) if marks.selected is None
                else np.asarray(marks.selected, np.int64).reshape(-1))
    handles = [Line2D([], [], marker="o", linestyle="", color=c, label=f"{name} ({count:,})")
               for name, c, count in legend]
    if legend and any(p.query is not None for p in panels):
        handles.append(Line2D([], [], marker="o", linestyle="", markersize=9,
                              markerfacecolor="none", markeredgewidth=2.0,
                              markeredgecolor=marks.query_colour, label="the query"))
    if legend and len(selected):
        handles.append(Line2D([], [], marker="s", linestyle="--", markersize=8,
                              markerfacecolor="none", color=marks.selection_colour,
                              label=f"box selection ({len(selected):,})"))
    ncols = min(LEGEND_COLUMNS, max(1, len(handles)))
    rows = -(-len(handles) // ncols)                 # the legend's rows, under the panels
    fig, axes = new_figure(size * n, size + LEGEND_ROW_IN * rows)
    fig.clear()
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, p in zip(axes, panels):
        xy = np.asarray(p.xy, np.float32)
        codes = np.asarray(p.codes, np.int64)
        rect = _bounds(xy) if len(xy) else (-1.0, -1.0, 1.0, 1.0)
        if len(xy) > FIGURE_POINTS_MAX:
            img = density_rgba(xy, codes, colours, rect, (300, 300))
            ax.imshow(img, origin="lower", extent=(rect[0], rect[2], rect[1], rect[3]),
                      interpolation="nearest", aspect="auto")
        elif len(xy):
            ax.scatter(xy[:, 0], xy[:, 1], c=[colours[c] for c in codes], s=6,
                       linewidths=0, alpha=0.8)
        idx = selected[(selected >= 0) & (selected < len(xy))]
        _draw_selection(ax, xy, rect, idx, marks.selection_colour)
        if p.box is not None:
            _draw_box(ax, p.box, marks.selection_colour)
        if p.query is not None and 0 <= int(p.query) < len(xy):
            _draw_query(ax, float(xy[p.query, 0]), float(xy[p.query, 1]), marks.query_colour)
        ax.set_title(f"{p.title} ({len(xy):,} points)", fontsize="medium")
        ax.set_xticks([])
        ax.set_yticks([])
    if handles:
        fig.legend(handles=handles, loc="outside lower center", frameon=False,
                   fontsize="small", ncols=ncols)
    if title:
        fig.suptitle(title)
    return fig


def senses_figure(word: str, layers: Sequence[dict], colours: Sequence[str]):
    """Induced senses per layer as stacked bars (one bar per layer, a segment per cluster, its
    share of the occurrences, labelled with its most distinctive context words). Each entry of
    ``layers``: ``layer``, ``silhouette``, ``clusters`` = ``[(size, "word, word"), …]``."""
    fig, ax = new_figure(6.4, 3.6)
    names = [f"layer {e['layer']}" for e in layers]
    for i, e in enumerate(layers):
        sizes = [s for s, _ in e["clusters"]]
        total = max(1, sum(sizes))
        left = 0.0
        for c, (s, words) in enumerate(e["clusters"]):
            share = s / total
            ax.barh(i, share, left=left, color=colours[c % len(colours)],
                    edgecolor="white", linewidth=0.8)
            if share > 0.12 and words:
                r, g, b = hex_rgb(colours[c % len(colours)])
                dark = 0.2126 * r + 0.7152 * g + 0.0722 * b < 0.5     # relative luminance
                ax.text(left + share / 2, i, words, ha="center", va="center",
                        fontsize="x-small", clip_on=True, color="white" if dark else "black")
            left += share
        sil = e.get("silhouette")
        note = f"k={len(sizes)}" + (f", silhouette {sil:.2f}" if sil == sil and sil is not None
                                    else "")
        ax.text(1.01, i, note, va="center", fontsize="small", color=layer_color(e["layer"]),
                transform=ax.get_yaxis_transform())
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(names)
    ax.invert_yaxis()
    ax.set_xlim(0, 1)
    ax.set_xlabel(f"share of the occurrences of “{word}”")
    ax.set_title(f"Induced senses of “{word}” per layer (k-means, k by silhouette)",
                 fontsize="medium")
    ax.spines[["top", "right"]].set_visible(False)
    return fig

