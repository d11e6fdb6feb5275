"""The probes view's widgets: the task bar, the live curves, the result plots and the table.

:class:`ProbesView` only draws what it is given (a :class:`~.probes_model.ProbesModel`'s runs,
curves and rows) and says what the user asked for (signals); the training itself is run by the
controller, :class:`~elmo_explorer.views.probes.controller.ProbesPanel`.
"""
from __future__ import annotations

import html
from typing import Dict, List, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QCheckBox, QComboBox, QDialog, QHBoxLayout, QLabel, QMenu,
                               QPushButton, QSplitter, QTableWidget, QTableWidgetItem,
                               QTabWidget, QToolButton, QVBoxLayout, QWidget)

from elmo_engine.analysis.probes.settings import CONTROL_BY_DEFAULT
from elmo_engine.analysis.probes.results import ProbeResult
from elmo_engine.analysis.probes.tables import RESULT_COLUMNS
from elmo_engine.io.figures import BASELINE_COLOR, MIX_COLOR, layer_color
from elmo_explorer.views.probes.model import CONTROL_EXPLANATION, SELECTIVITY_FLAG
from elmo_explorer.views.probes.usefulness_view import UsefulnessView

TABLE_MIN_ROWS = 4           # the results table shows at least this many rows

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
              "(EWT part of speech, SemCor word senses) need no data of your own.")


def _below_flag(text: str) -> bool:
    """Whether a table's selectivity cell (``"0.2054 ± 0.0020"``) is under the flag."""
    try:
        return float(text.split()[0].replace("−", "-")) < SELECTIVITY_FLAG
    except (ValueError, IndexError):
        return False


def swatch_legend(items: Sequence[tuple]) -> str:
    """Rich text for a legend beside a plot: ``(label, colour, dashed)`` items."""
    rows = []
    for label, colour, dashed in items:
        line = "- - -" if dashed else "━━"
        rows.append(f"<span style='color:{colour}'><b>{line}</b></span> {html.escape(label)}")
    return "<br>".join(rows)


def _between_columns(i: int, k_max: int) -> float:
    """Where run ``i``'s baseline label sits along its line, as a fraction of the score plot's
    x range (−0.3 … k_max + 0.3): centred between two columns of points (layer 0|1, 1|2, …),
    the next gap for each run, so labels neither cover a marker nor each other."""
    gap = i % max(k_max, 1) + 0.5
    return (gap + 0.3) / (k_max + 0.6)


