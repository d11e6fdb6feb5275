"""The Units figures: the top-k curve of a units ranking (Dalvi et al. 2019, NeuroX: how few
units carry a property) — per layer, direction and state, the held-out accuracy of a probe on
the top-k units of each ranking method against k random units (mean ± sd over the seeds, a
band), k on a log₂ axis, the all-unit accuracy and the majority baseline as lines. Drawn from
``units rank --json``'s rankings (:func:`elmo_engine.analysis.units.rank.ranking_json`), the
form the Units view saves, so the view, its export, the report and ``units rank --figure``
draw the same figure.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Sequence

import numpy as np

from elmo_engine.io.figures import OKABE_ITO, baseline, figure, lines, note_panel

#: a colour and a line style per ranking method, and the random draws'
METHOD_STYLE = {"mean-diff": (OKABE_ITO[5], "-", "top k (class-mean difference)"),
                "elastic-net": (OKABE_ITO[1], "--", "top k (elastic net)")}
RANDOM_STYLE = ("#777777", ":", "k random (mean ± sd)")


def curve_series(ranking: Mapping[str, Any]) -> Dict[str, Dict[str, List[float]]]:
    """Per method, the curve's ``k``, ``top``, ``random_mean`` and ``random_sd`` sorted by k
    (the random draws of the class-mean difference's points; the elastic net's draw the same
    units)."""
    out: Dict[str, Dict[str, List[float]]] = {}
    for p in sorted(ranking.get("curve", []), key=lambda p: (p["method"], p["k"])):
        s = out.setdefault(p["method"], {"k": [], "top": [], "random_mean": [], "random_sd": []})
        for key in s:
            s[key].append(float(p[key]))
    return out


def panel_title(ranking: Mapping[str, Any]) -> str:
    return f"layer {ranking['layer']} {ranking['direction']} {ranking['state']}"


def draw_curve(ax, ranking: Mapping[str, Any]) -> None:
    """One ranking's curve on ``ax`` (a note when it has none)."""
    series = curve_series(ranking)
    if not series:
        note_panel(ax, "no top-k curve (ranked with no k)")
        return
    drawn: List[dict] = []
    random_done = False
    xs: np.ndarray = np.zeros(0)
    for method, s in series.items():
        color, style, label = METHOD_STYLE.get(method, (OKABE_ITO[3], "-", f"top k ({method})"))
        xs = np.asarray(s["k"])
        drawn.append({"label": label, "values": s["top"], "color": color, "style": style})
        if not random_done:
            rc, rs, rl = RANDOM_STYLE
            drawn.append({"label": rl, "values": s["random_mean"], "errors": s["random_sd"],
                          "color": rc, "style": rs, "marker": "s"})
            random_done = True
    lines(ax, list(xs), drawn, xlabel="k (units)", ylabel="held-out accuracy")
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs)
    ax.set_xticklabels([str(int(k)) for k in xs], fontsize="small")
    full = ranking.get("accuracy_all")
    if isinstance(full, (int, float)) and math.isfinite(full):
        baseline(ax, float(full), f"all units {full:.3f}", color=OKABE_ITO[3], style="--")
    maj = ranking.get("majority")
    if isinstance(maj, (int, float)) and math.isfinite(maj):
        baseline(ax, float(maj), f"majority {maj:.3f}")
    ax.set_ylim(0, 1.02)
    ax.set_title(panel_title(ranking), fontsize="medium")


def topk_figure(rankings: Sequence[Mapping[str, Any]], title: str = "", ncols: int = 4):
    """The top-k curve of every ranking, one panel each (``ncols`` per row), one legend."""
    n = max(1, len(rankings))
    cols = min(ncols, n)
    rows = -(-n // cols)
    fig = figure(2.6 * cols + 0.4, 2.4 * rows + 0.9)
    axes = [fig.add_subplot(rows, cols, j + 1) for j in range(n)]
    if not rankings:
        note_panel(axes[0], "no rankings")
        return fig
    for ax, r in zip(axes, rankings):
        draw_curve(ax, r)
    for j, ax in enumerate(axes):
        if j % cols:
            ax.set_ylabel("")
        if j < n - cols:
            ax.set_xlabel("")
    handles, labels = axes[0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=min(3, len(handles)),
                   fontsize="small", frameon=False)
    if title:
        fig.suptitle(title, fontsize="medium")
    return fig
