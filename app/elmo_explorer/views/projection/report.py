"""The projection view's report parts and saved state: figures, tables, view state.

:class:`ProjectionReport` is the part of the projection controller
(:class:`elmo_explorer.views.projection.controller.ProjectionPanel`) that gives the workspace actions:

* ``view_state`` / ``restore_view_state``: token source (loaded sentences, word list, labelled
  data set file), the point cap, colour-by, UMAP settings, mix weights and the search text;
* report figures: the drawn plots as one grid figure with equal axes and the legend outside
  (:func:`elmo_engine.analysis.report_figures.projection_grid`), PNG + SVG (+ PDF when asked),
  at the report dialog's size and DPI;
* report tables: the drawn coordinates (CSV only), when cheap.

Restoring never computes on the GUI thread: it sets the controls and schedules the panel's usual
automatic run (PCA, then UMAP jobs on the worker); a data set file is read on the worker.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence

from elmo_engine.analysis.projection import Projection
from elmo_engine.analysis.projection.export import coordinates_table
from elmo_engine.io.report import ReportTable
from elmo_explorer.common.figure_export import FigureOptions, panel_figure_options, write_figures
from elmo_explorer.views.projection.controls import COLOUR_BY, SOURCES
from elmo_explorer.views.projection.model import (STATE_VERSION, as_float, as_int,
                                                   mix_weights_text, parse_weights)
from elmo_explorer.views.projection.plots import OTHER_COLOUR, PALETTE

if TYPE_CHECKING:
    from elmo_explorer.views.projection.controller import ProjectionPanel

#: up to this many points the coordinates go into the report as a CSV table
TABLE_MAX_POINTS = 50_000
LEGEND_LABEL_CHARS = 40


def _short(text: str, n: int = LEGEND_LABEL_CHARS) -> str:
    return text if len(text) <= n else text[:n - 1] + "…"


class ProjectionReport:
    """The report figures and tables and the saved state of the projection panel."""

    def __init__(self, panel: "ProjectionPanel"):
        self.panel = panel
        self.model, self.view = panel.model, panel.view

    def figure_options(self) -> FigureOptions:
        """The report dialog's size/DPI (File → Export report), else the defaults."""
        return panel_figure_options(self.panel)

    # ---- figures --------------------------------------------------------------------------
    def grid_figure(self, plots: Optional[Sequence[int]] = None):
        """The drawn plots (``plots``: their indices, default all) as one matplotlib figure:
        two maps a row with equal axes, coloured as on screen, one legend outside, words beside
        the points when there are few (the engine's figure path)."""
        from elmo_engine.analysis.report_figures import projection_grid

        shown, tokens = self.model.shown, self.model.tokens
        plots = sorted(shown) if plots is None else list(plots)
        codes, legend = self.panel.colour_categories()
        colours = [PALETTE[c] if c < len(PALETTE) else OTHER_COLOUR for c in codes]
        by = dict(COLOUR_BY)[self.view.controls.colour_by()].lower()
        panels = []
        for k in plots:
            p: Projection = shown[k]
            if p.method == "pca":
                ex = p.explained or (0.0, 0.0)
                how = f"PCA ({100 * ex[0]:.0f} % + {100 * ex[1]:.0f} % of variance)"
            else:
                how = "UMAP"
            panels.append({"title": f"{p.layer.name}: {how}", "xy": p.coords,
                           "colors": colours, "labels": list(tokens.words)})
        return projection_grid(panels, [(f"{name[:LEGEND_LABEL_CHARS]} ({n})", colour)
                                        for name, colour, n in legend],
                               f"{len(tokens):,} tokens ({tokens.source or 'tokens'}), "
                               f"coloured by {by}")

    def figures(self, folder, options: Optional[FigureOptions] = None) -> List[Path]:
        """Write the drawn plots as one grid figure into ``folder`` in the figure formats (PNG
        and SVG by default, PDF on request); return the files. Nothing is written (an empty
        list) before a projection is drawn."""
        shown = self.model.shown
        if self.model.tokens is None or not shown:
            return []
        method = "_".join(sorted({p.method for p in shown.values()}))
        return write_figures([(f"projection_{method}", self.grid_figure)], folder,
                             options or self.figure_options())

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
                "mix_weights": weights, "layer_norm": c.layer_norm.isChecked(),
                "search": c.search.text()}

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict; missing, unknown or invalid keys are ignored. The
        projection is recomputed by the usual (scheduled) automatic run."""
        if not isinstance(state, dict):
            return
        c, m = self.view.controls, self.model
        widgets = (c, c.source, c.words, c.max_points, c.colour, c.search, c.n_neighbors,
                   c.min_dist, c.seed, c.epochs, c.mix, c.layer_norm)
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
        if isinstance(state.get("layer_norm"), bool):
            c.layer_norm.setChecked(state["layer_norm"])
