"""The probes view's "Usefulness beside identity" page: every per-layer reading of a task in one
table and one plot (Tenney et al. 2019, "BERT Rediscovers the Classical NLP Pipeline").

Per layer: the per-layer score, selectivity, MDL codelength, the scalar-mix weight (± sd), the
cumulative score of a mix probe on layers 0..ℓ and the gain Δℓ of adding layer ℓ; the two
expected layers (from the weights and from the Δs) as vertical lines; one sentence when they
point at different layers. Widgets only: the controller computes the tables on the worker.
"""
from __future__ import annotations

import html
from typing import List, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from elmo_engine.analysis.probes.usefulness import COLUMNS, Usefulness
from elmo_engine.io.figures.usefulness import WEIGHT_COLOR

INTRO = ("A mix weight says how much <i>this probe</i> leaned on a layer; Δℓ how much layer ℓ "
         "<i>adds</i> to a mix probe on the layers below it (cumulative scoring). Tenney et al. "
         "(2019) read the two side by side: their centres of gravity E<sub>s</sub> (weights) and "
         "E<sub>Δ</sub> (gains) can point at different layers. ⚠ marks a difference of 0.5 "
         "layer or more.")
EMPTY = ("No usefulness table yet: choose a task above and press <b>Compute usefulness</b> "
         "(it trains the probes, the control task, a mix probe on layers 0..ℓ for every ℓ and "
         "the MDL probes; about three times a plain <b>Train</b>).")


