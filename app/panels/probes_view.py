"""The probes view's widgets: the task bar, the live curves, the result plots and the table.

:class:`ProbesView` only draws what it is given (a :class:`~.probes_model.ProbesModel`'s runs,
curves and rows) and says what the user asked for (signals); the training itself is run by the
controller, :class:`~elmo_explorer.panels.probes.ProbesPanel`.
"""
from __future__ import annotations

from typing import Dict, List, Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QHBoxLayout, QLabel, QMenu, QPushButton,
                               QSplitter, QTableWidget, QTableWidgetItem, QToolButton,
                               QVBoxLayout, QWidget)

from elmo_engine.analysis.probes.experiment import ProbeResult
from elmo_engine.analysis.probes.tables import RESULT_COLUMNS

EXPLANATION = (
    "<b>What the weights mean.</b> The scalar-mix probe learns one weight per layer (softmax, "
    "summing to 1) together with a linear classifier. A large weight means this probe found "
    "that layer <i>useful for this task with this classifier</i>. It does not say what a layer "
    "\"is\" or \"knows\": a low weight can mean the information is there but redundant with "
    "another layer, and a linear probe cannot see what it cannot separate linearly. Compare tasks "
    "side by side (syntax vs word sense) and look at selectivity: accuracy on the task minus "
    "accuracy on a control task that maps each word type to a random label (Hewitt &amp; Liang "
    "2019); a probe that merely memorises words has low selectivity.")
EMPTY_TEXT = ("No probe has run yet. Pick a task and press <b>Train</b> — the demo tasks "
              "(WordNet example sentences) need no data of your own.")
LAYER_COLOURS = ["#7f8c8d", "#2471a3", "#c0392b", "#27ae60", "#8e44ad", "#f39c12"]


def _print_style(widget) -> None:
    """Black title, axes and tick labels, no automatic SI prefixes (exports are for print)."""
    item = widget.getPlotItem()
    item.setTitle(item.titleLabel.text, color="k")
    for name in ("left", "bottom"):
        axis = item.getAxis(name)
        axis.setPen("k")
        axis.setTextPen("k")
        axis.enableAutoSIPrefix(False)
    if item.legend is not None:
        item.legend.setLabelTextColor("k")


