"""The "Language model" view's widgets: they draw what they are given and emit signals.

* :class:`TokenRows`: the sentence's tokens in two rows (forward LM above, backward LM below),
  each token a box coloured by the rank of the actual word (GLTR's bins), wrapped over as many
  lines as the width needs; hover shows a one-line summary, a click selects the token;
* :class:`ReachPlot`: the selected token's reach as a heatmap (pyqtgraph), one row per layer and
  direction, one column per replaced token, with a colour bar;
* :class:`~.pairs_view.PairsPanel` (its own module): the minimal pairs;
* :class:`LanguageModelView`: all of them with the legend, the perplexity line and the detail.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPoint, QRect, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import (QHBoxLayout, QLabel, QPushButton, QSizePolicy, QSpinBox,
                               QSplitter, QTextBrowser, QToolTip, QVBoxLayout, QWidget)

from elmo_explorer.views.heatmap import _heatmap_plot
from elmo_explorer.views.language_model.model import RANK_COLORS, RANK_LABELS, RANK_TEXT_COLORS
from elmo_explorer.views.language_model.pairs_view import PairsPanel, set_fitted_ticks

ROW_NAMES = ("forward →", "← backward")
PAD = 4
BOX_H = 22
NO_PREDICTION = "#e4e4e4"
SELECTED = QColor("#d95f02")


class TokenRows(QWidget):
    """Tokens in two rows; ``bins``: per token (forward bin, backward bin) or None.

    Signals: ``clicked(int)`` a token, ``hovered(int)`` (−1: none)."""

    clicked = Signal(int)
    hovered = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setMouseTracking(True)
        self.tokens: Tuple[str, ...] = ()
        self.bins: Optional[List[Tuple[int, int]]] = None
        self.selected: Optional[int] = None
        self.tips: List[str] = []
        self._rects: List[QRect] = []           # per token: its column (both boxes)
        self._label_w = 0
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)

    def set_tokens(self, tokens: Sequence[str], bins, selected: Optional[int],
                   tips: Sequence[str]) -> None:
        self.tokens, self.bins, self.selected, self.tips = tuple(tokens), bins, selected, list(tips)
        self._layout(self.width())
        self.updateGeometry()
        self.update()

    def _layout(self, width: int) -> int:
        """Place the token columns; returns the height needed."""
        fm = QFontMetrics(self.font())
        self._label_w = max(fm.horizontalAdvance(n) for n in ROW_NAMES) + 2 * PAD
        x, y = self._label_w, PAD
        line_h = 2 * BOX_H + 3 * PAD
        self._rects = []
        for t in self.tokens:
            w = max(fm.horizontalAdvance(t) + 2 * PAD, 18)
            if x + w > max(width, self._label_w + 60) - PAD and x > self._label_w:
                x, y = self._label_w, y + line_h
            self._rects.append(QRect(x, y, w, 2 * BOX_H + PAD))
            x += w + PAD
        return y + line_h if self.tokens else BOX_H

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._layout(width)

    def sizeHint(self) -> QSize:
        return QSize(400, self._layout(max(self.width(), 400)))

    def minimumSizeHint(self) -> QSize:
        return QSize(200, 2 * BOX_H + 3 * PAD)

    def resizeEvent(self, event) -> None:
        self._layout(event.size().width())
        super().resizeEvent(event)
        self.updateGeometry()

    def token_rect(self, i: int) -> QRect:
        """The column of token ``i`` (both boxes), in widget coordinates."""
        return self._rects[i]

    def token_at(self, pos: QPoint) -> int:
        for i, r in enumerate(self._rects):
            if r.contains(pos):
                return i
        return -1

    def paintEvent(self, _event) -> None:
        p = QPainter(self)
        p.fillRect(self.rect(), QColor("white"))
        p.setPen(QColor("#333333"))
        lines = sorted({r.y() for r in self._rects})
        for y in lines:
            for d, name in enumerate(ROW_NAMES):
                p.drawText(QRect(0, y + d * (BOX_H + PAD), self._label_w - PAD, BOX_H),
                           Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, name)
        for i, (t, r) in enumerate(zip(self.tokens, self._rects)):
            for d in range(2):
                box = QRect(r.x(), r.y() + d * (BOX_H + PAD), r.width(), BOX_H)
                if self.bins is None:
                    face, text = QColor(NO_PREDICTION), QColor("black")
                else:
                    k = self.bins[i][d]
                    face, text = QColor(RANK_COLORS[k]), QColor(RANK_TEXT_COLORS[k])
                p.fillRect(box, face)
                if i == self.selected:
                    p.setPen(QPen(SELECTED, 2.5))
                    p.drawRect(box.adjusted(1, 1, -1, -1))
                p.setPen(text)
                p.drawText(box, Qt.AlignmentFlag.AlignCenter, t)
        p.end()

    def mouseMoveEvent(self, event) -> None:
        i = self.token_at(event.position().toPoint())
        self.hovered.emit(i)
        if 0 <= i < len(self.tips):
            QToolTip.showText(event.globalPosition().toPoint(), self.tips[i], self)
        super().mouseMoveEvent(event)

    def leaveEvent(self, event) -> None:
        self.hovered.emit(-1)
        super().leaveEvent(event)

    def mousePressEvent(self, event) -> None:
        i = self.token_at(event.position().toPoint())
        if i >= 0:
            self.clicked.emit(i)
        super().mousePressEvent(event)


def legend() -> QWidget:
    """The four rank colours with their labels."""
    w = QWidget()
    lay = QHBoxLayout(w)
    lay.setContentsMargins(0, 0, 0, 0)
    lay.addWidget(QLabel("Rank of the actual word:"))
    for c, t, label in zip(RANK_COLORS, RANK_TEXT_COLORS, RANK_LABELS):
        sw = QLabel(f" {label} ")
        sw.setStyleSheet(f"background:{c};color:{t};padding:1px 4px;")
        lay.addWidget(sw)
    return w


class ReachPlot(pg.GraphicsLayoutWidget):
    """The reach rows of one token as a heatmap (row 0 at the top) with a colour bar.

    Signals: ``hovered(int, int)`` row, column (−1, −1: outside)."""

    hovered = Signal(int, int)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setBackground("w")
        self.plot = self.addPlot(row=0, col=0)
        p = self.plot
        self.image = _heatmap_plot(p, square_cells=False)
        self.bar = pg.ColorBarItem(values=(0.0, 1.0), colorMap=pg.colormap.get("viridis"),
                                   interactive=False, colorMapMenu=False, pen="k")
        self.bar.setImageItem(self.image)
        self.addItem(self.bar, row=0, col=1)
        bar_axis = self.bar.getAxis("right")
        bar_axis.enableAutoSIPrefix(False)
        bar_axis.setLabel("cosine distance", color="k")
        bar_axis.setTextPen("k")
        bar_axis.setWidth(64)                   # the tick values and the label side by side
        self.message = pg.TextItem("", color="#555555", anchor=(0.5, 0.5))
        p.addItem(self.message)
        self.matrix: Optional[np.ndarray] = None
        #: the title, above the plot (a QLabel wraps; a plot title would widen the plot)
        self.title_label = QLabel("")
        self.title_label.setWordWrap(True)
        self.title_label.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.title_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.col_labels: List[str] = []
        self.ci.layout.setContentsMargins(2, 2, 12, 2)     # room for the colour bar's labels
        self.tick_font = QFont(self.font())
        self.tick_font.setPointSizeF(max(self.font().pointSizeF() - 1.5, 6.5))
        p.getAxis("bottom").setStyle(tickFont=self.tick_font)
        p.getViewBox().sigResized.connect(lambda *_: self._bottom_ticks())
        self.scene().sigMouseMoved.connect(self._on_moved)

    def _bottom_ticks(self) -> None:
        """One label per column, cut to the column's width."""
        width = self.plot.getViewBox().width()
        set_fitted_ticks(self.plot.getAxis("bottom"), self.col_labels, width,
                         QFontMetrics(self.tick_font), offset=0.5)

    def set_matrix(self, matrix: Optional[np.ndarray], row_labels: Sequence[str],
                   col_labels: Sequence[str], title: str = "", message: str = "",
                   top: Optional[float] = None) -> None:
        """Draw ``matrix`` (rows, cols); ``top``: the colour scale's upper end (default: the
        largest value; larger values show in the top colour)."""
        p = self.plot
        self.matrix = None if matrix is None else np.asarray(matrix, float)
        self.title_label.setText(title)
        if self.matrix is None or self.matrix.size == 0:
            self.image.clear()
            p.getAxis("left").setTicks([[]])
            p.getAxis("bottom").setTicks([[]])
            self.message.setText(message)
            self.message.setPos(0.5, 0.5)
            p.setRange(xRange=(0, 1), yRange=(0, 1))
            return
        self.message.setText("")
        rows, cols = self.matrix.shape
        hi = max(float(self.matrix.max()) if top is None else top, 1e-6)
        self.image.setImage(self.matrix.T, levels=(0.0, hi), autoLevels=False)
        self.image.setRect(0, 0, cols, rows)
        self.bar.setLevels((0.0, hi))
        left = p.getAxis("left")
        left.setTicks([[(r + 0.5, lab) for r, lab in enumerate(row_labels)]])
        fm = QFontMetrics(self.font())
        left.setWidth(max((fm.horizontalAdvance(t) for t in row_labels), default=20) + 16)
        self.col_labels = list(col_labels)
        p.setRange(xRange=(0, cols), yRange=(0, rows), padding=0.0)
        self._bottom_ticks()

    def cell_at(self, scene_pos) -> Tuple[int, int]:
        if self.matrix is None:
            return -1, -1
        pt = self.plot.vb.mapSceneToView(scene_pos)
        r, c = int(np.floor(pt.y())), int(np.floor(pt.x()))
        rows, cols = self.matrix.shape
        return (r, c) if 0 <= r < rows and 0 <= c < cols else (-1, -1)

    def _on_moved(self, scene_pos) -> None:
        self.hovered.emit(*self.cell_at(scene_pos))