class UsefulnessView(QWidget):
    """The page's widgets; :meth:`draw` shows a list of tables and their colours."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.compute_button = QPushButton("Compute usefulness (selected task)")
        self.compute_button.setToolTip("Train the selected task with the control task, the "
                                       "cumulative probes and the MDL probes (Cancel stops it)")
        self.task_box = QComboBox()
        self.task_box.setToolTip("Which task the plot shows (the table lists all)")
        self.task_box.currentIndexChanged.connect(self._draw_plot)
        intro = QLabel(INTRO, wordWrap=True)
        intro.setTextFormat(Qt.TextFormat.RichText)
        self.empty_label = QLabel(EMPTY, wordWrap=True)
        self.empty_label.setTextFormat(Qt.TextFormat.RichText)
        self.flag_label = QLabel("", wordWrap=True)
        self.flag_label.setStyleSheet("color: #9a3d00; font-weight: bold")
        self.flag_label.setVisible(False)
        self.expected_label = QLabel("")
        self.plot = pg.PlotWidget(title="Weights, gains and scores per layer")
        self.plot.setBackground("w")
        self.plot.showGrid(y=True, alpha=0.3)
        self.plot.setLabel("left", "score / weight / gain")
        item = self.plot.getPlotItem()
        item.setTitle(item.titleLabel.text, color="k")
        for name in ("left", "bottom"):
            axis = item.getAxis(name)
            axis.setPen("k")
            axis.setTextPen("k")
        self.plot.setMinimumHeight(160)
        self.legend = QLabel("", wordWrap=True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.legend.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.legend.setFixedWidth(200)
        self.legend.setStyleSheet("background: white; color: black; padding: 4px; "
                                  "font-size: 11px")
        self.table = QTableWidget(0, len(COLUMNS))
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setMinimumHeight(110)
        self.bars: List[pg.BarGraphItem] = []
        self.lines: List[pg.InfiniteLine] = []

        bar = QHBoxLayout()
        bar.addWidget(self.compute_button)
        bar.addWidget(QLabel("Plot:"))
        bar.addWidget(self.task_box, 1)
        bar.addWidget(self.expected_label, 2)
        upper = QWidget()
        ul = QVBoxLayout(upper)
        ul.setContentsMargins(0, 0, 0, 0)
        ul.addLayout(bar)
        ul.addWidget(intro)
        ul.addWidget(self.flag_label)
        ul.addWidget(self.empty_label)
        row = QHBoxLayout()
        row.addWidget(self.plot, 1)
        row.addWidget(self.legend)
        ul.addLayout(row, 1)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(upper)
        self.splitter.addWidget(self.table)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.splitter)
        self._tables: List[Usefulness] = []
        self._colours: List[str] = []

    def draw(self, tables: Sequence[Usefulness], colours: Sequence[str],
             rows: List[List[str]], flags: str) -> None:
        """Show ``tables`` (one per task, in ``colours``), their table ``rows`` and the
        disagreement sentences ``flags`` (``""``: none)."""
        self._tables, self._colours = list(tables), list(colours)
        self.empty_label.setVisible(not tables)
        self.flag_label.setText(flags)
        self.flag_label.setVisible(bool(flags))
        self.task_box.blockSignals(True)
        self.task_box.clear()
        self.task_box.addItems([t.name for t in tables])
        self.task_box.setCurrentIndex(len(tables) - 1)
        self.task_box.blockSignals(False)
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
        self._draw_plot()

    def _draw_plot(self) -> None:
        self.plot.clear()
        self.bars, self.lines = [], []
        i = self.task_box.currentIndex()
        if not 0 <= i < len(self._tables):
            self.legend.setText("")
            self.expected_label.setText("")
            return
        t, colour = self._tables[i], self._colours[i]
        k = len(t.rows)
        x = np.arange(k, dtype=float)
        w = np.array([r.weight for r in t.rows])
        d = np.array([0.0 if r.delta is None else r.delta for r in t.rows])
        for xs, h, sd, brush in ((x - 0.18, w, [r.weight_sd for r in t.rows], WEIGHT_COLOR),
                                 (x[1:] + 0.18, d[1:],
                                  [r.delta_sd or 0.0 for r in t.rows][1:], colour)):
            b = pg.BarGraphItem(x=xs, height=h, width=0.33, brush=brush, pen=pg.mkPen("w"))
            self.plot.addItem(b)
            self.bars.append(b)
            self.plot.addItem(pg.ErrorBarItem(x=xs, y=h, height=2 * np.asarray(sd), beam=0.08,
                                              pen=pg.mkPen("k")))
        self.plot.plot(x, [r.score for r in t.rows], pen=pg.mkPen(colour, width=2), symbol="o",
                       symbolBrush=colour, symbolPen=colour)
        self.plot.plot(x, [r.cumulative for r in t.rows],
                       pen=pg.mkPen(colour, width=1.5, style=Qt.PenStyle.DashLine), symbol="s",
                       symbolSize=7, symbolBrush=colour, symbolPen=colour)
        marks = [(t.expected_from_weights, WEIGHT_COLOR, Qt.PenStyle.SolidLine, "E_s")]
        if t.expected_from_deltas is not None:
            marks.append((t.expected_from_deltas, colour, Qt.PenStyle.DotLine, "E_Δ"))
        for pos, c, style, name in marks:
            line = pg.InfiniteLine(pos=pos, angle=90, pen=pg.mkPen(c, width=2, style=style),
                                   label=f"{name} {pos:.2f}",
                                   labelOpts={"position": 0.97 if name == "E_s" else 0.91,
                                              "color": c})
            self.plot.addItem(line)
            self.lines.append(line)
        self.plot.getAxis("bottom").setTicks([[(h, f"layer {h}") for h in range(k)]])
        low = min(0.0, float(np.min(d - np.array([r.delta_sd or 0.0 for r in t.rows]))))
        # room above the scores (≤ 1) for the two expected layers' labels
        self.plot.setYRange(low - (0.05 if low < 0 else 0.0), 1.2, padding=0)
        self.plot.setXRange(-0.6, k - 0.4, padding=0)
        self.legend.setText(_legend(colour))
        e_d = ("undefined (Σ Δ ≤ 0)" if t.expected_from_deltas is None
               else f"{t.expected_from_deltas:.2f}")
        self.expected_label.setText(f"expected layer: weights {t.expected_from_weights:.2f}, "
                                    f"Δs {e_d}")


def _legend(colour: str) -> str:
    items = [("███", WEIGHT_COLOR, "scalar-mix weight (± sd)"),
             ("███", colour, "Δℓ: gain of adding layer ℓ (± sd)"),
             ("━●━", colour, "per-layer score"),
             ("- ■ -", colour, "cumulative score, layers 0..ℓ"),
             ("│", WEIGHT_COLOR, "E_s: expected layer from the weights"),
             ("┆", colour, "E_Δ: expected layer from the Δs")]
    return "<br>".join(f"<span style='color:{c}'><b>{s}</b></span> {html.escape(text)}"
                       for s, c, text in items)


__all__ = ["UsefulnessView"]
