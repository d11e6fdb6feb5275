"""Probe results as tables: the text summary, the per-layer rows and their CSV/JSON files."""
from __future__ import annotations

import csv
import io
import json
from typing import List

from elmo_engine.atomic import atomic_write_text

RESULT_COLUMNS = ("run", "task", "layer", "mix weight", "dev", "test", "centroid F1", "control",
                  "selectivity", "baselines")


def summary(result) -> str:
    """A small text table of the results."""
    metric = "F1" if result.is_wsd else "acc"
    lines = [f"{result.name}: {result.counts['train']} train / {result.counts['dev']} dev / "
             f"{result.counts['test']} test examples, {result.counts['labels']} labels, "
             f"{result.wall_time_s:.1f} s"]
    head = f"{'layer':>6} {'dev':>7} {'test ' + metric:>9}"
    if result.is_wsd:
        head += f" {'centroid':>9}"
    if result.layers[0].control_test is not None:
        head += f" {'control':>8} {'select.':>8}"
    lines.append(head)
    rows: List[tuple] = [(str(lay.layer), lay) for lay in result.layers] + [("mix", result.mix)]
    for name, r in rows:
        line = f"{name:>6} {r.dev:7.4f} {r.test:9.4f}"
        if result.is_wsd:
            line += f" {r.centroid_test:9.4f}"
        if r.control_test is not None:
            line += f" {r.control_test:8.4f} {r.selectivity:8.4f}"
        lines.append(line)
    lines.append("mix weights " + " ".join(f"{w:.3f}" for w in result.mix.weights)
                 + f", gamma {result.mix.gamma:.3f}")
    lines.append("baselines " + ", ".join(f"{k} {v:.4f}" for k, v in result.baselines.items()))
    return "\n".join(lines)


def results_rows(results) -> List[List[str]]:
    """A table of runs (columns :data:`RESULT_COLUMNS`): one row per layer and one for the mix."""
    def f(v):
        return "" if v is None else f"{v:.4f}"

    rows = []
    for i, run in enumerate(results, start=1):
        base = ", ".join(f"{k} {v:.3f}" for k, v in run.baselines.items())
        for lay in run.layers:
            rows.append([str(i), run.name, str(lay.layer), f(run.mix.weights[lay.layer]),
                         f(lay.dev), f(lay.test), f(lay.centroid_test), f(lay.control_test),
                         f(lay.selectivity), base])
        m = run.mix
        rows.append([str(i), run.name, f"mix (γ={m.gamma:.3f})", "1.0000", f(m.dev), f(m.test),
                     f(m.centroid_test), f(m.control_test), f(m.selectivity), base])
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
