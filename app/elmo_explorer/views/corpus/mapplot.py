"""One layer's map of occurrences (pyqtgraph) that stays smooth at 10^5–10^6 points.

Zoomed out it shows a density image binned at the viewport's resolution; once the viewport holds
at most :data:`~.atlas.POINTS_MAX` points it shows them as points (pixel mode, one shared brush
per colour, no per-point Python objects beyond the brush list). Both are recomputed 40 ms after
the last zoom or pan, from the viewport alone (:mod:`.atlas`). The selected occurrence is ringed
in black, as in the Projection view; a click on a point emits its index.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer, Signal
from PySide6.QtGui import QColor

from elmo_engine.io.figures.corpus import density_rgba
from elmo_explorer.views.corpus.atlas import (MapMode, Rect, bounds, grid_shape, mode_for,
                                              visible, POINTS_MAX)
from elmo_explorer.views.palette import SELECTED_EXTRA_PX, SELECTED_PEN

POINT_SIZE = 4
FEW_POINTS = 2000          # up to this many points in view they are drawn larger
REFRESH_MS = 40
CLICK_RADIUS_PX = 8


class MapPlot(pg.PlotWidget):
    """Signals: ``point_clicked(int)`` (index into the data), ``mode_changed(str)``."""

    point_clicked = Signal(int)
    mode_changed = Signal(str)

    def __init__(self, title: str = "", parent=None):
        super().__init__(parent, background="w")
        self.plot = self.getPlotItem()
        self.plot.hideButtons()
        self.plot.showAxes(True, showValues=False)
        self.plot.setMenuEnabled(False)
        self.view = self.plot.getViewBox()
        self.view.setAspectLocked(False)
        self.title = pg.TextItem(title, color="#333333", anchor=(0, 0),
                                 fill=pg.mkBrush(255, 255, 255, 200))
        self.title.setParentItem(self.view)
        self.title.setPos(4, 2)
        self.image = pg.ImageItem(axisOrder="row-major")
        self.points = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE, pen=None, antialias=False)
        pen_colour, pen_width = SELECTED_PEN
        self.selected = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE + SELECTED_EXTRA_PX + 4,
                                           brush=None, pen=pg.mkPen(pen_colour, width=pen_width))
        for item in (self.image, self.points, self.selected):
            self.plot.addItem(item)
        self.points.setZValue(1)
        self.selected.setZValue(3)
        self.coords: Optional[np.ndarray] = None          # (N, 2)
        self.codes: Optional[np.ndarray] = None           # (N,)
        self.colours: List[str] = []
        self._brushes: list = []
        self.mode: Optional[MapMode] = None
        self.shown: np.ndarray = np.zeros(0, np.int64)    # indices drawn as points
        self.selected_index: Optional[int] = None
        self.points_max = POINTS_MAX
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self.view.sigRangeChanged.connect(lambda *_: self._timer.start())
        self.scene().sigMouseClicked.connect(self._on_click)

    def set_title(self, text: str) -> None:
        self.title.setText(text, color="#333333")

    def set_data(self, coords: np.ndarray, codes: np.ndarray, colours: Sequence[str]) -> None:
        """Show ``coords`` ``(N, 2)`` coloured by ``codes`` (indices into ``colours``)."""
        self.coords = np.ascontiguousarray(coords, np.float32)
        self.codes = np.asarray(codes, np.int32)
        self.colours = list(colours)
        self._brushes = [pg.mkBrush(QColor(c)) for c in self.colours]
        self.selected_index = None
        x0, y0, x1, y1 = bounds(self.coords)
        self.view.setRange(QRectF(x0, y0, x1 - x0, y1 - y0), padding=0)
        self.refresh()

    def clear_data(self) -> None:
        self.coords = self.codes = None
        self.image.clear()
        self.points.clear()
        self.selected.clear()
        self.mode = None

    def set_selected(self, index: Optional[int]) -> None:
        self.selected_index = index
        if index is None or self.coords is None or not 0 <= index < len(self.coords):
            self.selected.clear()
        else:
            p = self.coords[index]
            self.selected.setData(x=[float(p[0])], y=[float(p[1])])

    def data_rect(self) -> Rect:
        (x0, x1), (y0, y1) = self.view.viewRange()
        return (x0, y0, x1, y1)

    def zoom_to(self, rect: Rect) -> None:
        """Show ``rect`` and redraw now (tests, restoring a view)."""
        x0, y0, x1, y1 = rect
        self.view.setRange(QRectF(x0, y0, x1 - x0, y1 - y0), padding=0)
        self.refresh()

    def refresh(self) -> None:
        """Redraw for the current viewport: the density image or the points inside it."""
        self._timer.stop()
        if self.coords is None:
            return
        rect = self.data_rect()
        inside = visible(self.coords, rect)
        mode = mode_for(len(inside), self.points_max)
        if mode is MapMode.DENSITY:
            size = self.view.size()
            shape = grid_shape(int(size.width()), int(size.height()))
            img = density_rgba(self.coords, self.codes, self.colours, rect, shape)
            self.image.setImage(img, autoLevels=False, levels=(0, 255))
            self.image.setRect(QRectF(rect[0], rect[1], rect[2] - rect[0], rect[3] - rect[1]))
            self.image.show()
            self.points.clear()
            self.shown = np.zeros(0, np.int64)
        else:
            self.image.hide()
            self.shown = inside
            pts = self.coords[inside]
            brushes = [self._brushes[c] for c in self.codes[inside]]
            size = POINT_SIZE if len(inside) > FEW_POINTS else POINT_SIZE + 3
            self.points.setData(x=pts[:, 0], y=pts[:, 1], brush=brushes, size=size)
        if mode is not self.mode:
            self.mode = mode
            self.mode_changed.emit(mode.value)
        self.set_selected(self.selected_index)

    def _on_click(self, ev) -> None:
        if self.coords is None or self.mode is not MapMode.POINTS or not len(self.shown):
            return
        pos = self.view.mapSceneToView(ev.scenePos())
        pts = self.coords[self.shown]
        px = self.view.viewPixelSize()                      # data units per pixel (x, y)
        d = np.hypot((pts[:, 0] - pos.x()) / px[0], (pts[:, 1] - pos.y()) / px[1])
        best = int(np.argmin(d))
        if d[best] <= CLICK_RADIUS_PX:
            self.point_clicked.emit(int(self.shown[best]))
