"""Similarity heatmaps: side by side on screen, and one per figure for export.

:class:`HeatmapGrid` draws K square matrices (one per view: layer 0 … layer L, mix) as pyqtgraph
``ImageItem``s in a row sharing one colour bar, row 0 at the top. Every heatmap is labelled the
same way and has the same size: rows with sentence snippets and numbers when there is room, else
with occurrence numbers only (the occurrence list and the hover read-out give the sentences).
Small matrices also show their values in the cells. Moving the mouse over a cell emits
:attr:`HeatmapGrid.hovered` with a sentence naming both occurrences and the cosine.

Exported heatmaps are drawn by the engine's one figure path
(:func:`elmo_engine.io.figures.contexts.contexts_heatmaps`), not from these widgets.
"""
from __future__ import annotations

import math
from typing import List, Optional, Sequence, Tuple

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
#: heatmap images are upsampled to at least this many pixels a side (sharp cells in SVG/PDF)
UPSAMPLE_PX = 480


def short_label(label: str, context: int = 1) -> str:
    """``"…on the [bank] of the…"`` → ``"the [bank] of"``: one word either side."""
    words = label.strip("…").split(" ")
    at = next((i for i, w in enumerate(words) if w.startswith("[")), None)
    if at is None:
        return label[:20]
    return " ".join(words[max(0, at - context):at + 1 + context])


def shared_levels(matrices: np.ndarray) -> Tuple[float, float]:
    """One colour scale for all views: from the lowest value (rounded down to 0.1, at most 0.9)
    to 1."""
    lo = float(np.nanmin(matrices)) if np.size(matrices) else 0.0
    return min(math.floor(lo * 10) / 10, 0.9), 1.0


def _heatmap_plot(plot: pg.PlotItem, square_cells: bool = True) -> pg.ImageItem:
    """Make ``plot`` a fixed matrix view (row 0 at the top, black axes; square cells unless
    ``square_cells`` is False); return its image."""
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.setMouseEnabled(False, False)
    plot.invertY(True)                             # row 0 at the top, like a matrix
    plot.setAspectLocked(square_cells)
    for side in ("left", "bottom"):
        axis = plot.getAxis(side)
        axis.setPen("k")
        axis.setTextPen("k")
        axis.enableAutoSIPrefix(False)
        # the labels are thinned out by the caller, not by pyqtgraph's text budget
        axis.setStyle(textFillLimits=[(0, 1.0)], hideOverlappingLabels=False)
    img = pg.ImageItem()
    plot.addItem(img)
    return img


def _colour_bar(levels: Tuple[float, float], label: str, images) -> pg.ColorBarItem:
    """A fixed (non-interactive) viridis colour bar with black frame, ticks and label."""
    bar = pg.ColorBarItem(values=levels, colorMap=pg.colormap.get("viridis"), interactive=False,
                          colorMapMenu=False, pen="k")
    bar.setImageItem(images)
    axis = bar.getAxis("right")
    axis.setPen("k")
    axis.setTextPen("k")
    axis.enableAutoSIPrefix(False)
    axis.setStyle(hideOverlappingLabels=False)     # the end values sit on the bar's edges
    axis.setLabel(label, color="k")
    _bar_ticks(bar, levels)
    return bar


def _bar_ticks(bar: pg.ColorBarItem, levels: Tuple[float, float]) -> None:
    """Set the colour scale and label it at round steps that include both ends."""
    bar.setLevels(levels)
    lo, hi = levels
    step = next((s for s in (0.02, 0.05, 0.1, 0.2, 0.25, 0.5) if (hi - lo) / s <= 6), 1.0)
    first = math.ceil(lo / step - 1e-9)
    ticks = [round(k * step, 6) for k in range(first, math.floor(hi / step + 1e-9) + 1)]
    minor = [round(k * step / 5, 6) for k in range(math.ceil(lo * 5 / step - 1e-9),
                                                      math.floor(hi * 5 / step + 1e-9) + 1)]
    bar.getAxis("right").setTicks([[(t, f"{t:.2f}") for t in ticks],
                                   [(t, "") for t in minor if t not in ticks]])


def _show_matrix(plot: pg.PlotItem, img: pg.ImageItem, matrix: np.ndarray,
                 levels: Tuple[float, float], point_size: int) -> list:
    """Draw ``matrix`` ``(n, n)`` (cell (i, j) at x = j, y = i); return its value TextItems.

    The image is upsampled to blocks of at least ``UPSAMPLE_PX`` pixels in all so that viewers
    that smooth embedded images (SVG, PDF) still show sharp cells.
    """
    n = matrix.shape[0]
    f = max(1, math.ceil(UPSAMPLE_PX / max(n, 1)))
    img.setImage(np.kron(matrix, np.ones((f, f))).T, levels=levels, autoLevels=False)
    img.setRect(0, 0, n, n)
    plot.setRange(xRange=(0, n), yRange=(0, n), padding=0.02)
    texts = []
    if 0 < n <= MAX_CELL_TEXT:
        font = QFont()
        font.setPointSize(point_size)
        mid = (levels[0] + levels[1]) / 2
        for i in range(n):
            for j in range(n):
                v = matrix[i, j]
                t = pg.TextItem(f"{v:.2f}", color="k" if v > mid else "w", anchor=(0.5, 0.5))
                t.setFont(font)
                t.setPos(j + 0.5, i + 0.5)
                plot.addItem(t)
                texts.append(t)
    return texts


