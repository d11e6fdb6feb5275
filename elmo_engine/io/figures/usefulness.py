"""The usefulness-beside-identity figure (Tenney et al. 2019, "BERT Rediscovers the Classical NLP
Pipeline", §3): per task, the scalar-mix weights (± sd) and the gain Δℓ of adding layer ℓ
(± sd) as bars, the per-layer and the cumulative test scores as lines, and both expected layers
as vertical lines — the same drawing for the app's export, the report and the command line,
on the helpers of :mod:`elmo_engine.io.figures`."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from elmo_engine.io import figures as _F
from elmo_engine.io.figures import BASELINE_COLOR, note_panel

#: the scalar-mix weights and E_s: a neutral grey, so that the task's colour (blue for syntax,
#: vermillion for semantics — the mix's orange is too near the latter) marks the Δs and E_Δ
WEIGHT_COLOR = "#8a8a8a"


def usefulness_figure(tables: Sequence, colours: Sequence[str]):
    """One panel per table (:class:`~elmo_engine.analysis.probes.usefulness.Usefulness`), in
    the task's colour; a panel title marked ⚠ when the two expected layers disagree."""
    n = max(len(tables), 1)
    fig = _F.figure(3.3 * n + 1.7, 3.6)
    axes = np.atleast_1d(fig.subplots(1, n, squeeze=False)[0])
    if not tables:
        note_panel(axes[0], "no usefulness table yet: run a probe with --cumulative")
        return fig
    low = 0.0
    for ax, t, colour in zip(axes, tables, colours):
        low = min(low, _panel(ax, t, colour))
    for ax in axes:
        ax.set_ylim(low, 1.25)                        # room above the scores for E_s and E_Δ
        ax.set_yticks([v for v in np.arange(-1.0, 1.01, 0.2) if v >= low - 1e-9])
    if low < 0:
        axes[0].annotate("a negative Δ: the axis extends below 0 (line at 0)", xy=(0, 0),
                         xycoords="axes fraction", xytext=(0, -46), textcoords="offset points",
                         fontsize="x-small", color=BASELINE_COLOR, va="top", ha="left",
                         annotation_clip=False)
    _legend(axes[-1])
    return fig


def _legend(ax) -> None:
    """The legend beside the last panel, task-coloured items drawn in a neutral dark grey (the
    panels' own colours say which task)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    task = "#333333"
    handles = [Patch(color=WEIGHT_COLOR, label="scalar-mix weight (± sd)"),
               Patch(color=task, label="Δℓ: gain of adding layer ℓ (± sd; task colour)"),
               Line2D([], [], color=task, marker="o", label="per-layer score"),
               Line2D([], [], color=task, marker="s", linestyle="--",
                      label="cumulative score, layers 0..ℓ"),
               Line2D([], [], color=WEIGHT_COLOR, label="E_s: expected layer from the weights"),
               Line2D([], [], color=task, linestyle=":", label="E_Δ: expected layer from the Δs")]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0,
              frameon=False, fontsize="small")


def _panel(ax, t, colour: str) -> float:
    """Draw one task; returns the lowest value drawn (for a shared y range)."""
    k = len(t.rows)
    x = np.arange(k, dtype=float)
    w = np.array([r.weight for r in t.rows])
    w_sd = np.array([r.weight_sd for r in t.rows])
    d = np.array([np.nan if r.delta is None else r.delta for r in t.rows])
    d_sd = np.array([0.0 if r.delta_sd is None else r.delta_sd for r in t.rows])
    step = 0.36
    ax.bar(x - step / 2, w, step * 0.92, yerr=w_sd, color=WEIGHT_COLOR, capsize=2.5,
           edgecolor="white", linewidth=0.5, error_kw={"elinewidth": 0.9},
           )
    ax.bar(x[1:] + step / 2, d[1:], step * 0.92, yerr=d_sd[1:], color=colour,
           capsize=2.5, edgecolor="white", linewidth=0.5, error_kw={"elinewidth": 0.9},
           label="Δℓ: gain of adding layer ℓ (± sd)")
    ax.plot(x, [r.score for r in t.rows], color=colour, marker="o", markersize=4,
            linewidth=1.5, label="per-layer score")
    ax.plot(x, [r.cumulative for r in t.rows], color=colour, marker="s", markersize=3.5,
            linewidth=1.2, linestyle="--", label="cumulative score, layers 0..ℓ")
    ax.axhline(0.0, color=BASELINE_COLOR, linewidth=0.8, zorder=1)
    _expected(ax, t.expected_from_weights, WEIGHT_COLOR, "-",
              f"E_s = {t.expected_from_weights:.2f}", 0.99)
    if t.expected_from_deltas is not None:
        _expected(ax, t.expected_from_deltas, colour, ":",
                  f"E_Δ = {t.expected_from_deltas:.2f}", 0.93)
    ax.set_xticks(x)
    ax.set_xticklabels([str(h) for h in range(k)])
    ax.set_xlabel("layer ℓ")
    ax.set_xlim(-0.6, k - 0.4)
    ax.set_ylabel("score / weight / gain")
    ax.spines[["top", "right"]].set_visible(False)
    ax.set_title(("⚠ " if t.disagree else "") + t.name, fontsize="medium")
    values: List[float] = [0.0, *np.nan_to_num(d - d_sd, nan=0.0).tolist()]
    return min(values) - (0.05 if min(values) < 0 else 0.0)


def _expected(ax, at: float, colour: str, style: str, text: str, y: float) -> None:
    ax.axvline(at, color=colour, linestyle=style, linewidth=1.6, zorder=4)
    ax.annotate(text, xy=(at, y), xycoords=("data", "axes fraction"), xytext=(3, 0),
                textcoords="offset points", fontsize="x-small", color=colour, va="top",
                ha="left")


def usefulness_results_figure(results: Sequence):
    """The figure of the probe runs that carry a usefulness table, in their task colours."""
    from elmo_engine.io.figures.probes import run_colors

    runs = [r for r in results if getattr(r, "usefulness", None) is not None]
    return usefulness_figure([r.usefulness for r in runs], run_colors(runs))


__all__ = ["WEIGHT_COLOR", "usefulness_figure", "usefulness_results_figure"]
