"""The marks the map views (Projection, Corpus) draw over their points, in :mod:`.palette`'s
colours: black rings around the selected points, a yellow star on the selected token."""
from __future__ import annotations

import pyqtgraph as pg

from elmo_explorer.views.palette import (FOUND_COLOUR, FOUND_EXTRA_PX, SELECTED_EXTRA_PX,
                                         SELECTED_PEN)


def selection_rings(point_size: int) -> pg.ScatterPlotItem:
    """An empty overlay that rings points of ``point_size`` pixels in black."""
    colour, width = SELECTED_PEN
    return pg.ScatterPlotItem(pxMode=True, size=point_size + SELECTED_EXTRA_PX, brush=None,
                              pen=pg.mkPen(colour, width=width))


def found_star(point_size: int) -> pg.ScatterPlotItem:
    """An empty overlay that stars points of ``point_size`` pixels in yellow."""
    return pg.ScatterPlotItem(pxMode=True, size=point_size + FOUND_EXTRA_PX, symbol="star",
                              brush=pg.mkBrush(FOUND_COLOUR), pen=pg.mkPen("#000000"))
