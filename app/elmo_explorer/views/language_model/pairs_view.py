"""The "Language model" view's minimal-pair panel and the table and tick helpers the view
shares: the source, Score / Cancel, the accuracy per set and direction, the pairs, and the
selected pair's per-word log-probability differences (pyqtgraph bars)."""
from __future__ import annotations

from typing import List, Optional, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QHeaderView, QLabel,
                               QProgressBar, QPushButton, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)


class PairsPanel(QWidget):
    """Minimal pairs: source, Run / Cancel, accuracy per set, the pairs, one pair's differences.

    Signals: ``run_requested()``, ``source_requested(str)`` ("bundled" or "choose"),
    ``pair_selected(int)``."""

    run_requested = Signal()
    source_requested = Signal(str)
    pair_selected = Signal(int)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        row = QHBoxLayout()
        row.addWidget(QLabel("<b>Minimal pairs</b>"))
        self.source_box = QComboBox()
        self.source_box.addItem("Bundled sets", "bundled")
        self.source_box.addItem("Choose a file…", "choose")
        self.source_box.activated.connect(
            lambda k: self.source_requested.emit(self.source_box.itemData(k)))
        row.addWidget(self.source_box)
        self.run_button = QPushButton("Score")
        self.run_button.clicked.connect(self.run_requested)
        row.addWidget(self.run_button)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        row.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(140)
        self.progress.setVisible(False)
        row.addWidget(self.progress)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        row.addWidget(self.status, 1)
        lay.addLayout(row)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.accuracy = _table(["set", "pairs", "fwd", "bwd", "both"], stretch=0)
        self.accuracy.setWordWrap(True)
        self.accuracy.setTextElideMode(Qt.TextElideMode.ElideNone)
        self.accuracy.setToolTip("Accuracy per set: the share of pairs whose grammatical "
                                 "sentence the forward (fwd), backward (bwd) and combined (both) "
                                 "LM find more probable")
        self.pairs = _table(["pair (good/bad)", "fwd", "bwd"], stretch=0)
        self.pairs.itemSelectionChanged.connect(self._on_pair)
        self.diff_plot = pg.PlotWidget(background="w")
        self.diff_plot.setMenuEnabled(False)
        self.diff_plot.hideButtons()
        self.diff_plot.setMouseEnabled(False, False)
        self.diff_plot.addLegend(offset=(5, 5), labelTextColor="k")
        for side in ("left", "bottom"):
            axis = self.diff_plot.getAxis(side)
            axis.setPen("k")
            axis.setTextPen("k")
            axis.setStyle(textFillLimits=[(0, 1.0)], hideOverlappingLabels=False)
        self.diff_plot.setLabel("left", "log p(good) − log p(bad)", color="k")
        self._words: List[str] = []
        self.diff_plot.getViewBox().sigResized.connect(lambda *_: self._diff_ticks())
        for w in (self.accuracy, self.pairs, self.diff_plot):
            split.addWidget(w)
        split.setSizes([330, 330, 380])
        lay.addWidget(split, 1)

    def set_source(self, label: str) -> None:
        self.source_box.setItemText(0 if label == "Bundled sets" else 1, label)
        self.source_box.setCurrentIndex(0 if label == "Bundled sets" else 1)

    def set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)
        self.progress.setVisible(busy)
        if not busy:
            self.progress.setRange(0, 1)
            self.progress.setValue(0)

    def show_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(done)

    def fill(self, accuracy_rows, pair_rows, selected: Optional[int]) -> None:
        _fill(self.accuracy, [(s.replace("_", " "), str(n), f"{f:.3f}", f"{b:.3f}", f"{c:.3f}")
                              for s, n, f, b, c in accuracy_rows])
        self.accuracy.resizeRowsToContents()     # a set's name on two lines, not "agreement …"
        self.pairs.blockSignals(True)
        _fill(self.pairs, [(pair_text(g, b), "✓" if f else "✗", "✓" if bw else "✗")
                           for _s, g, b, f, bw in pair_rows],
              [f"{s}: {g} / {b}" for s, g, b, _f, _b in pair_rows])
        if selected is not None and 0 <= selected < self.pairs.rowCount():
            self.pairs.selectRow(selected)
        self.pairs.blockSignals(False)

    def draw_differences(self, diffs, title: str = "") -> None:
        from elmo_engine.io.figures.language_model import DIRECTION_COLORS

        p = self.diff_plot
        p.clear()
        p.setTitle(title, color="k", size="9pt")
        if diffs is None:
            self._words = []
            p.getAxis("bottom").setTicks([[]])
            return
        words, fwd, bwd = diffs
        x = np.arange(len(words), dtype=float)
        p.addItem(pg.BarGraphItem(x=x - 0.2, height=fwd, width=0.4, brush=DIRECTION_COLORS[0],
                                  pen=None, name="forward"))
        p.addItem(pg.BarGraphItem(x=x + 0.2, height=bwd, width=0.4, brush=DIRECTION_COLORS[1],
                                  pen=None, name="backward"))
        p.addLine(y=0, pen=pg.mkPen("#444444"))
        p.setXRange(-0.6, len(words) - 0.4, padding=0)
        self._words = list(words)
        self._diff_ticks()

    def _diff_ticks(self) -> None:
        width = self.diff_plot.getViewBox().width()
        set_fitted_ticks(self.diff_plot.getAxis("bottom"), self._words, width,
                         QFontMetrics(self.font()))

    def _on_pair(self) -> None:
        rows = self.pairs.selectionModel().selectedRows()
        if rows:
            self.pair_selected.emit(rows[0].row())


