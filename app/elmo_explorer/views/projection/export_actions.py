"""The projection view's export actions: the File → Export entries and the plots' right-click
entries.

:class:`ProjectionExports` reads what is drawn from the :class:`~.model.ProjectionModel` and
the :class:`~.view.ProjectionView`, writes through :mod:`.export`'s functions of values (images
at once, coordinates and TensorBoard files on the worker) and says what happened in the status
line. Its ``export_*`` methods take the path (no dialog), for tests and scripts; its ``ask_*``
methods ask for it first.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, List, Optional, Sequence

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QWidget

from elmo_explorer.common.figure_export import panel_figure_options, save_figure
from elmo_explorer.state.worker import JobGroup, JobHandle
from elmo_explorer.views.projection import export
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.view import ProjectionView

#: the drawn plots (their indices, None: all) as one matplotlib figure
FigureFn = Callable[[Optional[Sequence[int]]], Any]


class ProjectionExports:
    """Exports of the drawn projection of ``model`` as shown in ``view``; ``widget`` parents
    the dialogs and the actions, ``figure`` draws the plots as one figure."""

    def __init__(self, widget: QWidget, jobs: JobGroup, model: ProjectionModel,
                 view: ProjectionView, figure: FigureFn):
        self.widget, self.jobs, self.model, self.view = widget, jobs, model, view
        self.figure = figure
        #: asked before a slow export (an SVG of many points); tests answer it themselves
        self.confirm: Callable[[str], bool] = lambda message: export.confirm(widget, message)
        self.actions: List[QAction] = []
        for text, method in export.ENTRIES:
            a = QAction(text, widget)
            a.triggered.connect(lambda _checked=False, m=method: getattr(self, m)())
            self.actions.append(a)

    # ---- without dialogs ------------------------------------------------------------------
    def export_plot(self, k: int, path) -> Optional[Path]:
        """Write plot ``k`` as PNG/SVG/PDF (by extension); None when the user declines."""
        return self._export_figure([k], path)

    def export_all(self, path) -> Optional[Path]:
        """Write every drawn plot as one grid figure (PNG/SVG/PDF by extension)."""
        return self._export_figure(None, path)

    def _export_figure(self, plots, path) -> Optional[Path]:
        path, m = Path(path), self.model
        question = export.svg_warning(path, 0 if m.tokens is None else len(m.tokens))
        if question is not None and not self.confirm(question):
            return None
        if m.tokens is None or not m.shown:
            raise LookupError("nothing to export yet: no projection is drawn")
        return save_figure(self.figure(plots), path, panel_figure_options(self.widget))[0]

    def export_csv(self, path, on_done: Optional[Callable] = None) -> JobHandle:
        """Write the drawn coordinates of every plot as CSV (on the worker)."""
        return self.jobs.submit(
            "Exporting coordinates", export.coordinates_job(path, self.model.tokens,
                                                            self.model.drawn()),
            on_done=on_done, on_failed=self._export_failed)

    def export_tensorboard(self, folder, k: int, on_done: Optional[Callable] = None) -> JobHandle:
        """Write ``vectors.tsv`` + ``metadata.tsv`` of plot ``k``'s layer (on the worker)."""
        m = self.model
        return self.jobs.submit(
            "Exporting vectors", export.tensorboard_job(folder, m.tokens, m.acts, m.layers[k]),
            on_done=on_done, on_failed=self._export_failed)

    def _export_failed(self, message: str) -> None:
        self.view.message(f"Export failed: {message}")

    # ---- with dialogs ---------------------------------------------------------------------
    def _has_plot(self) -> bool:
        if self.model.tokens is None or not self.model.shown:
            self.view.message("Nothing to export yet: run a projection first.")
            return False
        return True

    def _plot_index(self, k: Optional[int]) -> int:
        return min(self.model.current_plot if k is None else k, len(self.view.plots.plots) - 1)

    def ask_export_all(self) -> None:
        if self._has_plot():
            export.ask_and_write_image(self.widget, "Export the projection plots",
                                       self.export_all, self.view.message)

    def ask_export_plot(self, k: Optional[int] = None) -> None:
        if self._has_plot():
            k = self._plot_index(k)
            export.ask_and_write_image(self.widget, f"Export the {self.model.layers[k].name} plot",
                                       lambda p: self.export_plot(k, p), self.view.message)

    def ask_export_csv(self) -> None:
        if self._has_plot() and (path := export.ask_csv_path(self.widget)):
            self.export_csv(path, lambda p: self.view.message(f"Saved {p}"))

    def ask_export_tensorboard(self, k: Optional[int] = None) -> None:
        if not self._has_plot():
            return
        k = self._plot_index(k)
        name = self.model.layers[k].name
        folder = export.ask_folder(self.widget, name)
        if folder:
            self.export_tensorboard(folder, k, lambda r: self.view.message(
                f"Saved {name} vectors: {r[0]} and {r[1]}"))