class ProbesView(QWidget):
    """The widgets of the probes view.

    Signals
    -------
    open_task_requested(str) : the user wants to open a task of this kind ("pos", "tsv", "wsd")
    """

    open_task_requested = Signal(str)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.bars: List[pg.BarGraphItem] = []
        self.task_box = QComboBox()
        self.open_button = QToolButton(text="Open task…")
        self.open_button.setPopupMode(QToolButton.InstantPopup)
        menu = QMenu(self.open_button)
        menu.addAction("CoNLL-U (part of speech)…", lambda: self.open_task_requested.emit("pos"))
        menu.addAction("TSV (token, label)…", lambda: self.open_task_requested.emit("tsv"))
        menu.addAction("WSD XML + keys…", lambda: self.open_task_requested.emit("wsd"))
        self.open_button.setMenu(menu)
        self.control_box = QCheckBox("Control task")
        self.control_box.setChecked(True)
        self.control_box.setToolTip("Also train on word types mapped to random labels and report "
                                    "selectivity (task accuracy − control accuracy)")
        self.train_button = QPushButton("Train")
        self.demo_button = QPushButton("Run demo (POS + word sense)")
        self.cancel_button = QPushButton("Cancel", enabled=False)
        self.clear_button = QPushButton("Clear runs")
        self.status = QLabel("")
        top = QHBoxLayout()
        for w in (QLabel("Task:"), self.task_box, self.open_button, self.control_box,
                  self.train_button, self.demo_button, self.cancel_button, self.clear_button):
            top.addWidget(w)
        top.addStretch(1)

        self.loss_plot = pg.PlotWidget(title="Training loss per epoch")
        self.dev_plot = pg.PlotWidget(title="Dev accuracy per epoch")
        self.dev_plot.setYRange(0, 1)
        for p in (self.loss_plot, self.dev_plot):
            p.setBackground("w")
            p.setLabel("bottom", "epoch")
            p.setMinimumHeight(120)
        live = QHBoxLayout()
        live.addWidget(self.loss_plot)
        live.addWidget(self.dev_plot)

        self.results = QWidget()                  # the exported picture: both plots
        self.weight_plot = pg.PlotWidget(title="Scalar-mix layer weights (softmax-normalised)")
        self.acc_plot = pg.PlotWidget(title="Test score per layer (band: up to the control task)")
        for p in (self.weight_plot, self.acc_plot):
            p.setBackground("w")
            p.showGrid(y=True, alpha=0.3)
            p.setYRange(0, 1)
            p.addLegend(offset=(5, 5))
        self.weight_plot.setLabel("left", "weight")
        self.acc_plot.setLabel("left", "accuracy / F1")
        self.loss_plot.setLabel("left", "loss")
        self.dev_plot.setLabel("left", "dev accuracy")
        for p in (self.loss_plot, self.dev_plot, self.weight_plot, self.acc_plot):
            _print_style(p)                       # black text and axes: readable in exports
        res = QHBoxLayout(self.results)
        res.setContentsMargins(0, 0, 0, 0)
        res.addWidget(self.weight_plot)
        res.addWidget(self.acc_plot)

        self.empty_label = QLabel(EMPTY_TEXT, wordWrap=True, alignment=Qt.AlignCenter)
        self.explain = QLabel(EXPLANATION, wordWrap=True)
        self.explain.setTextFormat(Qt.RichText)
        self.table = QTableWidget(0, len(RESULT_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(RESULT_COLUMNS))
        self.table.setEditTriggers(QTableWidget.NoEditTriggers)

        upper = QWidget()
        ul = QVBoxLayout(upper)
        ul.setContentsMargins(0, 0, 0, 0)
        ul.addLayout(live, 1)
        ul.addWidget(self.empty_label)
        ul.addWidget(self.results, 3)
        ul.addWidget(self.explain)
        split = QSplitter(Qt.Vertical)
        split.addWidget(upper)
        split.addWidget(self.table)
        split.setStretchFactor(0, 3)
        split.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.status)
        layout.addWidget(split, 1)

    # ---- state --------------------------------------------------------------------------------
    def set_tasks(self, names: Sequence[str], current: int = 0) -> None:
        self.task_box.clear()
        self.task_box.addItems(list(names))
        self.task_box.setCurrentIndex(current)

    def set_busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)
        self.train_button.setEnabled(not busy)
        self.demo_button.setEnabled(not busy)

    # ---- drawing ------------------------------------------------------------------------------
    def draw_curves(self, curves: Dict[str, List[List[float]]]) -> None:
        """Loss and dev accuracy per epoch of every phase of the run in progress."""
        self.loss_plot.clear()
        self.dev_plot.clear()
        for phase, rows in curves.items():
            n = len(rows[0]) // 2
            style = Qt.DashLine if phase.startswith("control") else Qt.SolidLine
            epochs = list(range(1, len(rows) + 1))
            for h in range(n):
                colour = "#000000" if phase.endswith("mix") else LAYER_COLOURS[h % len(LAYER_COLOURS)]
                pen = pg.mkPen(colour, width=2, style=style)
                self.loss_plot.plot(epochs, [r[h] for r in rows], pen=pen)
                self.dev_plot.plot(epochs, [r[n + h] for r in rows], pen=pen)

    def draw_runs(self, runs: Sequence[ProbeResult], colours: Sequence[str],
                  rows: List[List[str]]) -> None:
        """The runs side by side: mix weights as grouped bars, scores per layer, the table."""
        self.empty_label.setVisible(not runs)
        self.weight_plot.clear()
        self.acc_plot.clear()
        self.bars = []
        n = len(runs)
        k_max = max((len(r.layers) for r in runs), default=3)
        ticks = [(k, f"layer {k}") for k in range(k_max)]
        self.weight_plot.getAxis("bottom").setTicks([ticks])
        self.acc_plot.getAxis("bottom").setTicks([ticks + [(k_max, "mix")]])
        width = 0.8 / max(n, 1)
        for i, (run, colour) in enumerate(zip(runs, colours)):
            xs = [k - 0.4 + width * (i + 0.5) for k in range(len(run.mix.weights))]
            bar = pg.BarGraphItem(x=xs, height=list(run.mix.weights), width=width * 0.9,
                                  brush=colour, pen=pg.mkPen("w"), name=run.name)
            self.weight_plot.addItem(bar)
            self.bars.append(bar)
            ks = [lay.layer for lay in run.layers]
            test = [lay.test for lay in run.layers]
            line = self.acc_plot.plot(ks, test, pen=pg.mkPen(colour, width=2), symbol="o",
                                      symbolBrush=colour, name=run.name)
            self.acc_plot.plot([k_max], [run.mix.test], pen=None, symbol="s", symbolBrush=colour)
            if run.layers[0].control_test is not None:
                ctl = self.acc_plot.plot(ks, [lay.control_test for lay in run.layers],
                                         pen=pg.mkPen(colour, width=1, style=Qt.DashLine))
                band = pg.FillBetweenItem(line, ctl, brush=pg.mkBrush(colour + "30"))
                self.acc_plot.addItem(band)
            if run.layers[0].centroid_test is not None:        # WSD: the paper's measure
                self.acc_plot.plot(ks + [k_max], [lay.centroid_test for lay in run.layers]
                                   + [run.mix.centroid_test], symbol="t", symbolBrush=colour,
                                   pen=pg.mkPen(colour, width=1, style=Qt.DotLine),
                                   name=f"{run.name} (sense centroids)")
        self.weight_plot.setXRange(-0.6, k_max - 0.4, padding=0)
        self.acc_plot.setXRange(-0.3, k_max + 0.3, padding=0)
        self._fill_table(rows)

    def _fill_table(self, rows: List[List[str]]) -> None:
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()