def fitted_ticks(labels: Sequence[str], width: float, fm: QFontMetrics,
                 offset: float = 0.0) -> list:
    """Tick labels for ``labels`` one per unit along ``width`` pixels. When a label is wider
    than its column, the labels are staggered on two lines (every other one a line lower: each
    has two columns' width), and only then elided to that width (``"…"`` when not even a letter
    fits), so that words such as "bank" or "river" are read whole at 1280×800."""
    if not labels:
        return []
    room = max(int(width / len(labels)) - 4, 0)
    if all(fm.horizontalAdvance(lab) <= room for lab in labels):
        return [(k + offset, lab) for k, lab in enumerate(labels)]
    room = max(int(2 * width / len(labels)) - 6, 0)
    return [(k + offset, ("\n" if k % 2 else "")
             + (fm.elidedText(lab, Qt.TextElideMode.ElideRight, room) or "·"))
            for k, lab in enumerate(labels)]


def set_fitted_ticks(axis, labels: Sequence[str], width: float, fm: QFontMetrics,
                     offset: float = 0.0) -> None:
    """:func:`fitted_ticks` on a bottom axis, the axis one or two lines of text high."""
    ticks = fitted_ticks(labels, width, fm, offset)
    lines = 2 if any(t.startswith("\n") for _x, t in ticks) else 1
    axis.setHeight(lines * fm.height() + 12)
    axis.setTicks([ticks])


def pair_text(good: str, bad: str) -> str:
    """One line for a pair: the grammatical sentence with the changed word as ``good/bad``."""
    return " ".join(g if g == b else f"{g}/{b}" for g, b in zip(good.split(), bad.split()))


def _table(headers: List[str], stretch: int = -1) -> QTableWidget:
    t = QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    t.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    t.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
    head = t.horizontalHeader()
    head.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    if stretch >= 0:                    # this column takes the rest (elided when too long)
        head.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)
        t.setTextElideMode(Qt.TextElideMode.ElideRight)
    else:
        head.setStretchLastSection(True)
    t.verticalHeader().setDefaultSectionSize(20)
    return t


def _fill(table: QTableWidget, rows, tips: Sequence[str] = ()) -> None:
    table.setRowCount(len(rows))
    for r, row in enumerate(rows):
        for c, v in enumerate(row):
            item = QTableWidgetItem(v)
            item.setToolTip(tips[r] if r < len(tips) else v)
            table.setItem(r, c, item)
