"""The Probes view's figure: scalar-mix weights and test scores per layer (the same drawing for
app exports, reports and the command line), drawn with the helpers of
:mod:`elmo_engine.io.figures`, and the colours the app's on-screen plots use for the same runs."""
from __future__ import annotations

from typing import List, Sequence

import numpy as np

from elmo_engine.io import figures as _F
from elmo_engine.io import figures
from elmo_engine.io.figures import BASELINE_COLOR, baseline, grouped_bars

SYNTAX_TASKS = ("pos", "demo-pos")


def run_kind(result) -> str:
    """"semantics" (word sense, supersense), "syntax" (part of speech) or "other"."""
    if result.semantic:
        return "semantics"
    if result.task in SYNTAX_TASKS or result.label in ("upos", "xpos", "deprel"):
        return "syntax"
    return "other"


def run_colors(results: Sequence) -> List[str]:
    """One colour per run, by task kind (syntax blue, semantics red, others a fixed palette)."""
    return figures.run_colors([run_kind(r) for r in results])


def figure_runs(results: Sequence) -> List[dict]:
    """The series :func:`probe_results_figure` draws."""
    out = []
    for r, colour in zip(results, run_colors(results)):
        entries = list(r.layers) + [r.mix]
        ref = r.reference_baseline
        control = None
        if r.layers[0].control_test is not None:
            control = [e.control_test for e in entries]
        note = "; ".join(n for n in r.notes if "near uniform" in n)
        out.append({"label": r.name, "color": colour, "weights": list(r.mix.weights),
                    "weights_sd": list(r.mix.weights_sd) or None,
                    "scores": [e.test for e in entries],
                    "scores_sd": [e.test_sd for e in entries],
                    "below": [bool(e.below_baseline) for e in entries], "control": control,
                    "baseline": (ref, r.baselines[ref]) if ref in r.baselines else None,
                    "note": f"{r.name}: {note}" if note else ""})
    return out


def probe_figure(results: Sequence):
    """The matplotlib figure of these runs."""
    return probe_results_figure(figure_runs(results))


def save_probe_figure(results: Sequence, path, formats=None):
    """Write the figure (PNG/SVG/PDF by suffix, or every format without one); returns paths."""
    return figures.save(probe_figure(results), path, formats)


def probe_results_figure(runs: Sequence[dict]):
    """The probes' picture: scalar-mix weights per layer (bars, ± sd) and test score per layer
    (± sd) with the mix at the right, each task's control task as a dashed line, its reference
    baseline as a labelled dotted line and scores under it as hollow markers. Each run:
    ``label``, ``color``, ``weights``, ``weights_sd``, ``scores``, ``scores_sd`` (layers then
    the mix), ``below`` (booleans, same order), optional ``control`` (layers then the mix),
    ``baseline`` (name, value) and ``note``."""
    fig = _F.figure(6.5, 6.0)
    ax_w, ax_s = fig.subplots(2, 1)
    k = max((len(r["weights"]) for r in runs), default=3)
    grouped_bars(ax_w, [str(i) for i in range(k)],
                 [{"label": r["label"], "values": r["weights"], "errors": r.get("weights_sd"),
                   "color": r["color"]} for r in runs], ylabel="mix weight")
    ax_w.set_xlabel("layer")
    ax_w.axhline(1.0 / k, color=BASELINE_COLOR, linestyle=":", linewidth=1)
    ax_w.annotate("uniform 1/K", xy=(1.0, 1.0 / k), xycoords=("axes fraction", "data"),
                  xytext=(4, 0), textcoords="offset points", va="center", fontsize="x-small",
                  color=BASELINE_COLOR, annotation_clip=False)
    ax_w.set_title("Scalar-mix layer weights (softmax, sum to 1; mean ± sd over seeds)",
                  fontsize="medium")
    xs = np.arange(k + 1, dtype=float)
    for r in runs:
        vals = np.asarray(r["scores"], dtype=float)
        sd = np.asarray(r.get("scores_sd") or np.zeros_like(vals), dtype=float)
        ax_s.errorbar(xs[:k], vals[:k], yerr=sd[:k], color=r["color"], marker="o", capsize=3,
                      linewidth=1.6, label=r["label"])
        ax_s.errorbar(xs[k:], vals[k:], yerr=sd[k:], color=r["color"], marker="s", capsize=3,
                      linestyle="")
        below = np.asarray(r.get("below") or [False] * len(vals), bool)
        if below.any():
            ax_s.scatter(xs[below], vals[below], s=90, facecolors="white", edgecolors=r["color"],
                         linewidths=1.5, zorder=5, label=f"{r['label']}: under baseline")
        if r.get("control") is not None:
            ax_s.plot(xs[:len(r["control"])], r["control"], color=r["color"], linestyle="--",
                      linewidth=1.1, label=f"{r['label']}: control task")
        if r.get("baseline"):
            name, value = r["baseline"]
            baseline(ax_s, value, f"{name} {value:.3f}", color=r["color"])
    ax_s.set_xticks(xs)
    ax_s.set_xticklabels([str(i) for i in range(k)] + ["mix"])
    ax_s.set_xlabel("layer")
    ax_s.set_ylabel("test score")
    ax_s.set_ylim(0, 1.02)
    ax_s.spines[["top", "right"]].set_visible(False)
    ax_s.set_title("Test score (accuracy / F1) per layer and for the mix (mean ± sd)",
                  fontsize="medium")
    handles, labels = ax_s.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside right upper", frameon=False, fontsize="small")
    notes = [r["note"] for r in runs if r.get("note")]
    if notes:
        fig.supxlabel("\n".join(notes), fontsize="x-small", x=0.01, ha="left")
    return fig


__all__ = ["figure_runs", "probe_figure", "probe_results_figure", "run_colors", "run_kind", "save_probe_figure"]
