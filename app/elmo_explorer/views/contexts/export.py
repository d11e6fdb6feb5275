"""Exports of the contexts view: heatmaps (PNG/SVG/PDF), matrices and neighbours (CSV), and
the vectors of selected occurrences (npz, projector TSV).

:class:`ContextsExports` is the part of the contexts controller
(:class:`elmo_explorer.views.contexts.controller.ContextsPanel`) that does this, from the panel's model
(comparison, vectors, neighbour table) and view (selected occurrences, heatmaps). Files are
written on the worker (atomically, by the engine's writers); pictures are rendered on the GUI
thread by the engine's one figure path (:mod:`elmo_engine.analysis.report_figures`).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, List, Optional

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QInputDialog

from elmo_engine.analysis import compare as cmp
from elmo_engine.analysis.neighbours import write_neighbours_csv

if TYPE_CHECKING:
    from elmo_explorer.views.contexts.controller import ContextsPanel

IMAGE_FILTERS = "PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)"
NOTHING_YET = "nothing to export yet: pick a word that occurs in the sentences"


class ContextsExports:
    """Export methods (``export_*``: no dialogs, for tests and scripts; ``ask_*``: dialogs)."""

    def __init__(self, panel: "ContextsPanel"):
        self.panel = panel

    def make_actions(self) -> List[QAction]:
        """File → Export entries (disabled until there is something to export)."""
        spec = [("Heatmap (PNG/SVG/PDF)…", self.ask_export_heatmap),
                ("Similarity matrices (CSV)…", self.ask_export_matrices),
                ("Nearest neighbours (CSV)…", self.ask_export_neighbours),
                ("Occurrence vectors (npz)…", self.ask_export_npz),
                ("Occurrence vectors (TSV)…", self.ask_export_tsv)]
        actions = []
        for text, slot in spec:
            act = QAction(text, self.panel)
            act.triggered.connect(slot)
            act.setEnabled(False)
            actions.append(act)
        return actions

    def neighbour_rows(self) -> List[list]:
        """The shown neighbour table as CSV rows (empty when none is shown)."""
        m = self.panel.model
        return [] if m.table is None or m.index is None else m.table.csv_rows(m.index)

    def _submit_write(self, what: str, path, fn) -> None:
        path = Path(path)
        self.panel.ws.worker.submit(f"Writing {what}", lambda state: fn(path),
                                    on_done=lambda _r: self._exported(path),
                                    on_failed=self.panel.show_error)

    def _exported(self, path: Path) -> None:
        self.panel.view.show_status(f"wrote {path}")
        self.panel.exported.emit(str(path))

    def export_heatmap(self, path, view: Optional[int] = None) -> None:
        """One heatmap (``view`` index) or all side by side (None) as a figure with titles,
        labelled axes, the groups and a labelled colour bar (the engine's figure path, at the
        report figure size/DPI); PNG, SVG or PDF by extension."""
        from elmo_explorer.common.figure_export import save_figure
        try:
            save_figure(self.panel.report.heatmap_figure(view), path,
                        self.panel.report.figure_options())
        except Exception as exc:                     # noqa: BLE001 - shown to the user
            self.panel.show_error(f"could not export the heatmap: {exc}")
            return
        self._exported(Path(path))

    def export_matrices_csv(self, path) -> None:
        comp = self.panel.model.comparison
        if comp is None:
            raise LookupError(NOTHING_YET)
        self._submit_write("similarity matrices", path, lambda p: cmp.write_matrices_csv(p, comp))

    def export_neighbours_csv(self, path) -> None:
        rows = self.neighbour_rows()
        self._submit_write("neighbours", path, lambda p: write_neighbours_csv(p, rows))

    def _selected(self):
        """Rows to export: the selected ones when several are selected, else all."""
        comp = self.panel.model.comparison
        if comp is None:
            raise LookupError(NOTHING_YET)
        rows = self.panel.view.occ_table.selected_rows()
        rows = [r for r in rows if r < len(comp.occurrences)]
        if len(rows) < 2:
            rows = list(range(len(comp.occurrences)))
        tokens = self.panel.ws.tokens
        occ = [comp.occurrences[r] for r in rows]
        meta = [[s, t, tokens[s][t], comp.groups[r], " ".join(tokens[s])]
                for r, (s, t) in zip(rows, occ)]
        return rows, occ, meta

    def export_vectors_npz(self, path) -> None:
        """Vectors (all layers, both halves) of the selected occurrences (all if ≤ 1 selected)."""
        rows, occ, meta = self._selected()
        vec = self.panel.model.vectors[:, rows]
        self._submit_write("vectors", path, lambda p: cmp.write_vectors_npz(
            p, vec, occ, [m[2] for m in meta], [m[4] for m in meta], [m[3] for m in meta]))

    def export_vectors_tsv(self, path, view: int = -1) -> None:
        """One view's vectors (current direction) as projector TSV + ``.metadata.tsv``."""
        rows, _occ, meta = self._selected()
        comp, vectors = self.panel.model.comparison, self.panel.model.vectors
        n_layers = vectors.shape[0]
        view = view % (n_layers + 1)
        sel = vectors[:, rows]
        data = sel[view] if view < n_layers else cmp.mix_layers(sel, comp.weights)
        data = cmp.half(data, comp.direction)
        p = str(path)
        meta_path = (p[:-4] if p.endswith(".tsv") else p) + ".metadata.tsv"

        def write(target):
            cmp.write_vectors_tsv(target, data)
            cmp.write_metadata_tsv(meta_path, meta, ["sentence", "token", "word", "group", "text"])

        self._submit_write("vectors", path, write)

    def _nothing_yet(self) -> bool:
        if self.panel.model.comparison is None:
            self.panel.show_error(NOTHING_YET)
            return True
        return False

    def _ask_view(self, allow_all: bool) -> Optional[int]:
        if self._nothing_yet():
            return None
        names = list(self.panel.model.comparison.names) + (["all side by side"] if allow_all
                                                            else [])
        item, ok = QInputDialog.getItem(self.panel, "Which view?", "View:", names,
                                        len(names) - 1, False)
        if not ok:
            return None
        return -1 if item == "all side by side" else names.index(item)

    def _ask_path(self, title: str, filters: str):
        from elmo_explorer.common.save_dialog import ask_save_path
        return ask_save_path(self.panel, title, filters)

    def ask_export_heatmap(self) -> None:
        view = self._ask_view(True)
        if view is not None:
            path = self._ask_path("Export heatmap", IMAGE_FILTERS)
            if path:
                self.export_heatmap(path, None if view < 0 else view)

    def ask_export_matrices(self) -> None:
        if self._nothing_yet():
            return
        path = self._ask_path("Export similarity matrices", "CSV (*.csv)")
        if path:
            self.export_matrices_csv(path)

    def ask_export_neighbours(self) -> None:
        path = self._ask_path("Export nearest neighbours", "CSV (*.csv)")
        if path:
            self.export_neighbours_csv(path)

    def ask_export_npz(self) -> None:
        if self._nothing_yet():
            return
        path = self._ask_path("Export occurrence vectors", "NumPy archive (*.npz)")
        if path:
            self.export_vectors_npz(path)

    def ask_export_tsv(self) -> None:
        view = self._ask_view(False)
        if view is not None:
            path = self._ask_path("Export occurrence vectors (TSV)", "TSV (*.tsv)")
            if path:
                self.export_vectors_tsv(path, view)
