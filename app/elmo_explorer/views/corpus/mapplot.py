"""One layer's map of occurrences (pyqtgraph) that stays smooth at 10^5–10^6 points.

Zoomed out it shows a density image binned at the viewport's resolution; once the viewport holds
at most :data:`~.atlas.POINTS_MAX` points it shows them as points (pixel mode, one shared brush
per colour, no per-point Python objects beyond the brush list). Both are recomputed 40 ms after
the last zoom or pan, from the viewport alone (:mod:`.atlas`).

Marks and selection are the Projection view's (:mod:`elmo_explorer.views.map_marks`,
:mod:`elmo_explorer.common.box_select`): the query's occurrence is a yellow star; Shift+drag draws
a box and every point inside it — of all the points, whether drawn as points or binned in the
density image — is selected (one numpy mask) and ringed in black. When more selected points are
in view than :data:`~.atlas.POINTS_MAX`, the selection is drawn as a grey density image over the
map instead of rings. A click on a point emits its index.
"""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QRectF, QTimer, Signal
from PySide6.QtGui import QColor

from elmo_engine.io.figures.corpus import SELECTION_SHADE, density_rgba
from elmo_explorer.common.box_select import SelectViewBox, rect_tuple
from elmo_explorer.common.selection import Rect, inside_mask, normalized
from elmo_explorer.views.corpus.atlas import (MapMode, bounds, grid_shape, mode_for, visible,
                                              POINTS_MAX)
from elmo_explorer.views.map_marks import found_star, selection_rings

POINT_SIZE = 4
FEW_POINTS = 2000          # up to this many points in view they are drawn larger
REFRESH_MS = 40
CLICK_RADIUS_PX = 8


