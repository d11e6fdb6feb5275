"""The projection view's figure, as a function of values: the drawn plots as one grid figure
with equal axes and the legend outside (:func:`elmo_engine.io.figures.projection.projection_grid`),
for File → Export (the report's projection part is the engine's, from the workspace).
(The saved view state is the controls' :meth:`~.controls.ProjectionControls.state`.)
"""
from __future__ import annotations

from typing import Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.projection import Projection
from elmo_explorer.views.projection.controls import COLOUR_BY
from elmo_explorer.views.projection.faithful import KEPT, kept_colours
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.plots import OTHER_COLOUR, PALETTE

LEGEND_LABEL_CHARS = 40
Colours = Tuple[Sequence[int], Sequence[tuple]]          # (codes, legend) of colour_categories


def grid_figure(m: ProjectionModel, colours: Colours, colour_by: str,
                plots: Optional[Sequence[int]] = None, typed: Sequence[int] = ()):
    """The drawn plots (``plots``: their indices, default all) as one matplotlib figure:
    two maps a row with equal axes, coloured as on screen (``colours``: the codes and legend
    of ``colour_by``), one legend outside, words beside the points when there are few (the
    engine's figure path). ``typed``: the points of the user's own sentences among reference
    points, drawn above them and named in the legend; a map whose tokens fall on a few points
    (layer 0 of one word) is a note. Each panel's title carries how faithful its map is
    (``m.faith``: T, C, kNN kept, k and n); coloured by "Neighbourhood preserved", each panel
    has its own colours and the legend counts the first panel's points."""
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
    kept_legend = None
    for k in plots:
        p: Projection = shown[k]
        if p.method == "pca":
            ex = p.explained or (0.0, 0.0)
            how = f"PCA ({100 * ex[0]:.0f} % + {100 * ex[1]:.0f} % of variance)"
        else:
            how = "UMAP"
        f = m.faith.get(k)
        panel_colours = point_colours
        if colour_by == KEPT:
            panel_colours, legend_k = kept_colours(f, len(tokens), p.layer.name)
            kept_legend = kept_legend or legend_k
        title = "\n".join([f"{p.layer.name}: {how}", *(f.caption_lines() if f else ())])
        panels.append({"title": title, "xy": p.coords,
                       "colors": panel_colours, "labels": list(tokens.words),
                       "highlight": mine if mine.any() else None,
                       "note": collapsed_note(p, tokens.words)})
    legend = kept_legend if kept_legend is not None else legend
    return projection_grid(panels, [(f"{name[:LEGEND_LABEL_CHARS]} ({n})", colour)
                                    for name, colour, n in legend],
                           f"{len(tokens):,} tokens ({tokens.source or 'tokens'}), "
                           f"coloured by {by}")


