"""Exports of the "Language model" view: the sentence figure (token rows and reach) and the
minimal-pair figure as PNG, SVG or PDF through the one figure module
(:mod:`elmo_engine.io.figures.language_model` on :mod:`elmo_engine.io.figures`), the per-token table
as TSV and the sentence as JSON with the fields of ``elmo-explorer lm --json``; and the view's
report section (:func:`elmo_engine.analysis.language_model.report.report_part`, the function
``elmo-explorer export report`` uses too).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, List

from PySide6.QtGui import QAction

from elmo_engine.analysis.language_model.report import (pairs_figure, report_part,
                                                        sentence_document, token_rows)
from elmo_engine.atomic import atomic_write_text
from elmo_engine.io import figures

if TYPE_CHECKING:
    from elmo_explorer.views.language_model.controller import LanguageModelPanel

log = logging.getLogger(__name__)

FIGURES = ("sentence", "pairs")


class LanguageModelExports:
    """``export_*``: no dialogs (tests and scripts); ``_ask_*``: with a file dialog."""

    def __init__(self, panel: "LanguageModelPanel"):
        self.panel = panel

    def make_actions(self) -> List[QAction]:
        m = self.panel.model
        out = []
        for text, fn, enabled in (
                ("Language model figure (PNG/SVG/PDF)…", lambda: self._ask_figure("sentence"),
                 bool(m.tokens) and (m.reach is not None or m.predictions is not None)),
                ("Minimal pairs figure (PNG/SVG/PDF)…", lambda: self._ask_figure("pairs"),
                 bool(m.pair_scores)),
                ("Language model per token (TSV)…", self._ask_tsv, m.predictions is not None),
                ("Language model sentence (JSON)…", self._ask_json, bool(m.tokens))):
            a = QAction(text, self.panel)
            a.triggered.connect(lambda _=False, f=fn: f())
            a.setEnabled(enabled)
            out.append(a)
        return out

    # ---- figures ------------------------------------------------------------------------------
    def figure(self, kind: str):
        """The export figure of ``kind`` ("sentence", "pairs"), or None (nothing to draw)."""
        m = self.panel.model
        if kind == "pairs":
            return pairs_figure(m.pair_scores, m.pair) if m.pair_scores else None
        if not m.tokens or (m.reach is None and m.predictions is None):
            return None
        p = m.predictions
        rows, labels = m.reach_heatmap()
        return _sentence_figure(m.tokens, p, m.token, rows, labels)

    def export_figure(self, kind: str, path) -> List[Path]:
        fig = self.figure(kind)
        if fig is None:
            raise LookupError("nothing to export yet")
        written = figures.save(fig, path)
        for p in written:
            self.panel.exported.emit(str(p))
        return written

    # ---- tables -------------------------------------------------------------------------------
    def export_tsv(self, path) -> Path:
        """One row per token (both directions' rank, probability, surprisal, entropy, top
        predictions; the substitutes)."""
        m = self.panel.model
        if m.predictions is None:
            raise LookupError("no predictions to export (" + (m.softmax_problem or "not yet")
                              + ")")
        rows = token_rows(m.tokens, m.predictions, top_shown=m.options.top_k)
        cols = list(rows[0])
        lines = ["\t".join(cols)]
        for r in rows:
            lines.append("\t".join(_tsv_cell(r.get(c)) for c in cols))
        atomic_write_text(path, "\n".join(lines) + "\n")
        self.panel.exported.emit(str(path))
        return Path(path)

    def export_json(self, path) -> Path:
        """``{"sentences": [record]}`` as ``elmo-explorer lm --json --reach`` writes it."""
        m = self.panel.model
        if not m.tokens:
            raise LookupError("no sentence to export")
        doc = {"sentences": [sentence_document(m.tokens, m.predictions, m.reach)]}
        atomic_write_text(path, json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
        self.panel.exported.emit(str(path))
        return Path(path)

    # ---- report -------------------------------------------------------------------------------
    def _part(self, folder=None, options=None):
        m = self.panel.model
        kw = {}
        if options is not None:
            kw = {"formats": options.formats, "dpi": options.dpi}
        return report_part(m.tokens, m.predictions, m.reach, m.token, m.pair_scores, m.pair,
                           folder, **kw)

    def report_tables(self):
        return self._part().tables

    def report_figures(self, folder: Path, options) -> List[Path]:
        return [f.path for f in self._part(Path(folder), options).figures]

    # ---- dialogs ------------------------------------------------------------------------------
    def _ask_figure(self, kind: str) -> None:
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

        path = ask_save_path(self.panel, f"Export the {kind} figure", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_figure(kind, path))

    def _ask_tsv(self) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path

        path = ask_save_path(self.panel, "Export per-token predictions", "TSV (*.tsv)")
        if path is not None:
            self._guard(lambda: self.export_tsv(path))

    def _ask_json(self) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path

        path = ask_save_path(self.panel, "Export the sentence as lm --json", "JSON (*.json)")
        if path is not None:
            self._guard(lambda: self.export_json(path))

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:  # shown, never a crash
            log.exception("language model export failed")
            self.panel.view.show_status(f"Export failed: {e}", error=True)


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