class LanguageModelView(QWidget):
    """Everything the view shows (see the module docstring).

    Signals: ``top_k_changed(int)``; the parts' own signals are reached through them."""

    top_k_changed = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        head = QHBoxLayout()
        head.addWidget(legend())
        head.addStretch(1)
        head.addWidget(QLabel("top-k:"))
        self.k_box = QSpinBox()
        self.k_box.setRange(1, 100)
        self.k_box.setValue(10)
        self.k_box.setToolTip("Predictions listed per token and direction")
        self.k_box.valueChanged.connect(self.top_k_changed)
        head.addWidget(self.k_box)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        head.addWidget(self.cancel_button)
        lay.addLayout(head)
        line = QHBoxLayout()
        self.perplexity = QLabel("")
        line.addWidget(self.perplexity)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        line.addWidget(self.status, 1)
        lay.addLayout(line)
        self.rows = TokenRows()
        lay.addWidget(self.rows)
        split = QSplitter(Qt.Orientation.Vertical)
        middle = QSplitter(Qt.Orientation.Horizontal)
        self.detail = QTextBrowser()
        self.detail.setOpenLinks(False)
        self.reach = ReachPlot()
        reach_box = QWidget()
        reach_lay = QVBoxLayout(reach_box)
        reach_lay.setContentsMargins(0, 0, 0, 0)
        reach_lay.setSpacing(0)
        reach_lay.addWidget(self.reach.title_label)
        reach_lay.addWidget(self.reach, 1)
        middle.addWidget(self.detail)
        middle.addWidget(reach_box)
        middle.setSizes([380, 620])
        middle.setStretchFactor(1, 1)
        self.pairs = PairsPanel()
        split.addWidget(middle)
        split.addWidget(self.pairs)
        split.setSizes([330, 220])
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 2)
        lay.addWidget(split, 1)

    def main_button(self):
        """Score the minimal pairs (View ▸ Run, Ctrl+R); the sentence is computed as it is
        selected."""
        return self.pairs.run_button

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setToolTip(text)
        self.status.setStyleSheet("color:#b00020;" if error else "")

    def set_busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)
