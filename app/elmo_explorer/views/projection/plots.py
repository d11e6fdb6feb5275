"""Side-by-side scatter plots of one token set, one per layer, with linked interaction.

Every plot draws the same N points (one ``ScatterPlotItem`` in pixel mode with shared brushes:
no per-point Python objects). Three small overlay items per plot show the selection, the search
hits and the hovered point, so linking them only redraws a few points. Shift+drag (or drag in
"select" mode) draws a box; the points inside become the selection in every plot (the box
and the selection are :mod:`elmo_explorer.common.box_select`, shared with the Corpus view's map).
"""
from __future__ import annotations

from collections import Counter
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF, Signal
from PySide6.QtGui import QBrush, QColor

from elmo_explorer.common.box_select import SelectViewBox, rect_tuple
from elmo_explorer.common.selection import points_in_rect
from elmo_explorer.views.map_marks import found_star, selection_rings  # as the Corpus view
from elmo_explorer.views.palette import OTHER_COLOUR, PALETTE

POINT_SIZE = 5
HOVER_RADIUS_PX = 8
#: up to this many points each point is labelled with its word
MAX_LABELLED_POINTS = 60


def categories(values: Sequence[str], max_colours: int = len(PALETTE), by_frequency: bool = True,
               first: Optional[Dict[str, str]] = None
               ) -> Tuple[np.ndarray, List[Tuple[str, str, int]]]:
    """Colour codes for categorical values.

    Returns ``codes (N,)`` (0..K-1 for the K coloured categories, K for "other") and the legend
    ``[(name, colour, count), …]``; categories beyond ``max_colours`` share the grey "other"
    entry, which comes last. ``by_frequency=False`` keeps first-seen order (for sentences).
    ``first``: value → a name; these values come first, in the order of their names (a word
    sense keeps its colour whether it is shown as "bank: river" or as "river").
    """
    counts = Counter(values)
    if first:
        named = sorted((v for v in counts if v in first), key=lambda v: (first[v], v))
        rest = sorted((v for v in counts if v not in first), key=lambda v: (-counts[v], v))
        order = named + rest
    elif by_frequency:
        order = [v for v, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    else:
        order = list(dict.fromkeys(values))
    top = order[:max_colours]
    index = {v: i for i, v in enumerate(top)}
    codes = np.fromiter((index.get(v, len(top)) for v in values), dtype=np.int32,
                        count=len(values))
    legend = [(v, PALETTE[i], counts[v]) for i, v in enumerate(top)]
    rest = len(values) - sum(counts[v] for v in top)
    if rest:
        legend.append((f"{len(order) - len(top):,} others", OTHER_COLOUR, rest))
    return codes, legend


class LayerPlot:
    """One plot: the points of one layer plus the selection / search / hover overlays."""

    def __init__(self, layout: pg.GraphicsLayout, row: int, column: int, title: str):
        self.view = SelectViewBox()
        self.plot = layout.addPlot(row=row, col=column, viewBox=self.view)
        # the title sits inside the view: a PlotItem title would set the plot's minimum width to
        # the text's, and four long titles overflow a narrow window
        self.title = pg.TextItem(title, color="#333333", anchor=(0, 0),
                                 fill=pg.mkBrush(255, 255, 255, 200))
        self.title.setParentItem(self.view)
        self.title.setPos(2, 2)
        self.title.setZValue(20)
        self.plot.showAxes(True, showValues=False)      # a frame, no numbers: units are arbitrary
        self.plot.setMenuEnabled(True)
        self.view.setAspectLocked(True)                  # equal axes: distances read true
        self.points = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE, pen=None, antialias=False)
        self.selected = selection_rings(POINT_SIZE)
        self.found = found_star(POINT_SIZE)
        self.hover = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE + 11, brush=None,
                                        pen=pg.mkPen("#e6194b", width=2.5))
        # the typed sentences' points: larger, filled with their own colour, ringed, on top of
        # the reference points, so that their groups stay visible among hundreds of points
        self.typed = pg.ScatterPlotItem(pxMode=True, size=POINT_SIZE + 6,
                                        pen=pg.mkPen("#000000", width=1.2))
        self.labels: list = []                             # TextItems when points are few
        # the note that replaces a map whose tokens fall on a few points (layer 0 of one word)
        self.note = pg.TextItem("", color="#333333", anchor=(0, 0))
        self.note.setParentItem(self.view)
        self.note.setPos(8, 34)
        self.note.setZValue(20)
        self.note.setVisible(False)
        self.view.sigResized.connect(self._fit_note)
        for z, item in enumerate((self.points, self.typed, self.selected, self.found,
                                  self.hover)):
            item.setZValue(z)
            self.plot.addItem(item)
        self.coords: Optional[np.ndarray] = None          # (N, 2)
        self.brushes: Sequence[QBrush] = ()               # one per point
        self.shown = {"selected": np.zeros(0, np.int64), "found": np.zeros(0, np.int64),
                      "hover": np.zeros(0, np.int64), "typed": np.zeros(0, np.int64)}

    def set_title(self, title: str) -> None:
        self.title.setText(title, color="#333333")

    def set_note(self, note: Optional[str]) -> None:
        """Show ``note`` instead of the points (``None``: the map)."""
        self.note.setText(note or "", color="#333333")
        self.note.setVisible(bool(note))
        self._fit_note()
        for item in (self.points, self.typed, self.selected, self.found, self.hover):
            item.setVisible(not note)
        for t in self.labels:
            t.setVisible(not note)

    def note_text(self) -> str:
        return self.note.toPlainText() if self.note.isVisible() else ""

    def _fit_note(self, *_):
        self.note.setTextWidth(max(120.0, self.view.width() - 16.0))

    def title_text(self) -> str:
        return self.title.toPlainText()

    def set_points(self, coords: np.ndarray, brushes: Sequence[QBrush]) -> None:
        self.coords = np.asarray(coords, dtype=np.float64)
        self.brushes = list(brushes)
        self.points.setData(x=self.coords[:, 0], y=self.coords[:, 1], brush=brushes)
        self.view.autoRange(padding=0.04)

    def set_labels(self, words: Sequence[str]) -> None:
        """Write each point's word beside it (only called when the points are few)."""
        for t in self.labels:
            self.plot.removeItem(t)
        self.labels = []
        if self.coords is None:
            return
        for (x, y), w in zip(self.coords, words):
            t = pg.TextItem(w, color="#333333", anchor=(-0.1, 0.5))
            t.setPos(float(x), float(y))
            self.plot.addItem(t)
            self.labels.append(t)

    def set_brushes(self, brushes: Sequence[QBrush]) -> None:
        if self.coords is not None:
            self.brushes = list(brushes)
            self.points.setBrush(brushes)
            self.show_overlay("typed", self.shown["typed"])

    def show_overlay(self, which: str, indices) -> None:
        """Draw the points ``indices`` in overlay ``which`` ("selected", "found", "hover")."""
        item = getattr(self, which)
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        if self.coords is None or len(indices) == 0:
            self.shown[which] = np.zeros(0, np.int64)
            item.setData(x=[], y=[])
            return
        self.shown[which] = indices
        pts = self.coords[indices]
        if which == "typed" and len(self.brushes) == len(self.coords):
            item.setData(x=pts[:, 0], y=pts[:, 1], brush=[self.brushes[i] for i in indices])
        else:
            item.setData(x=pts[:, 0], y=pts[:, 1])

    def nearest(self, pos: QPointF, radius_px: float = HOVER_RADIUS_PX) -> int:
        """The index of the point nearest to ``pos`` (data coords) within ``radius_px``, or -1
        (also on a plot that shows a note)."""
        if self.coords is None or len(self.coords) == 0 or self.note_text():
            return -1
        px, py = self.view.viewPixelSize()
        if not px or not py:
            return -1
        dx = (self.coords[:, 0] - pos.x()) / px
        dy = (self.coords[:, 1] - pos.y()) / py
        d2 = dx * dx + dy * dy
        i = int(np.argmin(d2))
        return i if d2[i] <= radius_px * radius_px else -1

    def inside(self, rect: QRectF) -> np.ndarray:
        if self.note_text():
            return np.zeros(0, np.int64)
        return points_in_rect(self.coords, rect_tuple(rect))