class MapPlot(pg.PlotWidget):
    """Signals: ``point_clicked(int)`` (index into the data), ``mode_changed(str)``,
    ``selection_made(object, object)`` (the indices inside a box, ascending int64, and the box:
    ``(x0, y0, x1, y1)`` in data coordinates, normalized)."""

    point_clicked = Signal(int)
    mode_changed = Signal(str)
    selection_made = Signal(object, object)

    def __init__(self, title: str = "", parent=None):
        super().__init__(parent, background="w", viewBox=SelectViewBox())
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
        self.boxed_image = pg.ImageItem(axisOrder="row-major")
        self.points = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE, pen=None, antialias=False)
        self.boxed = selection_rings(POINT_SIZE)
        self.selected = found_star(POINT_SIZE)
        for z, item in enumerate((self.image, self.boxed_image, self.points, self.boxed,
                                  self.selected)):
            item.setZValue(z)
            self.plot.addItem(item)
        self.coords: Optional[np.ndarray] = None          # (N, 2)
        self.codes: Optional[np.ndarray] = None           # (N,)
        self.colours: List[str] = []
        self._brushes: list = []
        self.mode: Optional[MapMode] = None
        self.shown: np.ndarray = np.zeros(0, np.int64)    # indices drawn as points
        self.selected_index: Optional[int] = None         # the query's occurrence (a star)
        self.selection: np.ndarray = np.zeros(0, np.int64)  # the box selection (rings)
        self._selection_mask: Optional[np.ndarray] = None   # (N,) bool, the same
        self.boxed_shown: np.ndarray = np.zeros(0, np.int64)  # selected indices drawn as rings
        self.points_max = POINTS_MAX
        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(REFRESH_MS)
        self._timer.timeout.connect(self.refresh)
        self.view.sigRangeChanged.connect(lambda *_: self._timer.start())
        self.view.box_selected.connect(lambda rect: self.select_in_rect(rect_tuple(rect)))
        self.view.clicked.connect(self._on_click)

    def set_title(self, text: str) -> None:
        self.title.setText(text, color="#333333")

    def set_data(self, coords: np.ndarray, codes: np.ndarray, colours: Sequence[str]) -> None:
        """Show ``coords`` ``(N, 2)`` coloured by ``codes`` (indices into ``colours``)."""
        self.coords = np.ascontiguousarray(coords, np.float32)
        self.codes = np.asarray(codes, np.int32)
        self.colours = list(colours)
        self._brushes = [pg.mkBrush(QColor(c)) for c in self.colours]
        self.selected_index = None
        self.selection, self._selection_mask = np.zeros(0, np.int64), None
        x0, y0, x1, y1 = bounds(self.coords)
        self.view.setRange(QRectF(x0, y0, x1 - x0, y1 - y0), padding=0)
        self.refresh()

    def clear_data(self) -> None:
        self.coords = self.codes = None
        self.selection, self._selection_mask = np.zeros(0, np.int64), None
        for item in (self.image, self.boxed_image, self.points, self.boxed, self.selected):
            item.clear()
        self.mode = None

    def set_selected(self, index: Optional[int]) -> None:
        """Star the query's occurrence ``index`` (None: none)."""
        self.selected_index = index
        if index is None or self.coords is None or not 0 <= index < len(self.coords):
            self.selected.clear()
        else:
            p = self.coords[index]
            self.selected.setData(x=[float(p[0])], y=[float(p[1])])

    # ---- box selection ------------------------------------------------------------------------
    def select_in_rect(self, rect: Rect) -> np.ndarray:
        """Select every point inside ``rect`` (data coordinates, any corner order), drawn or
        binned, and emit ``selection_made``."""
        rect = normalized(rect)
        if self.coords is None:
            self._set_mask(None)
        else:
            self._set_mask(inside_mask(self.coords, rect))
        self.selection_made.emit(self.selection, rect)
        return self.selection

    def set_selection(self, indices) -> None:
        """Ring the points ``indices`` (the same occurrences in every layer's plot)."""
        n = 0 if self.coords is None else len(self.coords)
        idx = np.asarray(indices, np.int64).reshape(-1)
        idx = idx[(idx >= 0) & (idx < n)]
        mask = None
        if len(idx):
            mask = np.zeros(n, bool)              # a mask, not np.unique: O(N), no sort
            mask[idx] = True
        self._set_mask(mask)

    def _set_mask(self, mask: Optional[np.ndarray]) -> None:
        if mask is not None and not mask.any():
            mask = None
        self._selection_mask = mask
        self.selection = np.zeros(0, np.int64) if mask is None else np.flatnonzero(mask)
        inside = np.zeros(0, np.int64) if self.coords is None else visible(self.coords,
                                                                            self.data_rect())
        self._draw_selection(self.data_rect(), inside)

    def _draw_selection(self, rect: Rect, inside: np.ndarray) -> None:
        """Rings around the selected points in view, or (more than ``points_max`` of them) their
        density image in grey."""
        if self._selection_mask is None or not len(inside):
            self.boxed.clear()
            self.boxed_image.hide()
            self.boxed_shown = np.zeros(0, np.int64)
            return
        in_view = inside[self._selection_mask[inside]]                       # ascending
        if len(in_view) <= self.points_max:
            pts = self.coords[in_view]
            self.boxed.setData(x=pts[:, 0], y=pts[:, 1])
            self.boxed_image.hide()
            self.boxed_shown = in_view
            return
        self.boxed.clear()
        self.boxed_shown = np.zeros(0, np.int64)
        img = density_rgba(self.coords[in_view], np.zeros(len(in_view), np.int32),
                           ["#202020"], rect, self._grid(), min_alpha=0.35)
        img[..., 3] = (img[..., 3] * SELECTION_SHADE).astype(np.uint8)
        self.boxed_image.setImage(img, autoLevels=False, levels=(0, 255))
        self.boxed_image.setRect(QRectF(rect[0], rect[1], rect[2] - rect[0], rect[3] - rect[1]))
        self.boxed_image.show()

    # ---- viewport -----------------------------------------------------------------------------
    def data_rect(self) -> Rect:
        (x0, x1), (y0, y1) = self.view.viewRange()
        return (x0, y0, x1, y1)

    def zoom_to(self, rect: Rect) -> None:
        """Show ``rect`` and redraw now (tests, restoring a view)."""
        x0, y0, x1, y1 = rect
        self.view.setRange(QRectF(x0, y0, x1 - x0, y1 - y0), padding=0)
        self.refresh()

    def _grid(self):
        size = self.view.size()
        return grid_shape(int(size.width()), int(size.height()))

    def refresh(self) -> None:
        """Redraw for the current viewport: the density image or the points inside it."""
        self._timer.stop()
        if self.coords is None:
            return
        rect = self.data_rect()
        inside = visible(self.coords, rect)
        mode = mode_for(len(inside), self.points_max)
        if mode is MapMode.DENSITY:
            img = density_rgba(self.coords, self.codes, self.colours, rect, self._grid())
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
        self._draw_selection(rect, inside)
        self.set_selected(self.selected_index)

    def _on_click(self, pos) -> None:
        if self.coords is None or self.mode is not MapMode.POINTS or not len(self.shown):
            return
        pts = self.coords[self.shown]
        px = self.view.viewPixelSize()                      # data units per pixel (x, y)
        d = np.hypot((pts[:, 0] - pos.x()) / px[0], (pts[:, 1] - pos.y()) / px[1])
        best = int(np.argmin(d))
        if d[best] <= CLICK_RADIUS_PX:
            self.point_clicked.emit(int(self.shown[best]))
