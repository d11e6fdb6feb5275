"""The Characters view's figures: the filter map (filters per width and category) and the
perturbation chart (mean cosine to the original per perturbation type, layer and direction),
drawn with the helpers of :mod:`elmo_engine.io.figures`."""
from __future__ import annotations

from typing import Dict, Mapping, Sequence

import numpy as np

from elmo_engine.io.figures import (OKABE_ITO, grouped_bars, layer_color, legend_outside,
                                    new_figure)

#: a colour per filter category (Okabe–Ito; word-internal and padding in greys)
CATEGORY_COLORS: Dict[str, str] = {
    "capitals": OKABE_ITO[5], "digits": OKABE_ITO[6], "punctuation": OKABE_ITO[7],
    "prefix": OKABE_ITO[3], "suffix": OKABE_ITO[1], "word-internal": "#BBBBBB",
    "padding": "#666666"}


def filter_map_figure(counts: Mapping[int, Mapping[str, int]], title: str = ""):
    """Filters per width (x) stacked by category; ``counts``: width → category → number."""
    fig, ax = new_figure(6.5, 3.6)
    widths = sorted(counts)
    bottom = np.zeros(len(widths))
    for cat, color in CATEGORY_COLORS.items():
        vals = np.array([counts[w].get(cat, 0) for w in widths], float)
        if not vals.any():
            continue
        ax.bar([str(w) for w in widths], vals, 0.7, bottom=bottom, color=color, label=cat,
               edgecolor="white", linewidth=0.5)
        bottom += vals
    ax.set_xlabel("filter width (characters)")
    ax.set_ylabel("filters")
    ax.spines[["top", "right"]].set_visible(False)
    legend_outside(ax, title="responds to")
    if title:
        ax.set_title(title, fontsize="medium")
    return fig


def perturbation_figure(summary: Mapping[str, Sequence[Sequence[float]]], title: str = ""):
    """Mean cosine to the original per perturbation type; ``summary``: type → (L+1, 3)
    (layer × both/forward/backward). Bars: layer 0, then each biLSTM layer's forward and
    backward halves."""
    kinds = list(summary)
    m = np.array([summary[k] for k in kinds], float)             # (K, L+1, 3)
    series = [{"label": "layer 0 (token)", "values": m[:, 0, 0], "color": layer_color(0)}]
    for layer in range(1, m.shape[1]):
        series.append({"label": f"layer {layer} forward", "values": m[:, layer, 1],
                       "color": layer_color(layer)})
        series.append({"label": f"layer {layer} backward", "values": m[:, layer, 2],
                       "color": layer_color(layer), "hatch": "///"})
    fig, ax = new_figure(9.0, 3.8)
    grouped_bars(ax, kinds, series, ylabel="cosine to the original")
    ax.set_xticklabels(kinds, rotation=30, ha="right", rotation_mode="anchor")
    ax.set_ylim(min(0.0, float(np.nanmin(m)) - 0.05), 1.0)
    ax.tick_params(axis="x", labelsize="small")
    legend_outside(ax)
    if title:
        ax.set_title(title, fontsize="medium")
    return fig