def _place_ticks(plot: pg.PlotItem, n: int, rows: List[Tuple[int, str]], width: int) -> float:
    """Row labels ``rows`` (index, text) and column numbers, thinned so that none overlap, on a
    left axis ``width`` pixels wide; returns the on-screen cell size (pixels)."""
    vb = plot.getViewBox()
    px = max(min(vb.width(), vb.height()) / max(n * 1.04, 1), 1e-3)   # the aspect is locked
    row_step = max(1, math.ceil(ROW_LABEL_PX / px))
    col_step = max(1, math.ceil(COL_LABEL_PX / px))
    left = plot.getAxis("left")
    left.setTicks([[(i + 0.5, t) for i, t in rows if i % row_step == 0], []])
    if abs(left.width() - width) > 1:
        left.setWidth(width)
    plot.getAxis("bottom").setTicks([[(j + 0.5, str(j + 1)) for j in range(0, n, col_step)], []])
    return px


def _label_width(plot: pg.PlotItem, texts: Sequence[str]) -> int:
    """Pixels a left axis needs to show every one of ``texts`` (pyqtgraph drops the others)."""
    left = plot.getAxis("left")
    metrics = QFontMetrics(left.style.get("tickFont") or QFont())
    return max([metrics.horizontalAdvance(t) for t in texts] or [0]) + 16


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
        self.plots: List[pg.PlotItem] = []
        self.images: List[pg.ImageItem] = []
        self.bar: Optional[pg.ColorBarItem] = None
        self._texts: list = []            # (plot, TextItem)
        self.names: List[str] = []
        self.matrices = np.zeros((0, 0, 0))
        self.labels: List[str] = []
        self.groups: List[str] = []
        self._lines: list = []            # (plot, InfiniteLine) between groups
        self.levels = (0.0, 1.0)
        self.snippets = False             # rows labelled with snippets (else numbers only)
        self.scene().sigMouseMoved.connect(self._on_mouse_moved)
        self.scene().sigMouseClicked.connect(self._on_mouse_clicked)

    # ---- drawing ------------------------------------------------------------------------------
    def _build(self, names: Sequence[str]) -> None:
        self.clear()
        self.plots, self.images, self._texts, self._lines = [], [], [], []
        for k, name in enumerate(names):
            plot = self.addPlot(row=0, col=k)
            plot.setTitle(name, color="k", size="10pt")
            self.images.append(_heatmap_plot(plot))
            plot.setLabel("bottom", "occurrence (column)", color="k")
            if k == 0:
                plot.setLabel("left", "occurrence (row)", color="k")
            plot.getViewBox().sigResized.connect(self._on_resized)
            self.plots.append(plot)
        self.bar = _colour_bar(self.levels, "cosine", self.images)
        self.addItem(self.bar, row=0, col=len(names))
        self.names = list(names)

    def set_data(self, names: Sequence[str], matrices: np.ndarray, labels: Sequence[str],
                 groups: Sequence[str] = ()) -> None:
        """Show ``matrices`` ``(K, n, n)`` titled ``names``; ``labels`` name the n occurrences;
        ``groups`` (one per occurrence, rows ordered by group) are drawn as blocks with white
        lines between them and name the rows."""
        matrices = np.asarray(matrices, dtype=np.float64)
        if list(names) != self.names or not self.plots:
            self._build(names)
        self.matrices = matrices
        self.labels = list(labels)
        self.levels = shared_levels(matrices)
        for plot, item in self._texts + self._lines:
            plot.removeItem(item)
        self._texts, self._lines = [], []
        self.groups = list(groups) if len(groups) == matrices.shape[1] else []
        cuts = [i for i in range(1, len(self.groups)) if self.groups[i] != self.groups[i - 1]]
        for plot in self.plots:
            for i in cuts:
                for angle in (0, 90):
                    line = pg.InfiniteLine(pos=i, angle=angle, pen=pg.mkPen("w", width=2))
                    plot.addItem(line)
                    self._lines.append((plot, line))
        for k, (plot, img) in enumerate(zip(self.plots, self.images)):
            self._texts += [(plot, t) for t in _show_matrix(plot, img, matrices[k], self.levels, 7)]
        if self.bar is not None:
            _bar_ticks(self.bar, self.levels)
        self._on_resized()

    def row_labels(self, snippets: bool) -> List[str]:
        """The row label of every occurrence: ``"the [bank] of 3"`` or ``"3"``, after its group
        (``"river · 3"``) when the occurrences are grouped."""
        grp = [f"{g} · " if g else "" for g in self.groups] or [""] * len(self.labels)
        return [f"{grp[i]}{short_label(lab)} {i + 1}" if snippets else f"{grp[i]}{i + 1}"
                for i, lab in enumerate(self.labels)]

    def _on_resized(self, *_args) -> None:
        """Label every heatmap the same way, give every left axis the same width (so that the
        heatmaps have the same size), thin out tick labels and hide cell values that would not
        fit. Snippets are used when they take at most 40 % of a heatmap's share of the width."""
        n = self.matrices.shape[1] if self.matrices.ndim == 3 else 0
        if not self.plots:
            return
        per_plot = max(self.width() - 90, 1) / len(self.plots)
        texts = self.row_labels(True)
        self.snippets = bool(texts) and _label_width(self.plots[0], texts) <= 0.4 * per_plot
        texts = texts if self.snippets else self.row_labels(False)
        width = _label_width(self.plots[0], texts)
        cells = {}
        for plot in self.plots:
            cells[id(plot)] = _place_ticks(plot, n, list(enumerate(texts)), width)
        for plot, text in self._texts:
            text.setVisible(cells[id(plot)] >= MIN_CELL_PX)

    def clear_data(self, message: str = "") -> None:
        """Remove every heatmap; show ``message`` in their place."""
        self.clear()
        self.plots, self.images, self._texts, self.names = [], [], [], []
        self._lines, self.groups = [], []
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
        if self.groups:
            a, b = f"({self.groups[i] or '—'}) {a}", f"({self.groups[j] or '—'}) {b}"
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
