"""Probe results → the figure module's probe picture (the same drawing for app exports, reports
and the command line), and the colours the app's on-screen plots use for the same runs."""
from __future__ import annotations

from typing import List, Sequence

from elmo_engine.io import figures

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
    """The series :func:`~elmo_engine.io.figures.probe_results_figure` draws."""
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
    return figures.probe_results_figure(figure_runs(results))


def save_probe_figure(results: Sequence, path, formats=None):
    """Write the figure (PNG/SVG/PDF by suffix, or every format without one); returns paths."""
    return figures.save(probe_figure(results), path, formats)


__all__ = ["figure_runs", "probe_figure", "run_colors", "run_kind", "save_probe_figure"]
