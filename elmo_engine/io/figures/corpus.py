"""The Corpus view's figures (a word's occurrences mapped per layer, its induced senses per
layer), drawn with the helpers of :mod:`elmo_engine.io.figures`, the one figure module.

A map of 10^5–10^6 points is drawn as a **density image** (Embedding Atlas, Ren et al. 2025,
draws its zoomed-out views this way): the points are binned onto a pixel grid, each bin's colour
is the count-weighted mean of its points' category colours and its opacity grows with the log of
its count. :func:`density_rgba` is that binning; the app's on-screen map uses the same function,
so the screen and the files agree.
"""
from __future__ import annotations

from typing import Sequence, Tuple

import numpy as np

from elmo_engine.io.figures import layer_color, new_figure

#: up to this many points a map panel draws points; above, the density image
FIGURE_POINTS_MAX = 20_000


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


def _bounds(xy: np.ndarray) -> Tuple[float, float, float, float]:
    lo, hi = xy.min(0), xy.max(0)
    pad = np.maximum((hi - lo) * 0.03, 1e-6)
    return float(lo[0] - pad[0]), float(lo[1] - pad[1]), float(hi[0] + pad[0]), \
        float(hi[1] + pad[1])


def corpus_map_figure(panels: Sequence[dict], colours: Sequence[str],
                      legend: Sequence[Tuple[str, str, int]] = (), title: str = "",
                      size: float = 3.4):
    """A word's occurrences mapped per layer, one panel each. Each panel: ``title``, ``xy``
    ``(N, 2)``, ``codes`` ``(N,)`` (indices into ``colours``), optional ``selected`` (a point
    index ringed in black). Up to :data:`FIGURE_POINTS_MAX` points a panel draws them, above
    it the :func:`density_rgba` image. ``legend``: ``(name, colour, count)`` rows."""
    from matplotlib.lines import Line2D

    n = max(1, len(panels))
    fig, axes = new_figure(size * n + (2.4 if legend else 0.0), size)
    fig.clear()
    axes = fig.subplots(1, n, squeeze=False)[0]
    for ax, p in zip(axes, panels):
        xy = np.asarray(p["xy"], np.float32)
        codes = np.asarray(p["codes"], np.int64)
        if len(xy) > FIGURE_POINTS_MAX:
            rect = _bounds(xy)
            img = density_rgba(xy, codes, colours, rect, (300, 300))
            ax.imshow(img, origin="lower", extent=(rect[0], rect[2], rect[1], rect[3]),
                      interpolation="nearest", aspect="auto")
        elif len(xy):
            ax.scatter(xy[:, 0], xy[:, 1], c=[colours[c] for c in codes], s=6,
                       linewidths=0, alpha=0.8)
        sel = p.get("selected")
        if sel is not None and 0 <= int(sel) < len(xy):
            ax.scatter([xy[sel, 0]], [xy[sel, 1]], s=60, facecolors="none",
                       edgecolors="black", linewidths=1.5)
        ax.set_title(f"{p.get('title', '')} ({len(xy):,} points)", fontsize="medium")
        ax.set_xticks([])
        ax.set_yticks([])
    if legend:
        handles = [Line2D([], [], marker="o", linestyle="", color=c, label=f"{name} ({count:,})")
                   for name, c, count in legend]
        fig.legend(handles=handles, loc="outside right upper", frameon=False,
                   fontsize="small")
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

