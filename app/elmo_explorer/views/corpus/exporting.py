"""The Corpus panel's File → Export entries, a part of
:class:`~elmo_explorer.views.corpus.controller.CorpusPanel`: each entry asks for a path and calls
:mod:`.export`'s functions of values; the ``export_*`` methods take the path (no dialog) for tests
and scripts. A failed write is one red line in the bar and a dialog (``report_error``)."""
from __future__ import annotations

from pathlib import Path
from typing import List

from PySide6.QtGui import QAction

from elmo_engine.errors import ElmoError
from elmo_explorer.common.figure_export import panel_figure_options
from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path
from elmo_explorer.views.corpus import export

TSV_FILTER = "Tab-separated (*.tsv)"


class PanelExports:
    """Mixed into the panel, which provides ``model``, ``map``, ``exported`` and
    ``report_error``."""

    def export_actions(self) -> List[QAction]:
        out = []
        for text, ask, enabled in (
                (export.TSV_ENTRY, self._ask_tsv, bool(self.model.lines)),
                (export.SELECTION_ENTRY, self._ask_selection_tsv,
                 self.model.selection is not None and bool(self.model.selection.lines))):
            a = QAction(text, self)
            a.triggered.connect(ask)
            a.setEnabled(enabled)
            out.append(a)
        for text, kind in export.FIGURE_ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _=False, k=kind: self._ask_figure(k))
            a.setEnabled(self.figure(kind) is not None)
            out.append(a)
        return out

    def figure(self, kind: str):
        """The export figure of ``kind`` ("map" or "senses"), None when there is none."""
        return export.figure(self.model, self.map, kind)

    def export_tsv(self, path) -> Path:
        written = export.write_tsv(self.model, path)
        self.exported.emit(str(path))
        return written

    def export_selection_tsv(self, path) -> Path:
        """The map selection's listed occurrences (at most ``SELECTION_LINES``) as TSV."""
        written = export.write_selection_tsv(self.model, path)
        self.exported.emit(str(path))
        return written

    def export_figure(self, kind: str, path, options=None) -> List[Path]:
        written = export.write_figure(self.model, self.map, kind, path,
                                      options or panel_figure_options(self))
        for w in written:
            self.exported.emit(str(w))
        return written

    def _ask_tsv(self) -> None:
        path = ask_save_path(self, "Export the concordance", TSV_FILTER)
        if path is not None:
            self._guard(lambda: self.export_tsv(path))

    def _ask_selection_tsv(self) -> None:
        path = ask_save_path(self, "Export the map selection", TSV_FILTER)
        if path is not None:
            self._guard(lambda: self.export_selection_tsv(path))

    def _ask_figure(self, kind: str) -> None:
        path = ask_save_path(self, f"Export the corpus {kind}", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_figure(kind, path))

    def _guard(self, fn) -> None:
        try:
            fn()
        except (ElmoError, OSError) as e:
            self.report_error(f"export failed: {e}", dialog=True)
