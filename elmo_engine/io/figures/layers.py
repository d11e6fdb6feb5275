"""The Layers view's figures (contextuality curves, CKA heatmaps, MDL bars), drawn with the
helpers of :mod:`elmo_engine.io.figures`, the one figure module."""
from __future__ import annotations

from typing import Dict, Sequence, Tuple

import numpy as np

from elmo_engine.io import figures as _F
from elmo_engine.io.figures import (PALETTE, baseline, grouped_bars, heatmap, legend_outside,
                                    new_figure, task_color)


#: the directions of a biLM layer (the whole vector, the forward and the backward LSTM halves)
DIRECTION_COLORS: Dict[str, str] = {"both": "#253494", "forward": PALETTE[0], "backward": PALETTE[7]}
#: the three contextuality measures (Ethayarajh 2019): JSON key → axis title
MEASURES: Tuple[Tuple[str, str], ...] = (
    ("self_similarity", "self-similarity"), ("intra_sentence_similarity", "intra-sentence similarity"),
    ("max_explainable_variance", "max. explainable variance"))


def contextuality_figure(ctx: dict, adjusted: bool = False, title: str = ""):
    """The three contextuality measures per layer (``ctx``: the ``contextuality`` object of
    ``layers --json``), one panel each, a curve per direction and its anisotropy baseline as a
    dashed curve in the same colour; ``adjusted``: value − baseline, with 0 as the baseline."""
    fig = _F.figure(11.0, 3.4)
    axes = fig.subplots(1, len(MEASURES))
    layers = ctx["layers"]
    for ax, (key, name) in zip(axes, MEASURES):
        for d, color in DIRECTION_COLORS.items():
            pts = [(e["layer"], e["directions"][d][key]) for e in layers if d in e["directions"]]
            pts = [(x, v) for x, v in pts if v.get("value") is not None]
            if not pts:
                continue
            xs = np.array([x for x, _ in pts], float)
            val = np.array([v["adjusted" if adjusted else "value"] for _, v in pts], float)
            ax.plot(xs, val, marker="o", markersize=3.5, color=color, label=d, linewidth=1.5)
            if not adjusted:
                base = np.array([v["baseline"] for _, v in pts], float)
                ax.plot(xs, base, linestyle="--", marker="x", markersize=3, color=color,
                        linewidth=1.0, label=f"{d}: baseline")
        if adjusted:
            baseline(ax, 0.0, "baseline")
        ax.set_title(name + (" − baseline" if adjusted else ""), fontsize="medium")
        ax.set_xlabel("layer")
        ax.set_xticks(range(len(layers)))
        ax.spines[["top", "right"]].set_visible(False)
    legend_outside(axes[-1])
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def cka_figure(cka: dict, title: str = "", xlabel: str = "layer", ylabel: str = "layer"):
    """A CKA matrix (the ``cka`` object of ``layers --json``) as an annotated heatmap on [0, 1]
    with a labelled colour bar."""
    fig, ax = new_figure(5.2, 4.2)
    m = np.array([[np.nan if v is None else v for v in row] for row in cka["matrix"]], float)
    heatmap(fig, ax, m, cka["rows"], cka["columns"], f"linear CKA ({cka['estimator']})",
            vmin=0.0, vmax=1.0, annotate=True, xlabel=xlabel, ylabel=ylabel)
    if title:
        ax.set_title(title, fontsize="medium")
    return fig


def mdl_figure(mdls: Sequence[dict], title: str = ""):
    """Online codelength (kbits) and compression per layer and the mix, a bar series per task
    (each a ``mdl`` object of ``layers --json``)."""
    fig = _F.figure(9.0, 3.4)
    axes = fig.subplots(1, 2)
    cats: list = []                    # every task's layers and mix, in order (a task without
    for m in mdls:                     # one of them gets no bar there)
        cats += [c["name"] for c in m["layers"] + ([m["mix"]] if m.get("mix") else [])
                 if c["name"] not in cats]
    for ax, key, ylabel, scale in ((axes[0], "online_codelength_bits", "online codelength (kbits)",
                                    1e-3), (axes[1], "compression", "compression (uniform / online)", 1)):
        series = []
        for i, m in enumerate(mdls):
            codes = {c["name"]: c for c in m["layers"] + ([m["mix"]] if m.get("mix") else [])}
            kind = "semantics" if "wsd" in str(m.get("task")) or "sense" in str(m.get("task")) else "syntax"
            series.append({"label": str(m.get("task", f"task {i}")),
                           "values": [codes[c][key] * scale if c in codes else np.nan
                                      for c in cats],
                           "color": task_color(kind, i, light=i >= 2)})
        grouped_bars(ax, cats, series, ylabel)
    legend_outside(axes[1], title="task")
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig


def hubness_figure(h: dict, title: str = ""):
    """Hubness per layer (the ``hubness`` object of ``layers --json``; Radovanović et al.
    2010): left, the skewness of the k-occurrence N_k per layer; right, how many tokens have
    each N_k, one curve per layer (log scale: the hubs are the long right tail)."""
    fig = _F.figure(9.0, 3.4)
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1, 2]})
    layers = h["layers"]
    xs = [e["layer"] for e in layers]
    left.bar(xs, [e["skewness"] for e in layers], color=[_F.layer_color(x) for x in xs])
    left.set_xticks(xs)
    left.set_xlabel("layer")
    left.set_ylabel(f"skewness of N_{h['k']}")
    left.axhline(0.0, color=_F.BASELINE_COLOR, linewidth=0.8)
    for e in layers:
        dist = np.asarray(e["distribution"], float)
        v = np.flatnonzero(dist)
        right.plot(v, dist[v], marker="o", markersize=2.5, linewidth=1.2,
                   color=_F.layer_color(e["layer"]),
                   label=f"layer {e['layer']} (top: {e['hubs'][0]['token']!r} "
                         f"{e['hubs'][0]['count']})" if e["hubs"] else f"layer {e['layer']}")
    right.set_yscale("log")
    right.set_xlabel(f"N_{h['k']}: how many tokens have this one among their {h['k']} nearest")
    right.set_ylabel("tokens")
    legend_outside(right)
    fig.suptitle(title or f"Hubness per layer ({h['n']:,} tokens, k={h['k']}, {h['metric']})",
                 fontsize="medium")
    return fig
