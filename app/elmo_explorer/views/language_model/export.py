"""Exports of the "Language model" view, as functions of values: the sentence figure (token rows
and reach) and the minimal-pair figure as PNG, SVG or PDF through the one figure module
(:mod:`elmo_engine.io.figures.language_model` on :mod:`elmo_engine.io.figures`), the per-token
table as TSV and the sentence as JSON with the fields of ``elmo-explorer lm --json`` (the
report's section is :func:`elmo_engine.analysis.language_model.report.report_part`, from the
workspace). Each takes the view model
(:class:`~.model.LanguageModelModel`) and returns what it wrote; the panel
(:class:`~elmo_explorer.views.language_model.controller.LanguageModelPanel`) builds the
File → Export entries, asks for the paths and says what was written.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

from elmo_engine.analysis.language_model.report import (pairs_figure, sentence_document,
                                                        token_rows)
from elmo_engine.atomic import atomic_write_text
from elmo_engine.io import figures
from elmo_explorer.views.language_model.model import LanguageModelModel

FIGURES = ("sentence", "pairs")
#: File → Export entries: (key, menu text); "sentence" and "pairs" are figures
ENTRIES = (("sentence", "Language model figure (PNG/SVG/PDF)…"),
           ("pairs", "Minimal pairs figure (PNG/SVG/PDF)…"),
           ("tsv", "Language model per token (TSV)…"),
           ("json", "Language model sentence (JSON)…"))


def has(m: LanguageModelModel, key: str) -> bool:
    """Whether there is something to export under ``key`` (one of :data:`ENTRIES`)."""
    if key == "sentence":
        return bool(m.tokens) and (m.reach is not None or m.predictions is not None)
    if key == "pairs":
        return bool(m.pair_scores)
    if key == "tsv":
        return m.predictions is not None
    return bool(m.tokens)


# ---- figures ----------------------------------------------------------------------------------
def figure(m: LanguageModelModel, kind: str):
    """The export figure of ``kind`` ("sentence", "pairs"), or None (nothing to draw)."""
    if kind == "pairs":
        return pairs_figure(m.pair_scores, m.pair) if m.pair_scores else None
    if not m.tokens or (m.reach is None and m.predictions is None):
        return None
    rows, labels = m.reach_heatmap()
    return _sentence_figure(m.tokens, m.predictions, m.token, rows, labels)


def write_figure(m: LanguageModelModel, kind: str, path, options=None) -> List[Path]:
    """Write one figure as PNG, SVG or PDF (by extension), at the export options' width and
    dpi exactly (default: 6.5 in at 300 dpi)."""
    fig = figure(m, kind)
    if fig is None:
        raise LookupError("nothing to export yet")
    return figures.save(fig, path, style=options.style() if options is not None else None)


# ---- tables -----------------------------------------------------------------------------------
def write_tsv(m: LanguageModelModel, path) -> Path:
    """One row per token (both directions' rank, probability, surprisal, entropy, top
    predictions; the substitutes)."""
    if m.predictions is None:
        raise LookupError("no predictions to export (" + (m.softmax_problem or "not yet") + ")")
    rows = token_rows(m.tokens, m.predictions, top_shown=m.options.top_k)
    cols = list(rows[0])
    lines = ["\t".join(cols)]
    for r in rows:
        lines.append("\t".join(_tsv_cell(r.get(c)) for c in cols))
    atomic_write_text(path, "\n".join(lines) + "\n")
    return Path(path)


def write_json(m: LanguageModelModel, path) -> Path:
    """``{"sentences": [record]}`` as ``elmo-explorer lm --json --reach`` writes it."""
    if not m.tokens:
        raise LookupError("no sentence to export")
    doc = {"sentences": [sentence_document(m.tokens, m.predictions, m.reach)]}
    atomic_write_text(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return Path(path)


# ---- helpers ----------------------------------------------------------------------------------
def _sentence_figure(tokens, p, token, rows, labels):
    from elmo_engine.io.figures.language_model import sentence_figure

    ranks = surprisal = ppl = None
    if p is not None:
        ranks = [[r.rank for r in p.forward], [r.rank for r in p.backward]]
        surprisal = [[r.surprisal for r in p.forward], [r.surprisal for r in p.backward]]
        ppl = p.perplexity
    return sentence_figure(tokens, ranks, surprisal, ppl, token, rows, labels)


def _tsv_cell(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v).replace("\t", " ").replace("\n", " ")
