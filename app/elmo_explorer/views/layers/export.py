"""Exports of the Layers view: the curves, the CKA heatmap and the MDL codelengths as PNG, SVG
or PDF — drawn by the one figure module, :mod:`elmo_engine.io.figures` (matplotlib, Agg) — and the
results as JSON.

:class:`LayersExports` is the part of the controller
(:class:`elmo_explorer.views.layers.controller.LayersPanel`) that builds the File → Export entries and
writes the files (atomically, by the engine's writers).
"""
from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, List

from PySide6.QtGui import QAction

from elmo_engine.io import figures, layer_figures

if TYPE_CHECKING:
    from elmo_explorer.views.layers.controller import LayersPanel

log = logging.getLogger(__name__)

#: the view's figures (also its report figures, as ``layers_<kind>.<ext>``)
FIGURES = ("contextuality", "cka", "mdl")


class LayersExports:
    """``export_*``: no dialogs (tests and scripts); ``_ask_*``: with a file dialog."""

    def __init__(self, panel: "LayersPanel"):
        self.panel = panel

    def make_actions(self) -> List[QAction]:
        """File → Export entries (disabled while there is nothing to export)."""
        out = []
        for text, kind in (("Layer curves (PNG/SVG/PDF)…", "contextuality"),
                           ("CKA heatmap (PNG/SVG/PDF)…", "cka"),
                           ("MDL codelengths (PNG/SVG/PDF)…", "mdl")):
            a = QAction(text, self.panel)
            a.triggered.connect(lambda _=False, k=kind: self._ask_export(k))
            a.setEnabled(self.has(kind))
            out.append(a)
        a = QAction("Layers results (JSON)…", self.panel)
        a.triggered.connect(self._ask_export_json)
        a.setEnabled(self.panel.model.result is not None)
        return out + [a]

    def has(self, kind: str) -> bool:
        m = self.panel.model
        return bool(m.mdl) if kind == "mdl" else m.result is not None

    def report_figures(self, folder: Path, options) -> List[Path]:
        """Every figure there is, in the report's formats, as ``layers_<kind>.<ext>``."""
        written: List[Path] = []
        for kind in FIGURES:
            fig = self.figure(kind)
            if fig is not None:
                written += figures.save(fig, Path(folder) / f"layers_{kind}",
                                        formats=options.formats, dpi=options.dpi)
        return written

    def figure(self, kind: str):
        """The export figure (matplotlib, :mod:`elmo_engine.io.figures`) of ``kind``
        ("contextuality", "cka", "mdl"), or None when there is nothing to draw."""
        m = self.panel.model
        if kind == "mdl":
            return layer_figures.mdl_figure(list(m.mdl.values()), "MDL probes") if m.mdl else None
        if m.result is None:
            return None
        title = m.summary().split(" — ")[0]
        if kind == "contextuality":
            return layer_figures.contextuality_figure(m.result["contextuality"], m.settings.adjusted,
                                                title)
        compared = m.compare is not None
        return layer_figures.cka_figure(m.cka_shown(), self.panel.cka_title(),
                                  "model B" if compared else "layer",
                                  "model A" if compared else "layer")

    def export_figure(self, kind: str, path) -> List[Path]:
        """Write one figure as PNG, SVG or PDF (by extension)."""
        fig = self.figure(kind)
        if fig is None:
            raise LookupError("nothing to export yet: run the analysis first")
        written = figures.save(fig, path)
        for p in written:
            self.panel.exported.emit(str(p))
        return written

    def export_json(self, path) -> None:
        """The shown results (``view_state``'s result, comparison and MDL runs) as JSON."""
        from elmo_engine.atomic import atomic_write_text

        doc = self.panel.model.view_state()
        atomic_write_text(path, json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        self.panel.exported.emit(str(path))

    def _ask_export(self, kind: str) -> None:
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

        path = ask_save_path(self.panel, f"Export {kind}", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_figure(kind, path))

    def _ask_export_json(self) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path

        path = ask_save_path(self.panel, "Export layers results", "JSON (*.json)")
        if path is not None:
            self._guard(lambda: self.export_json(path))

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:  # shown, never a crash
            log.exception("layers export failed")
            self.panel.view.show_status(f"Export failed: {e}", error=True)
