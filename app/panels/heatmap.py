"""Side-by-side similarity heatmaps with one shared colour bar and a hover read-out.

:class:`HeatmapGrid` draws K square matrices (one per view: layer 0 … layer L, mix) as pyqtgraph
``ImageItem``s in a row, row 0 at the top, the first one labelled with sentence snippets, the
others with occurrence numbers. Small matrices also show their values in the cells. Moving the
mouse over a cell emits :attr:`HeatmapGrid.hovered` with a sentence naming both occurrences and
the cosine.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, Signal
from PySide6.QtGui import QFont, QFontMetrics

#: matrices up to this size show their values in the cells (when a cell is wide enough)
MAX_CELL_TEXT = 12
#: smallest cell width (pixels) that shows its value
MIN_CELL_PX = 23
#: smallest spacing (pixels) between row labels / column numbers
ROW_LABEL_PX = 14
COL_LABEL_PX = 18


def short_label(label: str, context: int = 1) -> str:
    """``"…on the [bank] of the…"`` → ``"the [bank] of"``: one word either side."""
    words = label.strip("…").split(" ")
    at = next((i for i, w in enumerate(words) if w.startswith("[")), None)
    if at is None:
        return label[:20]
    return " ".join(words[max(0, at - context):at + 1 + context])


class HeatmapGrid(pg.GraphicsLayoutWidget):
    """A row of cosine-similarity heatmaps sharing one colour scale.

    Signals
    -------
    hovered(str) : the read-out of the cell under the mouse ("" when over none)
    cell_clicked(int, int, int) : view, row, column of a clicked cell
    """

    hovered = Signal(str)
    cell_clicked = Signal(int, int, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setBackground("w")
        self.cmap = pg.colormap.get("viridis")
        self.plots: List[pg.PlotItem] = []
        self.images: List[pg.ImageItem] = []
        self.bar: Optional[pg.ColorBarItem] = None
        self._texts: list = []            # (plot, TextItem)
        self.names: List[str] = []
        self.matrices = np.zeros((0, 0, 0))
        self.labels: List[str] = []
        self.levels = (0.0, 1.0)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)

    # ---- drawing ------------------------------------------------------------------------------
    def _build(self, names: Sequence[str]) -> None:
        self.clear()
        self.plots, self.images, self._texts = [], [], []
        for k, name in enumerate(names):
            plot = self.addPlot(row=0, col=k)
            plot.setTitle(name, color="k", size="10pt")
            plot.setMenuEnabled(False)
            plot.hideButtons()
            plot.setMouseEnabled(False, False)
            plot.invertY(True)                     # row 0 at the top, like a matrix
            plot.setAspectLocked(True)
            for side in ("left", "bottom"):
                axis = plot.getAxis(side)
                axis.setPen("k")
                axis.setTextPen("k")
                # the labels are thinned out here (_on_resized), not by pyqtgraph's text budget
                axis.setStyle(textFillLimits=[(0, 1.0)], hideOverlappingLabels=False)
            img = pg.ImageItem()
            plot.addItem(img)
            plot.getViewBox().sigResized.connect(self._on_resized)
            self.plots.append(plot)
            self.images.append(img)
        self.bar = pg.ColorBarItem(values=self.levels, colorMap=self.cmap, interactive=False,
                                   colorMapMenu=False)
        self.bar.setImageItem(self.images)
        self.addItem(self.bar, row=0, col=len(names))
        axis = self.bar.getAxis("right")
        axis.setTextPen("k")
        axis.setPen("k")
        axis.setLabel("cosine", color="k")
        self.names = list(names)

    def set_data(self, names: Sequence[str], matrices: np.ndarray, labels: Sequence[str]) -> None:
        """Show ``matrices`` ``(K, n, n)`` titled ``names``; ``labels`` name the n occurrences."""
        matrices = np.asarray(matrices, dtype=np.float64)
        if list(names) != self.names or not self.plots:
            self._build(names)
        self.matrices = matrices
        self.labels = list(labels)
        n = matrices.shape[1]
        lo = float(np.nanmin(matrices)) if matrices.size else 0.0
        lo = min(math.floor(lo * 10) / 10, 0.9)
        self.levels = (lo, 1.0)
        for plot, text in self._texts:
            plot.removeItem(text)
        self._texts = []
        font = QFont()
        font.setPointSize(7)
        for k, (plot, img) in enumerate(zip(self.plots, self.images)):
            img.setImage(matrices[k].T, levels=self.levels, autoLevels=False)   # x = column
            img.setRect(0, 0, n, n)
            plot.setRange(xRange=(0, n), yRange=(0, n), padding=0.02)
            if 0 < n <= MAX_CELL_TEXT:
                mid = (self.levels[0] + self.levels[1]) / 2
                for i in range(n):
                    for j in range(n):
                        v = matrices[k, i, j]
                        t = pg.TextItem(f"{v:.2f}", color="k" if v > mid else "w",
                                        anchor=(0.5, 0.5))
                        t.setFont(font)
                        t.setPos(j + 0.5, i + 0.5)
                        plot.addItem(t)
                        self._texts.append((plot, t))
        if self.bar is not None:
            self.bar.setLevels(self.levels)
        self._on_resized()

    def _cell_px(self, plot) -> float:
        """On-screen size of one cell (the aspect is locked: the shorter side decides)."""
        n = self.matrices.shape[1] if self.matrices.ndim == 3 else 0
        vb = plot.getViewBox()
        return min(vb.width(), vb.height()) / max(n * 1.04, 1)

    def _on_resized(self, *_args) -> None:
        """Thin out tick labels and hide cell values so that nothing overlaps at this size."""
        n = self.matrices.shape[1] if self.matrices.ndim == 3 else 0
        for k, plot in enumerate(self.plots):
            px = max(self._cell_px(plot), 1e-3)
            row_step = max(1, math.ceil(ROW_LABEL_PX / px))
            col_step = max(1, math.ceil(COL_LABEL_PX / px))
            if k == 0:
                rows = [(i + 0.5, f"{short_label(lab)} {i + 1}")
                        for i, lab in enumerate(self.labels) if i % row_step == 0]
            else:
                rows = [(i + 0.5, str(i + 1)) for i in range(0, n, row_step)]
            left = plot.getAxis("left")
            left.setTicks([rows, []])
            # wide enough for every label (pyqtgraph drops labels that do not fit)
            metrics = QFontMetrics(left.style.get("tickFont") or QFont())
            width = max([metrics.horizontalAdvance(t) for _, t in rows] or [0]) + 16
            if abs(left.width() - width) > 1:
                left.setWidth(width)
            plot.getAxis("bottom").setTicks([[(j + 0.5, str(j + 1)) for j in range(0, n, col_step)],
                                             []])
        for plot, text in self._texts:
            text.setVisible(self._cell_px(plot) >= MIN_CELL_PX)

    def clear_data(self, message: str = "") -> None:
        """Remove every heatmap; show ``message`` in their place."""
        self.clear()
        self.plots, self.images, self._texts, self.names = [], [], [], []
        self.matrices = np.zeros((0, 0, 0))
        self.bar = None
        if message:
            self.addLabel(message, color="#444", size="11pt")

    # ---- hover ----------------------------------------------------------------------------------
    def hover_text(self, view: int, i: int, j: int) -> str:
        """The read-out for cell ``(i, j)`` of view ``view``."""
        value = self.matrices[view, i, j]
        a = self.labels[i] if i < len(self.labels) else str(i + 1)
        b = self.labels[j] if j < len(self.labels) else str(j + 1)
        return f"{self.names[view]}: #{i + 1} {a}  ×  #{j + 1} {b}  =  {value:.4f}"

    def cell_at(self, scene_pos: QPointF):
        """``(view, i, j)`` under a scene position, or None."""
        n = self.matrices.shape[1] if self.matrices.ndim == 3 else 0
        for k, plot in enumerate(self.plots):
            vb = plot.getViewBox()
            if not vb.sceneBoundingRect().contains(scene_pos):
                continue
            p = vb.mapSceneToView(scene_pos)
            i, j = math.floor(p.y()), math.floor(p.x())
            if 0 <= i < n and 0 <= j < n:
                return k, i, j
        return None

    def scene_pos_of(self, view: int, i: int, j: int) -> QPointF:
        """Scene position of the centre of a cell (for tests and tooltips)."""
        return self.plots[view].getViewBox().mapViewToScene(QPointF(j + 0.5, i + 0.5))

    def _on_mouse_moved(self, scene_pos) -> None:
        cell = self.cell_at(scene_pos)
        text = "" if cell is None else self.hover_text(*cell)
        self.setToolTip(text)
        self.hovered.emit(text)

    def _on_mouse_clicked(self, event) -> None:
        cell = self.cell_at(event.scenePos())
        if cell is not None:
            self.cell_clicked.emit(*cell)