class ProjectionPlots(pg.GraphicsLayoutWidget):
    """A row of :class:`LayerPlot` with linked selection, search highlight and hover.

    Signals
    -------
    hovered(int, int) : plot index, point index (-1 when the mouse left the points)
    selection_made(object) : the selected point indices (np.ndarray) after a box selection
    point_clicked(int, int) : plot index, point index (-1 for a click on empty space)
    """

    hovered = Signal(int, int)
    selection_made = Signal(object)
    point_clicked = Signal(int, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setBackground("w")
        self.plots: List[LayerPlot] = []
        self.selection = np.zeros(0, np.int64)
        self.highlight = np.zeros(0, np.int64)
        self.typed = np.zeros(0, np.int64)
        self.words: List[str] = []
        self.hover_index = -1
        self._brushes: List[QBrush] = []
        self._palette = [pg.mkBrush(QColor(c)) for c in PALETTE] + [pg.mkBrush(OTHER_COLOUR)]
        self._codes: Optional[np.ndarray] = None
        self._named_brushes: Dict[str, QBrush] = {}        # '#rrggbb' → its shared brush
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)

    # ---- layout -------------------------------------------------------------------------------
    def set_layers(self, titles: Sequence[str]) -> None:
        """One empty plot per title, side by side (replaces the old plots)."""
        self.ci.clear()
        self.plots = []
        cols = 2 if len(titles) == 4 else max(1, len(titles))   # layers 0-2 + mix: a 2×2 grid
        for k, title in enumerate(titles):
            lp = LayerPlot(self.ci, k // cols, k % cols, title)
            lp.view.box_selected.connect(lambda rect, k=k: self._on_box(k, rect))
            lp.view.clicked.connect(lambda pos, k=k: self._on_click(k, pos))
            self.plots.append(lp)
        self.selection = np.zeros(0, np.int64)
        self.highlight = np.zeros(0, np.int64)
        self.typed = np.zeros(0, np.int64)
        self.words: List[str] = []
        self.hover_index = -1

    def set_coords(self, k: int, coords: np.ndarray, title: str,
                   note: Optional[str] = None) -> None:
        """Draw ``coords (N, 2)`` in plot ``k`` with the current colours and overlays; with
        ``note`` the plot shows that text instead of the points (a map that carries none)."""
        lp = self.plots[k]
        lp.set_title(title)
        lp.set_points(coords, self._point_brushes(len(coords)))
        lp.show_overlay("selected", self.selection)
        lp.show_overlay("found", self.highlight)
        lp.show_overlay("hover", [self.hover_index] if self.hover_index >= 0 else [])
        lp.show_overlay("typed", self.typed)
        if 0 < len(self.words) == len(coords) <= MAX_LABELLED_POINTS:
            lp.set_labels(self.words)
        lp.set_note(note)

    def set_select_mode(self, on: bool) -> None:
        for lp in self.plots:
            lp.view.select_mode = on

    # ---- colours ----------------------------------------------------------------------------
    def set_codes(self, codes: np.ndarray) -> None:
        """Colour point i with palette entry ``codes[i]`` (``len(PALETTE)`` or more: grey)."""
        self._codes = np.minimum(np.asarray(codes, np.int64), len(PALETTE))
        self._brushes = []
        for lp in self.plots:
            if lp.coords is not None:
                lp.set_brushes(self._point_brushes(len(lp.coords)))

    def set_plot_colours(self, k: int, colours: Sequence[str]) -> None:
        """Colour plot ``k``'s points one by one (``colours``: '#rrggbb' per point): a colouring
        that differs between the plots, as the neighbourhood each map keeps (issue 42)."""
        lp = self.plots[k]
        if lp.coords is None or len(colours) != len(lp.coords):
            return
        cache = self._named_brushes
        lp.set_brushes([cache.get(c) or cache.setdefault(c, pg.mkBrush(QColor(c)))
                        for c in colours])

    def _point_brushes(self, n: int) -> List[QBrush]:
        if self._codes is None or len(self._codes) != n:
            return [self._palette[0]] * n
        if len(self._brushes) != n:
            pal = self._palette
            self._brushes = [pal[c] for c in self._codes.tolist()]   # shared QBrush objects
        return self._brushes

    def point_colour(self, i: int) -> str:
        """The colour of point ``i`` as '#rrggbb' (for tests and the legend)."""
        code = 0 if self._codes is None else int(self._codes[i])
        return self._palette[code].color().name()

    # ---- linked overlays --------------------------------------------------------------------
    def set_selection(self, indices) -> None:
        self.selection = np.unique(np.asarray(indices, dtype=np.int64))
        for lp in self.plots:
            lp.show_overlay("selected", self.selection)

    def set_typed(self, indices, words: Sequence[str] = ()) -> None:
        """Ring the points of the typed sentences; ``words`` label the points when few."""
        self.typed = np.unique(np.asarray(indices, dtype=np.int64))
        self.words = list(words)
        for lp in self.plots:
            lp.show_overlay("typed", self.typed)

    def set_highlight(self, indices) -> None:
        self.highlight = np.unique(np.asarray(indices, dtype=np.int64))
        for lp in self.plots:
            lp.show_overlay("found", self.highlight)

    def set_hover(self, index: int) -> None:
        if index == self.hover_index:
            return
        self.hover_index = index
        for lp in self.plots:
            lp.show_overlay("hover", [index] if index >= 0 else [])

    def overlay_indices(self, k: int, which: str) -> np.ndarray:
        """Indices drawn by overlay ``which`` ("selected", "found", "hover") in plot ``k``."""
        return self.plots[k].shown[which]

    # ---- mouse ---------------------------------------------------------------------------------
    def _on_box(self, k: int, rect: QRectF) -> None:
        self.select_in_rect(k, rect)

    def select_in_rect(self, k: int, rect: QRectF) -> np.ndarray:
        """Select the points of plot ``k`` inside ``rect`` (data coords) in every plot."""
        idx = self.plots[k].inside(rect)
        self.set_selection(idx)
        self.selection_made.emit(self.selection)
        return self.selection

    def _on_click(self, k: int, pos: QPointF) -> None:
        self.point_clicked.emit(k, self.plots[k].nearest(pos))

    def _on_mouse_moved(self, scene_pos) -> None:
        for k, lp in enumerate(self.plots):
            if lp.coords is not None and lp.view.sceneBoundingRect().contains(scene_pos):
                i = lp.nearest(lp.view.mapSceneToView(scene_pos))
                self.set_hover(i)
                self.hovered.emit(k, i)
                return
        if self.hover_index >= 0:
            self.set_hover(-1)
            self.hovered.emit(-1, -1)