def _legend_label() -> QLabel:
    lab = QLabel("", wordWrap=True)
    lab.setTextFormat(Qt.RichText)
    lab.setAlignment(Qt.AlignTop | Qt.AlignLeft)
    lab.setFixedWidth(190)
    lab.setStyleSheet("background: white; color: black; padding: 4px; font-size: 11px")
    return lab


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
        self.control_box.setChecked(CONTROL_BY_DEFAULT)          # as `probe`
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
        self.curve_legend = _legend_label()
        # the live curves: shown while (and after) a probe trains, not as two empty plots
        # before anything has (issue 29)
        self.live = QWidget()
        self.live.setVisible(False)
        live = QHBoxLayout(self.live)
        live.setContentsMargins(0, 0, 0, 0)
        live.addWidget(self.loss_plot)
        live.addWidget(self.dev_plot)
        live.addWidget(self.curve_legend)

        self.results = QWidget()                  # on screen only; exports are drawn by figures
        # short titles, so that the plots still fit side by side on a 1280-pixel screen (the
        # bars and points are means over the seeds, the whiskers ± sd; the legend beside them
        # says which line is the control task and which the baseline)
        self.weight_plot = pg.PlotWidget(title="Scalar-mix weights (mean ± sd)")
        self.acc_plot = pg.PlotWidget(title="Test score (mean ± sd)")
        for p in (self.weight_plot, self.acc_plot):
            p.setBackground("w")
            p.showGrid(y=True, alpha=0.3)
            p.setYRange(0, 1)
        self.weight_plot.setLabel("left", "weight")
        self.acc_plot.setLabel("left", "accuracy / F1")
        self.loss_plot.setLabel("left", "loss")
        self.dev_plot.setLabel("left", "dev accuracy")
        for p in (self.loss_plot, self.dev_plot, self.weight_plot, self.acc_plot):
            _print_style(p)                       # black text and axes
        self.run_legend = _legend_label()
        res = QHBoxLayout(self.results)
        res.setContentsMargins(0, 0, 0, 0)
        res.addWidget(self.weight_plot)
        res.addWidget(self.acc_plot)
        res.addWidget(self.run_legend)

        self.empty_label = QLabel(EMPTY_TEXT, wordWrap=True, alignment=Qt.AlignCenter)
        self.recorded_label = QLabel("", wordWrap=True)
        self.recorded_label.setTextFormat(Qt.RichText)
        self.recorded_label.setTextInteractionFlags(Qt.TextSelectableByMouse)
        self.explain = QLabel(EXPLANATION, wordWrap=True)
        self.explain.setTextFormat(Qt.RichText)
        self.control_note = QLabel("", wordWrap=True)        # low selectivity, flagged
        self.control_note.setStyleSheet("color: #9a3d00; font-weight: bold")
        self.control_note.setVisible(False)
        self.table = self._new_table()
        rows = self.table.verticalHeader().defaultSectionSize()
        self.table.setMinimumHeight(self.table.horizontalHeader().sizeHint().height()
                                    + TABLE_MIN_ROWS * rows + 20)   # + the scroll bar
        self.enlarge_button = QPushButton("Enlarge table…")
        self.enlarge_button.setToolTip("Show the results table in its own resizable window")
        self.enlarge_button.clicked.connect(self.show_table_dialog)
        self.table_dialog = None
        lower = QWidget()
        ll = QVBoxLayout(lower)
        ll.setContentsMargins(0, 0, 0, 0)
        bar = QHBoxLayout()
        bar.addWidget(QLabel("<b>Results</b> (▼: under the task's baseline)"))
        bar.addStretch(1)
        bar.addWidget(self.enlarge_button)
        ll.addLayout(bar)
        ll.addWidget(self.table, 1)

        upper = QWidget()
        ul = QVBoxLayout(upper)
        ul.setContentsMargins(0, 0, 0, 0)
        ul.addWidget(self.live, 1)
        ul.addWidget(self.empty_label)
        ul.addWidget(self.recorded_label)
        ul.addWidget(self.results, 3)
        ul.addWidget(self.control_note)
        ul.addWidget(self.explain)
        self.splitter = QSplitter(Qt.Vertical)
        self.splitter.addWidget(upper)
        self.splitter.addWidget(lower)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        # the runs, and usefulness beside identity (issue 42: Tenney et al. 2019) on its own page
        self.usefulness = UsefulnessView()
        self.pages = QTabWidget()
        self.pages.setDocumentMode(True)
        self.pages.addTab(self.splitter, "Runs")
        self.pages.addTab(self.usefulness, "Usefulness beside identity")
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.status)
        layout.addWidget(self.pages, 1)
        self._rows: List[List[str]] = []

    @staticmethod
    def _new_table() -> QTableWidget:
        table = QTableWidget(0, len(RESULT_COLUMNS))
        table.setHorizontalHeaderLabels(list(RESULT_COLUMNS))
        table.setEditTriggers(QTableWidget.NoEditTriggers)
        return table

    def show_table_dialog(self) -> QDialog:
        """The results table in its own resizable window (kept up to date while open)."""
        if self.table_dialog is None:
            dlg = QDialog(self)
            dlg.setWindowTitle("Probe results")
            dlg.resize(1400, 700)
            dlg.table = self._new_table()
            QVBoxLayout(dlg).addWidget(dlg.table)
            self.table_dialog = dlg
        self._fill(self.table_dialog.table, self._rows)
        self.table_dialog.show()
        self.table_dialog.raise_()
        return self.table_dialog

    # ---- state --------------------------------------------------------------------------------
    def main_button(self):
        """Train the chosen task, or on the Usefulness tab compute it (View ▸ Run, Ctrl+R)."""
        if self.pages.currentWidget() is self.usefulness:
            return self.usefulness.compute_button
        return self.train_button

    def set_tasks(self, names: Sequence[str], current: int = 0) -> None:
        self.task_box.clear()
        self.task_box.addItems(list(names))
        self.task_box.setCurrentIndex(current)

    def set_busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)
        self.train_button.setEnabled(not busy)
        self.demo_button.setEnabled(not busy)
        self.usefulness.compute_button.setEnabled(not busy)

    # ---- drawing ------------------------------------------------------------------------------
    def draw_curves(self, curves: Dict[str, List[List[float]]]) -> None:
        """Loss and dev accuracy per epoch of every phase of the run in progress (the current
        seed), one labelled line per layer and for the mix; the control task dashed. Hidden
        while there are none."""
        self.live.setVisible(bool(curves))
        self.loss_plot.clear()
        self.dev_plot.clear()
        items, n_layers, control = [], 0, False
        for phase, rows in curves.items():
            n = len(rows[0]) // 2
            dashed = phase.startswith("control")
            control = control or dashed
            style = Qt.DashLine if dashed else Qt.SolidLine
            epochs = list(range(1, len(rows) + 1))
            for h in range(n):
                colour = MIX_COLOR if phase.endswith("mix") else layer_color(h)
                pen = pg.mkPen(colour, width=2, style=style)
                self.loss_plot.plot(epochs, [r[h] for r in rows], pen=pen)
                self.dev_plot.plot(epochs, [r[n + h] for r in rows], pen=pen)
            if not phase.endswith("mix"):
                n_layers = max(n_layers, n)
        if curves:
            items = [(f"layer {h}", layer_color(h), False) for h in range(n_layers)]
            items.append(("scalar mix", MIX_COLOR, False))
            if control:
                items.append(("control task (dashed)", "#000000", True))
        self.curve_legend.setText(swatch_legend(items))

    def draw_runs(self, runs: Sequence[ProbeResult], colours: Sequence[str],
                  rows: List[List[str]], recorded: str = "", warning: str = "") -> None:
        """The runs side by side: mix weights as grouped bars (± sd), scores per layer (± sd)
        with each run's control task dashed and its baseline dotted, the table; ``warning``:
        the runs whose control task scores near the task (one line each), or ``""``."""
        self.empty_label.setVisible(not runs)
        self.control_note.setText(warning)
        self.control_note.setVisible(bool(warning))
        self.recorded_label.setVisible(bool(recorded))
        self.recorded_label.setText(recorded)
        self.weight_plot.clear()
        self.acc_plot.clear()
        self.bars = []
        n = len(runs)
        k_max = max((len(r.layers) for r in runs), default=3)
        ticks = [(k, f"layer {k}") for k in range(k_max)]
        self.weight_plot.getAxis("bottom").setTicks([ticks])
        self.acc_plot.getAxis("bottom").setTicks([ticks + [(k_max, "mix")]])
        width = 0.8 / max(n, 1)
        legend = []
        for i, (run, colour) in enumerate(zip(runs, colours)):
            w = list(run.mix.weights)
            xs = [k - 0.4 + width * (i + 0.5) for k in range(len(w))]
            bar = pg.BarGraphItem(x=xs, height=w, width=width * 0.9, brush=colour,
                                  pen=pg.mkPen("w"), name=run.name)
            self.weight_plot.addItem(bar)
            self.bars.append(bar)
            if run.mix.weights_sd:
                self.weight_plot.addItem(pg.ErrorBarItem(
                    x=np.asarray(xs), y=np.asarray(w),
                    height=2 * np.asarray(run.mix.weights_sd), beam=width * 0.3,
                    pen=pg.mkPen("k")))
            entries = list(run.layers) + [run.mix]
            ks = [float(e) for e in range(len(run.layers))] + [float(k_max)]
            dx = (i - (n - 1) / 2) * 0.04                  # side by side, not on top
            xk = [k + dx for k in ks]
            score = [e.test for e in entries]
            self.acc_plot.plot(xk[:-1], score[:-1], pen=pg.mkPen(colour, width=2), symbol="o",
                               symbolBrush=colour, symbolPen=colour)
            self.acc_plot.plot(xk[-1:], score[-1:], pen=None, symbol="s", symbolBrush=colour)
            self.acc_plot.addItem(pg.ErrorBarItem(
                x=np.asarray(xk), y=np.asarray(score),
                height=2 * np.asarray([e.test_sd for e in entries]), beam=0.06,
                pen=pg.mkPen(colour)))
            below = [(x, e.test) for x, e in zip(xk, entries) if e.below_baseline]
            if below:
                self.acc_plot.plot([b[0] for b in below], [b[1] for b in below], pen=None,
                                   symbol="o", symbolSize=16, symbolBrush="w",
                                   symbolPen=pg.mkPen(colour, width=2))
            legend.append((run.name + (" (▼ hollow: under baseline)" if below else ""),
                           colour, False))
            if run.layers[0].control_test is not None:
                self.acc_plot.plot(xk, [e.control_test for e in entries],
                                   pen=pg.mkPen(colour, width=1.5, style=Qt.DashLine))
                legend.append((f"{run.name}: control task", colour, True))
            if run.layers[0].centroid_test is not None:        # WSD: the paper's measure
                self.acc_plot.plot(xk, [e.centroid_test for e in entries], symbol="t1",
                                   symbolBrush=colour, pen=pg.mkPen(colour, width=1,
                                                                    style=Qt.DotLine))
                legend.append((f"{run.name}: sense centroids (▲)", colour, True))
            ref = run.reference_baseline
            if ref in run.baselines:
                line = pg.InfiniteLine(pos=run.baselines[ref], angle=0,
                                       pen=pg.mkPen(colour, width=1, style=Qt.DotLine),
                                       label=f"{ref} {run.baselines[ref]:.3f}",
                                       labelOpts={"position": _between_columns(i, k_max),
                                                  "color": colour,
                                                  "anchors": [(0.5, 0), (0.5, 0)]})
                self.acc_plot.addItem(line)
        if runs:
            legend.append(("dotted line: the run's baseline", BASELINE_COLOR, True))
        self.run_legend.setText(swatch_legend(legend))
        self.weight_plot.setXRange(-0.6, k_max - 0.4, padding=0)
        self.acc_plot.setXRange(-0.3, k_max + 0.3, padding=0)
        self._rows = rows
        self._fill(self.table, rows)
        if self.table_dialog is not None:
            self._fill(self.table_dialog.table, rows)

    @staticmethod
    def _fill(table: QTableWidget, rows: List[List[str]]) -> None:
        table.setRowCount(len(rows))
        sel = RESULT_COLUMNS.index("selectivity") if "selectivity" in RESULT_COLUMNS else -1
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                if c == sel and _below_flag(text):
                    item.setText("⚠ " + text)
                    item.setToolTip(f"selectivity under {SELECTIVITY_FLAG}: "
                                    f"{CONTROL_EXPLANATION}")
                table.setItem(r, c, item)
        table.resizeColumnsToContents()
