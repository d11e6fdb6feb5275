"""Figures for reports written without Qt: SVG heatmaps and grouped bar charts.

Plain SVG text with titles, axis labels and legends, readable in any browser; the app draws its
own figures with Qt, and ``elmo-explorer export report`` uses these.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

PALETTE = ["#2471a3", "#c0392b", "#27ae60", "#8e44ad", "#e67e22", "#17a589", "#7f8c8d"]


def _esc(text: str) -> str:
    return (str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


def _colour(v: float) -> str:
    """Cosine in [-1, 1] → a diverging blue–white–red colour."""
    v = max(-1.0, min(1.0, float(v))) if np.isfinite(v) else 0.0
    a = abs(v)
    tgt = (178, 24, 43) if v >= 0 else (33, 102, 172)
    r, g, b = (round(255 + (c - 255) * a) for c in tgt)
    return f"#{r:02x}{g:02x}{b:02x}"


def svg_heatmaps(mats: np.ndarray, names: Sequence[str], word: str, cell: float = 0.0) -> str:
    """Side-by-side heatmaps ``(K, n, n)`` with titles, axis labels and a colour-bar legend."""
    k_views, n = mats.shape[0], mats.shape[1]
    size = 220.0
    cell = cell or size / max(n, 1)
    gap, left, top = 30.0, 50.0, 50.0
    width = left + k_views * (size + gap) + 80
    height = top + size + 60
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
           f"viewBox='0 0 {width:.0f} {height:.0f}' font-family='sans-serif' font-size='13'>",
           f"<rect width='100%' height='100%' fill='white'/>",
           f"<text x='{left}' y='20' font-size='15'>Cosine similarity of '{_esc(word)}' "
           f"({n} occurrences)</text>"]
    for k in range(k_views):
        x0 = left + k * (size + gap)
        out.append(f"<text x='{x0 + size / 2:.1f}' y='{top - 8}' text-anchor='middle'>"
                   f"{_esc(names[k])}</text>")
        for i in range(n):
            for j in range(n):
                out.append(f"<rect x='{x0 + j * cell:.2f}' y='{top + i * cell:.2f}' "
                           f"width='{cell + 0.3:.2f}' height='{cell + 0.3:.2f}' "
                           f"fill='{_colour(mats[k, i, j])}'/>")
        out.append(f"<rect x='{x0}' y='{top}' width='{size}' height='{size}' fill='none' "
                   "stroke='#444'/>")
        step = max(1, math.ceil(n / 10))
        for i in range(0, n, step):                     # occurrence numbers on both axes
            c = (i + 0.5) * cell
            out.append(f"<text x='{x0 + c:.1f}' y='{top + size + 13}' font-size='10' "
                       f"text-anchor='middle'>{i + 1}</text>")
            if k == 0:
                out.append(f"<text x='{x0 - 4}' y='{top + c + 4:.1f}' font-size='10' "
                           f"text-anchor='end'>{i + 1}</text>")
        out.append(f"<text x='{x0 + size / 2:.1f}' y='{top + size + 32}' text-anchor='middle'>"
                   "occurrence</text>")
    out.append(f"<text transform='translate({left - 22},{top + size / 2}) rotate(-90)' "
               "text-anchor='middle'>occurrence</text>")
    bx = left + k_views * (size + gap)
    for s in range(100):
        v = 1 - 2 * s / 99
        out.append(f"<rect x='{bx:.1f}' y='{top + s * size / 100:.2f}' width='14' "
                   f"height='{size / 100 + 0.3:.2f}' fill='{_colour(v)}'/>")
    for v, y in (("+1", top + 5), ("0", top + size / 2 + 4), ("−1", top + size)):
        out.append(f"<text x='{bx + 20:.1f}' y='{y:.1f}'>{v}</text>")
    out.append(f"<text x='{bx - 4:.1f}' y='{top + size + 32}'>cosine</text></svg>")
    return "\n".join(out) + "\n"


def svg_bars(weights: Sequence[Sequence[float]], names: Sequence[str]) -> str:
    """Grouped bars: per layer, one bar per run; axis labels, ticks and a legend."""
    n_runs = max(len(weights), 1)
    k_max = max((len(w) for w in weights), default=1)
    left, top, pw, ph = 60.0, 40.0, 110.0 * k_max, 220.0
    width, height = left + pw + 220, top + ph + 60
    bw = 0.8 * (pw / k_max) / n_runs
    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{width:.0f}' height='{height:.0f}' "
           f"viewBox='0 0 {width:.0f} {height:.0f}' font-family='sans-serif' font-size='13'>",
           "<rect width='100%' height='100%' fill='white'/>",
           f"<text x='{left}' y='22' font-size='15'>Scalar-mix layer weights</text>"]
    for tick in range(6):
        v = tick / 5
        y = top + ph - v * ph
        out.append(f"<line x1='{left}' x2='{left + pw}' y1='{y:.1f}' y2='{y:.1f}' stroke='#ddd'/>")
        out.append(f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{v:.1f}</text>")
    for r, w in enumerate(weights):
        for k, v in enumerate(w):
            x = left + k * (pw / k_max) + 0.1 * (pw / k_max) + r * bw
            h = max(0.0, min(1.0, float(v))) * ph
            out.append(f"<rect x='{x:.1f}' y='{top + ph - h:.1f}' width='{bw * 0.92:.1f}' "
                       f"height='{h:.1f}' fill='{PALETTE[r % len(PALETTE)]}'/>")
    for k in range(k_max):
        out.append(f"<text x='{left + (k + 0.5) * pw / k_max:.1f}' y='{top + ph + 18}' "
                   f"text-anchor='middle'>layer {k}</text>")
    out.append(f"<line x1='{left}' x2='{left + pw}' y1='{top + ph}' y2='{top + ph}' stroke='#444'/>")
    out.append(f"<line x1='{left}' x2='{left}' y1='{top}' y2='{top + ph}' stroke='#444'/>")
    out.append(f"<text x='{left + pw / 2:.1f}' y='{top + ph + 42}' text-anchor='middle'>biLM layer"
               "</text>")
    out.append(f"<text transform='translate(18,{top + ph / 2}) rotate(-90)' text-anchor='middle'>"
               "mix weight (softmax)</text>")
    for r, name in enumerate(names):
        y = top + 10 + r * 20
        out.append(f"<rect x='{left + pw + 20}' y='{y - 10}' width='12' height='12' "
                   f"fill='{PALETTE[r % len(PALETTE)]}'/>")
        out.append(f"<text x='{left + pw + 38}' y='{y}'>{_esc(name)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"
