"""The projection view's report parts and saved state: figures, tables, view state.

:class:`ProjectionReport` is the part of the projection controller
(:class:`elmo_explorer.panels.projection.ProjectionPanel`) that gives the workspace actions:

* ``view_state`` / ``restore_view_state``: token source (loaded sentences, word list, labelled
  data set file), the point cap, colour-by, UMAP settings, mix weights and the search text;
* report figures: one publication figure per layer plot (:class:`ProjectionFigure`: black title
  and axes, axis labels, a legend), PNG + SVG (+ PDF when asked), at the report dialog's size
  and DPI;
* report tables: the drawn coordinates (CSV only), when cheap.

Restoring never computes on the GUI thread: it sets the controls and schedules the panel's usual
automatic run (PCA, then UMAP jobs on the worker); a data set file is read on the worker.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QCoreApplication, QEvent, QRectF, Qt
from PySide6.QtWidgets import QSizePolicy

from elmo_engine.analysis.projection import Projection
from elmo_engine.analysis.projection.export import coordinates_table
from elmo_engine.io.report import ReportTable
from elmo_explorer.figure_export import FigureOptions, panel_figure_options, write_figures
from elmo_explorer.panels.projection_controls import COLOUR_BY, SOURCES
from elmo_explorer.panels.projection_model import (STATE_VERSION, as_float, as_int,
                                                   mix_weights_text, parse_weights)
from elmo_explorer.panels.projection_plots import OTHER_COLOUR, PALETTE

if TYPE_CHECKING:
    from elmo_explorer.panels.projection import ProjectionPanel

#: up to this many points the coordinates go into the report as a CSV table
TABLE_MAX_POINTS = 50_000
LEGEND_LABEL_CHARS = 40


def _short(text: str, n: int = LEGEND_LABEL_CHARS) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


class ProjectionFigure(pg.GraphicsLayoutWidget):
    """One layer's projection as a stand-alone figure for PNG/SVG/PDF export.

    Parameters
    ----------
    coords : ``(N, 2)`` point coordinates
    codes : ``(N,)`` palette index per point (``len(PALETTE)`` or more: the grey "other")
    legend : ``[(name, colour, count), …]`` as :func:`elmo_explorer.panels.projection_plots.categories`
    title : the figure title
    axis_labels : the x and y axis labels
    """

    #: height / width of a scatter plot with its legend at the side
    ASPECT = 0.72
    TITLE_PT = 11
    LEGEND_ROW_PX = 21           # one legend entry (8 pt text) in logical pixels
    LEGEND_MARGIN_PX = 60        # the title and the legend's frame

    def __init__(self, coords: np.ndarray, codes: np.ndarray,
                 legend: Sequence[Tuple[str, str, int]], title: str,
                 axis_labels: Tuple[str, str], parent=None):
        super().__init__(parent)
        self.setBackground("w")
        coords = np.asarray(coords, dtype=np.float64)                  # (N, 2)
        codes = np.minimum(np.asarray(codes, dtype=np.int64), len(PALETTE))
        self.title = self.addLabel(title, row=0, col=0, colspan=2, color="k",
                                   size=f"{self.TITLE_PT}pt")
        self.plot = self.addPlot(row=1, col=0)
        self.plot.showAxes(True, showValues=(True, False, False, True))
        for side in ("left", "bottom", "top", "right"):
            axis = self.plot.getAxis(side)
            axis.setPen(pg.mkPen("k"))
            axis.setTextPen(pg.mkPen("k"))
            axis.enableAutoSIPrefix(False)
        self.plot.setLabel("bottom", axis_labels[0], color="k")
        self.plot.setLabel("left", axis_labels[1], color="k")
        self.legend = pg.LegendItem(labelTextColor="k", labelTextSize="8pt",
                                    pen=pg.mkPen("#888888"), brush=pg.mkBrush("w"))
        self.legend.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Maximum)
        self.addItem(self.legend, row=1, col=1)           # at the top, rows not spread out
        self.ci.layout.setAlignment(self.legend, Qt.AlignmentFlag.AlignTop)
        self.items: List[pg.ScatterPlotItem] = []
        colours = PALETTE + [OTHER_COLOUR]
        # the grey "others" first so that the coloured categories are drawn above them
        for code in sorted(range(len(legend)), key=lambda c: -1 if legend[c][1] == OTHER_COLOUR
                           else c):
            name, colour, count = legend[code]
            pal = len(PALETTE) if colour == OTHER_COLOUR else colours.index(colour)
            pts = coords[codes == pal]
            item = pg.ScatterPlotItem(x=pts[:, 0], y=pts[:, 1], size=5, pen=None,
                                      brush=pg.mkBrush(colour), pxMode=True)
            self.plot.addItem(item)
            self.items.append(item)
        for name, colour, count in legend:                  # the legend in the panel's order
            item = self.items[[i.opts["brush"].color().name() for i in self.items].index(colour)]
            self.legend.addItem(item, f"{_short(name)} ({count:,})")
        self.plot.getViewBox().autoRange(padding=0.04)
        self.resize(624, round(624 * self.ASPECT))

    def lay_out(self, width: int, height: Optional[int] = None) -> Tuple[int, int]:
        """Lay the figure out at ``width`` × ``height`` logical pixels (``None``: the figure's
        own aspect) without showing it on screen. Returns the size used."""
        if not self.isVisible():
            self.setAttribute(Qt.WidgetAttribute.WA_DontShowOnScreen, True)
            self.show()
        height = round(width * self.ASPECT) if height is None else height
        # as many legend columns as it takes for the entries to fit beside the plot
        rows = max(1, (height - self.LEGEND_MARGIN_PX) // self.LEGEND_ROW_PX)
        n = len(self.legend.items)
        self.legend.setColumnCount(max(1, -(-n // rows)))
        self.legend.updateGeometry()
        self.ci.layout.invalidate()
        self.resize(width, height)
        # the same size gives no resize event: fit the layout to the (new) minimum sizes here
        self.setRange(QRectF(0, 0, width, height), padding=0, disableAutoPixel=False)
        QCoreApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest.value)
        self.plot.getViewBox().autoRange(padding=0.04)
        return width, height


class ProjectionReport:
    """The report figures and tables and the saved state of the projection panel."""

    def __init__(self, panel: "ProjectionPanel"):
        self.panel = panel
        self.model, self.view = panel.model, panel.view

    def figure_options(self) -> FigureOptions:
        """The report dialog's size/DPI (File → Export report), else the defaults."""
        return panel_figure_options(self.panel)

    # ---- figures --------------------------------------------------------------------------
    def projection_figure(self, k: int) -> ProjectionFigure:
        """The publication figure of plot ``k`` as drawn now (PCA or UMAP)."""
        p: Projection = self.model.shown[k]
        tokens = self.model.tokens
        codes, legend = self.panel.colour_categories()
        by = dict(COLOUR_BY)[self.view.controls.colour_by()].lower()
        if p.method == "pca":
            ex = p.explained or (0.0, 0.0)
            axes = (f"PC 1 ({100 * ex[0]:.0f}% of variance)",
                    f"PC 2 ({100 * ex[1]:.0f}% of variance)")
            how = "PCA"
        else:
            axes = ("UMAP 1", "UMAP 2")
            how = "UMAP"
        title = f"{p.layer.name}: {how} of {len(tokens):,} tokens, coloured by {by}"
        return ProjectionFigure(p.coords, codes, legend, title, axes)

    def figures(self, folder, options: Optional[FigureOptions] = None) -> List[Path]:
        """Write every drawn layer plot into ``folder`` in the figure formats (PNG and SVG by
        default, PDF on request); return the files in order. Nothing is written (an empty
        list) before a projection is drawn."""
        shown = self.model.shown
        if self.model.tokens is None or not shown:
            return []
        return write_figures(
            [(f"projection_{shown[k].layer.key}_{shown[k].method}",
              lambda k=k: self.projection_figure(k)) for k in sorted(shown)],
            folder, options or self.figure_options())

    # ---- tables ---------------------------------------------------------------------------
    def tables(self) -> List[ReportTable]:
        """The drawn coordinates of every plot (CSV only), up to ``TABLE_MAX_POINTS`` points."""
        tokens = self.model.tokens
        if tokens is None or not self.model.shown or len(tokens) > TABLE_MAX_POINTS:
            return []
        projs = self.model.drawn()
        header, rows = coordinates_table(tokens, projs)
        methods = ", ".join(f"{p.layer.name} {p.method.upper()}" for p in projs)
        return [ReportTable(
            "projection_coordinates", f"Projection coordinates of {len(tokens):,} tokens",
            [dict(zip(header, r)) for r in rows], header,
            caption=f"One row per point ({tokens.source or 'tokens'}); x/y per plot: {methods}. "
                    f"UMAP settings: {self.view.controls.settings_text()}. sentence and position are "
                    "0-based.", show=False)]

    # ---- view state ------------------------------------------------------------------------
    def view_state(self) -> Dict[str, Any]:
        """The view's parameters as JSON values (see docs/guide/projection.md)."""
        c = self.view.controls
        weights = parse_weights(c.mix.text())
        path = self.model.dataset_path
        return {"version": STATE_VERSION, "source": c.source_key(), "words": c.words.text(),
                "dataset_file": str(path) if path is not None else None,
                "max_points": c.max_points.value(), "colour_by": c.colour_by(),
                "umap": {"n_neighbors": c.n_neighbors.value(), "min_dist": c.min_dist.value(),
                         "seed": c.seed.value(), "epochs": c.epochs.value()},
                "mix_weights": weights, "search": c.search.text()}

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict; missing, unknown or invalid keys are ignored. The
        projection is recomputed by the usual (scheduled) automatic run."""
        if not isinstance(state, dict):
            return
        c, m = self.view.controls, self.model
        widgets = (c, c.source, c.words, c.max_points, c.colour, c.search, c.n_neighbors,
                   c.min_dist, c.seed, c.epochs, c.mix)
        blocked = [w.blockSignals(True) for w in widgets]
        try:
            self._restore_controls(state)
            c._on_source()                       # show the source's widgets (signal blocked)
        finally:
            for w, was in zip(widgets, blocked):
                w.blockSignals(was)
        c._update_settings_tip()
        self.panel.apply_colours()
        self.panel.interaction.search(c.search.text())
        path = state.get("dataset_file")
        if (isinstance(path, str) and path and Path(path).is_file()
                and (m.dataset is None or Path(path) != m.dataset_path)):
            colour = c.colour_by()
            self.panel.interaction.open_dataset(path, colour=colour,
                                                run=c.source_key() == "dataset")
        if c.source_key() == "dataset" and m.dataset is None:
            if not (isinstance(path, str) and path and Path(path).is_file()):
                self.view.message("The saved view used a labelled data set that is not there "
                                  "now: open it with Open data set…")
            return                               # else waits for the data set (worker)
        m.dirty = True
        self.panel.maybe_auto()

    def _restore_controls(self, state: Dict[str, Any]) -> None:
        c = self.view.controls
        if state.get("source") in [k for k, _ in SOURCES]:
            c.set_source(state["source"])
        if isinstance(state.get("words"), str):
            c.words.setText(state["words"])
        if as_int(state.get("max_points")) is not None:
            c.max_points.setValue(state["max_points"])       # clamped to the box's range
        if state.get("colour_by") in [k for k, _ in COLOUR_BY]:
            c.set_colour_by(state["colour_by"])
        if isinstance(state.get("search"), str):
            c.search.setText(state["search"])
        umap = state.get("umap")
        if isinstance(umap, dict):
            for key, box in (("n_neighbors", c.n_neighbors), ("seed", c.seed),
                             ("epochs", c.epochs)):
                if as_int(umap.get(key)) is not None:
                    box.setValue(umap[key])
            if as_float(umap.get("min_dist")) is not None:
                c.min_dist.setValue(umap["min_dist"])
        text = mix_weights_text(state)                         # "": equal weights
        if text is not None:
            c.mix.setText(text)
