"""The projection view's report parts, as functions of values: the drawn plots as one grid
figure with equal axes and the legend outside
(:func:`elmo_engine.io.figures.projection.projection_grid`), PNG + SVG (+ PDF when asked) at
the report dialog's size and DPI, and the drawn coordinates as a table (CSV only), when cheap.
(The saved view state is the controls' :meth:`~.controls.ProjectionControls.state`.)
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.projection import Projection
from elmo_engine.analysis.projection.export import coordinates_table
from elmo_engine.io.report import ReportTable
from elmo_explorer.common.figure_export import FigureOptions, write_figures
from elmo_explorer.views.projection.controls import COLOUR_BY
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.plots import OTHER_COLOUR, PALETTE

#: up to this many points the coordinates go into the report as a CSV table
TABLE_MAX_POINTS = 50_000
LEGEND_LABEL_CHARS = 40
Colours = Tuple[Sequence[int], Sequence[tuple]]          # (codes, legend) of colour_categories


def grid_figure(m: ProjectionModel, colours: Colours, colour_by: str,
                plots: Optional[Sequence[int]] = None, typed: Sequence[int] = ()):
    """The drawn plots (``plots``: their indices, default all) as one matplotlib figure:
    two maps a row with equal axes, coloured as on screen (``colours``: the codes and legend
    of ``colour_by``), one legend outside, words beside the points when there are few (the
    engine's figure path). ``typed``: the points of the user's own sentences among reference
    points, drawn above them and named in the legend; a map whose tokens fall on a few points
    (layer 0 of one word) is a note."""
    from elmo_engine.analysis.projection import collapsed_note
    from elmo_engine.io.figures.projection import projection_grid

    shown, tokens = m.shown, m.tokens
    plots = sorted(shown) if plots is None else list(plots)
    codes, legend = colours
    point_colours = [PALETTE[c] if c < len(PALETTE) else OTHER_COLOUR for c in codes]
    by = dict(COLOUR_BY)[colour_by].lower()
    mine = np.zeros(len(tokens), bool)
    idx = np.asarray(list(typed), dtype=np.int64)
    mine[idx[(idx >= 0) & (idx < len(tokens))]] = True
    panels = []
    for k in plots:
        p: Projection = shown[k]
        if p.method == "pca":
            ex = p.explained or (0.0, 0.0)
            how = f"PCA ({100 * ex[0]:.0f} % + {100 * ex[1]:.0f} % of variance)"
        else:
            how = "UMAP"
        panels.append({"title": f"{p.layer.name}: {how}", "xy": p.coords,
                       "colors": point_colours, "labels": list(tokens.words),
                       "highlight": mine if mine.any() else None,
                       "note": collapsed_note(p, tokens.words)})
    return projection_grid(panels, [(f"{name[:LEGEND_LABEL_CHARS]} ({n})", colour)
                                    for name, colour, n in legend],
                           f"{len(tokens):,} tokens ({tokens.source or 'tokens'}), "
                           f"coloured by {by}")


def report_figures(m: ProjectionModel, colours: Colours, colour_by: str, folder,
                   options: FigureOptions, typed: Sequence[int] = ()) -> List[Path]:
    """Write the drawn plots as one grid figure into ``folder`` in the figure formats (PNG
    and SVG by default, PDF on request); return the files. Nothing is written (an empty list)
    before a projection is drawn."""
    if m.tokens is None or not m.shown:
        return []
    method = "_".join(sorted({p.method for p in m.shown.values()}))
    return write_figures([(f"projection_{method}", lambda: grid_figure(m, colours, colour_by,
                                                                        typed=typed))],
                         folder, options)


def report_tables(m: ProjectionModel, settings_text: str) -> List[ReportTable]:
    """The drawn coordinates of every plot (CSV only), up to ``TABLE_MAX_POINTS`` points."""
    tokens = m.tokens
    if tokens is None or not m.shown or len(tokens) > TABLE_MAX_POINTS:
        return []
    projs = m.drawn()
    header, rows = coordinates_table(tokens, projs)
    methods = ", ".join(f"{p.layer.name} {p.method.upper()}" for p in projs)
    return [ReportTable(
        "projection_coordinates", f"Projection coordinates of {len(tokens):,} tokens",
        [dict(zip(header, r)) for r in rows], header,
        caption=f"One row per point ({tokens.source or 'tokens'}); x/y per plot: {methods}. "
                f"UMAP settings: {settings_text}. sentence and position are 0-based.",
        show=False)]
