"""Exports of the projection view: plot images, coordinates CSV, TensorBoard projector TSV.

:class:`ProjectionExports` is the part of the projection controller
(:class:`elmo_explorer.views.projection.controller.ProjectionPanel`) that does this, from the panel's model
(the drawn tokens, activations, layers and projections) and view (the plots).
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable, List, Optional

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QMessageBox

from elmo_engine.errors import ElmoError
from elmo_engine.analysis.projection import layer_features, write_coordinates_csv, write_tensorboard

if TYPE_CHECKING:
    from elmo_explorer.views.projection.controller import ProjectionPanel

SVG_WARN_POINTS = 5_000        # an SVG of more points is slow and large


class ProjectionExports:
    """File → Export actions and the export methods of the projection panel."""

    def __init__(self, panel: "ProjectionPanel"):
        self.panel = panel
        self.model, self.view = panel.model, panel.view

    def make_actions(self) -> List[QAction]:
        acts = []
        for text, slot in (("Projection: all plots as image…", self.ask_export_all),
                           ("Projection: current plot as image…", self.ask_export_plot),
                           ("Projection: coordinates as CSV…", self.ask_export_csv),
                           ("Projection: vectors for TensorBoard projector…",
                            self.ask_export_tensorboard)):
            a = QAction(text, self.panel)
            a.triggered.connect(lambda _checked=False, slot=slot: slot())
            acts.append(a)
        return acts

    def add_plot_menus(self) -> None:
        """Per-plot entries in each plot's right-click menu."""
        for k, lp in enumerate(self.view.plots.plots):
            menu = lp.view.menu
            menu.addSeparator()
            menu.addAction("Export this plot (PNG/SVG/PDF)…").triggered.connect(
                lambda _c=False, k=k: self.ask_export_plot(k))
            menu.addAction("Export this layer's vectors for TensorBoard…").triggered.connect(
                lambda _c=False, k=k: self.ask_export_tensorboard(k))

    def ask_confirm(self, message: str) -> bool:
        answer = QMessageBox.question(self.panel, "Slow export", message)
        return answer == QMessageBox.StandardButton.Yes

    def _svg_ok(self, path: Path) -> bool:
        n = 0 if self.model.tokens is None else len(self.model.tokens)
        if path.suffix.lower() != ".svg" or n <= SVG_WARN_POINTS:
            return True
        return self.panel.confirm(f"An SVG of {n:,} points per plot takes several seconds and many "
                            "megabytes (PNG or PDF is faster). Write the SVG anyway?")

    def export_plot(self, k: int, path) -> Optional[Path]:
        """Write plot ``k`` as PNG/SVG/PDF (by extension); None when the user declines."""
        return self._export([k], path)

    def export_all(self, path) -> Optional[Path]:
        """Write every drawn plot as one grid figure (PNG/SVG/PDF by extension)."""
        return self._export(None, path)

    def _export(self, plots, path) -> Optional[Path]:
        from elmo_explorer.common.figure_export import save_figure
        path = Path(path)
        if not self._svg_ok(path):
            return None
        if self.model.tokens is None or not self.model.shown:
            raise LookupError("nothing to export yet: no projection is drawn")
        report = self.panel.report
        return save_figure(report.grid_figure(plots), path, report.figure_options())[0]

    def export_csv(self, path, on_done: Optional[Callable] = None) -> int:
        """Write the drawn coordinates of every plot as CSV (on the worker)."""
        tokens, projs = self.model.tokens, self.model.drawn()
        return self.panel.ws.worker.submit("Exporting coordinates",
                                           lambda s: write_coordinates_csv(path, tokens, projs),
                                           on_done=on_done, on_failed=self._export_failed)

    def export_tensorboard(self, folder, k: int, on_done: Optional[Callable] = None) -> int:
        """Write ``vectors.tsv`` + ``metadata.tsv`` of plot ``k``'s layer (on the worker)."""
        tokens, acts, layer = self.model.tokens, self.model.acts, self.model.layers[k]

        def job(state):
            vec = layer_features(acts, tokens, layer)
            return write_tensorboard(folder, vec, tokens, state=state)

        return self.panel.ws.worker.submit("Exporting vectors", job, on_done=on_done,
                                           on_failed=self._export_failed)

    def _export_failed(self, message: str) -> None:
        self.view.message(f"Export failed: {message}")

    def _has_plot(self) -> bool:
        if self.model.tokens is None or not self.model.shown:
            self.view.message("Nothing to export yet: run a projection first.")
            return False
        return True

    def _ask_image(self, title: str) -> Optional[Path]:
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path
        return ask_save_path(self.panel, title, IMAGE_FILTERS)

    def ask_export_all(self) -> None:
        if self._has_plot() and (path := self._ask_image("Export the projection plots")):
            self._report_export(self.export_all, path)

    def _plot_index(self, k: Optional[int]) -> int:
        return min(self.model.current_plot if k is None else k, len(self.view.plots.plots) - 1)

    def ask_export_plot(self, k: Optional[int] = None) -> None:
        if not self._has_plot():
            return
        k = self._plot_index(k)
        path = self._ask_image(f"Export the {self.model.layers[k].name} plot")
        if path:
            self._report_export(lambda p: self.export_plot(k, p), path)

    def _report_export(self, fn, path) -> None:
        try:
            if fn(path) is not None:
                self.view.message(f"Saved {path}")
        except ElmoError as e:
            self._export_failed(str(e))

    def ask_export_csv(self) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path
        if self._has_plot() and (path := ask_save_path(self.panel, "Export coordinates",
                                                       "CSV (*.csv)")):
            self.export_csv(path, lambda p: self.view.message(f"Saved {p}"))

    def ask_export_tensorboard(self, k: Optional[int] = None) -> None:
        if not self._has_plot():
            return
        k = self._plot_index(k)
        name = self.model.layers[k].name
        folder = QFileDialog.getExistingDirectory(
            self.panel, f"Folder for vectors.tsv + metadata.tsv of {name}")
        if folder:
            self.export_tensorboard(folder, k, lambda r: self.view.message(
                f"Saved {name} vectors: {r[0]} and {r[1]}"))
