"""Probe results as tables: the text summary, the per-layer rows and their CSV/JSON files.

Scores are shown as mean ± sd over the run's seeds; a score under the task's reference baseline
is marked ``▼`` (and says so in the ``flags`` column); the mix row says when its weights are
still near uniform.
"""
from __future__ import annotations

import csv
import io
import json
from typing import List, Optional

from elmo_engine.atomic import atomic_write_text

RESULT_COLUMNS = ("run", "task", "layer", "mix weight", "dev", "test", "centroid F1", "control",
                  "selectivity", "baselines", "flags")
BELOW = "▼"


def pm(mean: Optional[float], sd: Optional[float] = None, digits: int = 4) -> str:
    """``mean ± sd`` (just the mean when there is no sd); empty for None."""
    if mean is None:
        return ""
    return f"{mean:.{digits}f}" if not sd else f"{mean:.{digits}f} ± {sd:.{digits}f}"


def _flags(entry, run, mix: bool = False) -> str:
    out = []
    if getattr(entry, "below_baseline", False):
        ref = run.reference_baseline
        out.append(f"{BELOW} under {ref} ({run.baselines.get(ref, 0.0):.3f})")
    if mix and getattr(entry, "near_uniform", False):
        out.append("weights near uniform")
    return "; ".join(out)


def summary(result) -> str:
    """A small text table of the results (mean ± sd over the seeds)."""
    metric = "F1" if result.is_wsd else "acc"
    if result.task == "demo-wsd":
        metric = "lemma acc"
    n = len(result.seeds) or 1
    lines = [f"{result.name}: {result.counts['train']} train / {result.counts['dev']} dev / "
             f"{result.counts['test']} test examples, {result.counts['labels']} labels, "
             f"{n} seed{'s' if n > 1 else ''}, {result.wall_time_s:.1f} s"]
    head = f"{'layer':>6} {'dev':>17} {'test ' + metric:>17}"
    if result.is_wsd:
        head += f" {'centroid':>17}"
    if result.layers[0].control_test is not None:
        head += f" {'control':>17} {'select.':>17}"
    lines.append(head)
    rows = [(str(lay.layer), lay) for lay in result.layers] + [("mix", result.mix)]
    for name, r in rows:
        line = f"{name:>6} {pm(r.dev, r.dev_sd):>17} {pm(r.test, r.test_sd):>17}"
        if result.is_wsd:
            line += f" {pm(r.centroid_test, getattr(r, 'centroid_test_sd', None)):>17}"
        if r.control_test is not None:
            line += f" {pm(r.control_test, r.control_test_sd):>17} " \
                    f"{pm(r.selectivity, r.selectivity_sd):>17}"
        if r.below_baseline:
            line += f"  {BELOW} under baseline"
        lines.append(line)
    lines.append("mix weights " + " ".join(pm(w, s, 3) for w, s in zip(
        result.mix.weights, result.mix.weights_sd or [None] * len(result.mix.weights)))
        + f", gamma {result.mix.gamma:.3f}")
    lines.append("baselines " + ", ".join(f"{k} {v:.4f}" for k, v in result.baselines.items())
                 + (f" (flags against {result.reference_baseline})"
                    if result.reference_baseline else ""))
    lines.extend("note: " + n for n in result.notes if "baseline (" not in n)
    return "\n".join(lines)


def results_rows(results) -> List[List[str]]:
    """A table of runs (columns :data:`RESULT_COLUMNS`): one row per layer and one for the mix."""
    rows = []
    for i, run in enumerate(results, start=1):
        base = ", ".join(f"{k} {v:.3f}" for k, v in run.baselines.items())
        sds = run.mix.weights_sd or [None] * len(run.mix.weights)
        for lay in run.layers:
            test = pm(lay.test, lay.test_sd) + (f" {BELOW}" if lay.below_baseline else "")
            rows.append([str(i), run.name, str(lay.layer),
                         pm(run.mix.weights[lay.layer], sds[lay.layer]), pm(lay.dev, lay.dev_sd),
                         test, pm(lay.centroid_test), pm(lay.control_test, lay.control_test_sd),
                         pm(lay.selectivity, lay.selectivity_sd), base, _flags(lay, run)])
        m = run.mix
        test = pm(m.test, m.test_sd) + (f" {BELOW}" if m.below_baseline else "")
        rows.append([str(i), run.name, f"mix (γ={m.gamma:.3f})", "—", pm(m.dev, m.dev_sd), test,
                     pm(m.centroid_test, m.centroid_test_sd),
                     pm(m.control_test, m.control_test_sd), pm(m.selectivity, m.selectivity_sd),
                     base, _flags(m, run, mix=True)])
    return rows


def write_results_csv(results, path) -> None:
    """The :func:`results_rows` table as CSV, written atomically."""
    buf = io.StringIO()
    writer = csv.writer(buf)
    writer.writerow(RESULT_COLUMNS)
    writer.writerows(results_rows(results))
    atomic_write_text(path, buf.getvalue())


def write_results_json(results, path) -> None:
    """A JSON list of ``results.json`` objects, written atomically."""
    atomic_write_text(path, json.dumps([r.to_dict() for r in results], indent=2,
                                       ensure_ascii=False) + "\n")
