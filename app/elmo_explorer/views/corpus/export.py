"""Exports of the Corpus view: the concordance lines as TSV (atomic write), the map and the senses
as PNG, SVG or PDF — drawn by the one figure module (:mod:`elmo_engine.io.figures.corpus` on
:mod:`elmo_engine.io.figures`) — and the view's report tables and figures.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

from PySide6.QtGui import QAction

from elmo_engine.atomic import atomic_write_text
from elmo_engine.io.figures import corpus as corpus_figures
from elmo_engine.io.report import ReportTable
from elmo_explorer.common.figure_export import panel_figure_options, save_figure, write_figures
from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path
from elmo_explorer.views.palette import PALETTE

if TYPE_CHECKING:
    from elmo_explorer.views.corpus.controller import CorpusPanel

log = logging.getLogger(__name__)
FIGURES = ("map", "senses")


class CorpusExports:
    """``export_*``: no dialogs (tests and scripts); ``_ask_*``: with a file dialog."""

    def __init__(self, panel: "CorpusPanel"):
        self.panel = panel

    def make_actions(self) -> List[QAction]:
        m = self.panel.model
        out = []
        a = QAction("Corpus concordance (TSV)…", self.panel)
        a.triggered.connect(self._ask_tsv)
        a.setEnabled(bool(m.lines))
        out.append(a)
        for text, kind in (("Corpus map (PNG/SVG/PDF)…", "map"),
                           ("Corpus senses (PNG/SVG/PDF)…", "senses")):
            a = QAction(text, self.panel)
            a.triggered.connect(lambda _=False, k=kind: self._ask_figure(k))
            a.setEnabled(self.figure(kind) is not None)
            out.append(a)
        return out

    # ---- files --------------------------------------------------------------------------------
    def export_tsv(self, path: Path) -> Path:
        atomic_write_text(Path(path), self.panel.model.concordance_tsv())
        self.panel.exported.emit(str(path))
        return Path(path)

    def figure(self, kind: str):
        """The matplotlib figure of ``kind`` ("map" or "senses"), None when there is none."""
        p = self.panel
        if kind == "map" and p.map is not None:
            data = p.map
            panels = []
            for layer in data.layers:
                lines = p.model.lines.get(layer)
                panels.append({"title": f"layer {layer}", "xy": data.coords[layer],
                               "codes": data.codes,
                               "selected": data.index_of_row(lines[0].row) if lines else None})
            return corpus_figures.corpus_map_figure(
                panels, data.colours(), data.legend[:12],
                title=f"Occurrences of “{data.title}” (2-D PCA per layer)")
        if kind == "senses" and p.model.senses is not None:
            s = p.model.senses
            layers = [{"layer": ls.layer, "silhouette": ls.silhouette,
                       "clusters": [(c.size, ", ".join(w for w, _ in c.context_words[:2]))
                                    for c in ls.clusters]} for ls in s.layers]
            return corpus_figures.senses_figure(s.word, layers, PALETTE)
        return None

    def export_figure(self, kind: str, path: Path, options=None) -> List[Path]:
        fig = self.figure(kind)
        if fig is None:
            return []
        written = save_figure(fig, path, options or panel_figure_options(self.panel))
        for w in written:
            self.panel.exported.emit(str(w))
        return written

    # ---- report -------------------------------------------------------------------------------
    def report_figures(self, folder: Path, options) -> List[Path]:
        """Every figure there is, as ``corpus_<kind>.<ext>``."""
        figs = [(f"corpus_{k}", lambda k=k: self.figure(k)) for k in FIGURES
                if self.figure(k) is not None]
        return write_figures(figs, folder, options)

    def report_tables(self) -> List[ReportTable]:
        m = self.panel.model
        out = []
        if m.lines and m.query is not None:
            out.append(ReportTable(
                "corpus_concordance", f"Corpus: nearest occurrences of “{m.query.word}”",
                m.report_rows(), ["layer", "rank", "cosine", "sentence", "context"],
                caption=f"Query: {m.query.text} — index {m.index_summary}; "
                        + ("the same word's occurrences (exact)" if m.options.same_word
                           else "any word (HNSW, cosines recomputed)")))
        rows = m.cluster_rows()
        if rows:
            out.append(ReportTable(
                "corpus_senses", f"Corpus: induced senses of “{m.senses.word}” per layer",
                [{k: r[k] for k in ("layer", "cluster", "size", "share", "silhouette",
                                    "context_words", "typical")} for r in rows],
                caption="k-means on unit vectors, k by the cosine silhouette; context words by "
                        "log-odds z-score (Monroe et al. 2008)"))
        return out

    # ---- dialogs ------------------------------------------------------------------------------
    def _ask_tsv(self) -> None:
        path = ask_save_path(self.panel, "Export the concordance", "Tab-separated (*.tsv)")
        if path is not None:
            self._guard(lambda: self.export_tsv(path))

    def _ask_figure(self, kind: str) -> None:
        path = ask_save_path(self.panel, f"Export the corpus {kind}", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_figure(kind, path))

    def _guard(self, fn) -> Optional[object]:
        from elmo_engine.errors import ElmoError

        try:
            return fn()
        except (ElmoError, OSError) as e:
            self.panel.report_error(f"export failed: {e}", dialog=True)
            return None
