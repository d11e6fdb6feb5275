"""The probes view: how much does a probe use each biLM layer, for syntax and for word sense?

Choose a task (the built-in demo tasks or your own CoNLL-U / TSV / WSD files), train per-layer
and scalar-mix probes on the worker (live loss and dev-accuracy curves, cancel at any time), and
compare runs: the scalar mix's normalised layer weights as grouped bars, per-layer accuracy with
the control-task band, and a table with every number. Runs are kept for the session and export
as PNG/SVG/PDF, CSV and JSON.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QCheckBox, QComboBox, QFileDialog, QHBoxLayout, QLabel,
                               QMenu, QPushButton, QSplitter, QTableWidget, QTableWidgetItem,
                               QToolButton, QVBoxLayout, QWidget)

from elmo_engine.analysis.probes.experiment import ProbeConfig, ProbeResult, probe_sentences
from elmo_engine.analysis.probes.tables import (RESULT_COLUMNS, results_rows, write_results_csv,
                                                write_results_json)
from elmo_engine.analysis.probes.tasks import ProbeTask, demo_task, file_task
from elmo_engine.io.report import ReportTable
from elmo_explorer.figure_export import FigureOptions

log = logging.getLogger(__name__)

__all__ = ["ProbeTask", "ProbesPanel", "demo_task", "file_task"]

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
SEMANTIC_COLOURS = ["#c0392b", "#e67e22", "#8e44ad", "#d35400"]
SYNTAX_COLOURS = ["#2471a3", "#17a589", "#2e4053", "#5dade2"]
QUICK_SENTENCES = 600            # training sentences of the automatic first-show preview
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


class ProbesPanel(QWidget):
    """Train probes and compare their layer weights across tasks."""

    title = "Probes"
    ready = Signal()
    runs_changed = Signal()
    _event = Signal(object)                      # (run token, event dict) from the worker

    def __init__(self, workspace, parent: Optional[QWidget] = None, auto_demo: bool = True):
        super().__init__(parent)
        self.workspace = workspace
        self.runs: List[ProbeResult] = []
        self.config = ProbeConfig()
        self.auto_demo = auto_demo
        self._ready = False
        self._shown = False
        self._auto_done = False
        self._job: Optional[int] = None
        self._token = 0
        self._curves: Dict[str, List[List[float]]] = {}
        self.tasks: List[ProbeTask] = [demo_task("pos"), demo_task("wsd"), demo_task("supersense")]
        self._build()
        self._event.connect(self._on_event)
        workspace.model_changed.connect(self._on_model)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        workspace.worker.job_progress.connect(self._on_progress)
        workspace.worker.job_finished.connect(self._on_finished)
        workspace.worker.job_failed.connect(lambda job_id, _msg: self._on_finished(job_id))
        self._redraw()

    # ---- widgets ----------------------------------------------------------------------------
    def _build(self) -> None:
        self.task_box = QComboBox()
        for t in self.tasks:
            self.task_box.addItem(t.name)
        self.open_button = QToolButton(text="Open task…")
        self.open_button.setPopupMode(QToolButton.InstantPopup)
        menu = QMenu(self.open_button)
        menu.addAction("CoNLL-U (part of speech)…", lambda: self._open_files("pos"))
        menu.addAction("TSV (token, label)…", lambda: self._open_files("tsv"))
        menu.addAction("WSD XML + keys…", lambda: self._open_files("wsd"))
        self.open_button.setMenu(menu)
        self.control_box = QCheckBox("Control task")
        self.control_box.setChecked(True)
        self.control_box.setToolTip("Also train on word types mapped to random labels and report "
                                    "selectivity (task accuracy − control accuracy)")
        self.train_button = QPushButton("Train", clicked=self.train_selected)
        self.demo_button = QPushButton("Run demo (POS + word sense)",
                                       clicked=lambda: self.run_demo())
        self.cancel_button = QPushButton("Cancel", clicked=self.cancel, enabled=False)
        self.clear_button = QPushButton("Clear runs", clicked=self.clear_runs)
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

    # ---- contract ---------------------------------------------------------------------------
    def is_ready(self) -> bool:
        return self._ready

    def _set_ready(self) -> None:
        if not self._ready:
            self._ready = True
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        out = []
        for text, fn in (("Probe plots (PNG, SVG, PDF)…", self._export_plots),
                         ("Probe table (CSV)…", lambda: self._export_text("csv")),
                         ("Probe runs (JSON)…", lambda: self._export_text("json"))):
            a = QAction(text, self)
            a.triggered.connect(fn)
            out.append(a)
        return out

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            self._maybe_auto_run()

    def _on_model(self) -> None:
        self.status.setText(f"model: {getattr(self.workspace.model_info, 'name', '')}")
        self._ready = False                      # a new model: ready again once its jobs are done
        self._maybe_auto_run()

    def _maybe_auto_run(self) -> None:
        """On first show with a model: run the demo POS and word-sense probes once (seconds on
        the demo model); otherwise the current picture (or the empty-state text) is final."""
        if self._job is not None:
            return
        if (self._shown and self.auto_demo and not self._auto_done
                and self.workspace.embedder is not None):
            self._auto_done = True
            self.run_demo(quick=True)
        elif not self.workspace.is_loading():
            self._set_ready()

    # ---- running ----------------------------------------------------------------------------
    def train_selected(self) -> None:
        self.run_tasks([self.tasks[self.task_box.currentIndex()]])

    def run_demo(self, quick: bool = False) -> None:
        """Train the demo POS and word-sense probes; ``quick``: a preview on a seeded subset of
        the training sentences (what runs by itself on first show, in seconds)."""
        tasks = [self.tasks[0], self.tasks[1]]
        if quick:
            tasks = [ProbeTask(f"{t.name} (preview, {QUICK_SENTENCES} sentences)", t.task, t.load,
                               t.semantic, {"max_train_sentences": QUICK_SENTENCES}) for t in tasks]
        self.run_tasks(tasks, ProbeConfig(epochs=10, patience=2, control=True) if quick else None)

    def run_tasks(self, tasks: List[ProbeTask], config: Optional[ProbeConfig] = None) -> int:
        """Train the tasks one after another in one worker job; returns the job id (0: no model)."""
        if self.workspace.embedder is None:
            self.status.setText("Load a model first (File → Open checkpoint…).")
            self._set_ready()
            return 0
        cfg = config or ProbeConfig(**{**self.config.__dict__,
                                       "control": self.control_box.isChecked()})
        self._token += 1
        token, emit, ws = self._token, self._event.emit, self.workspace

        def job(state):
            out = []
            for t in tasks:
                emit((token, {"phase": "start", "name": t.name}))
                data = t.load()
                out.append(probe_sentences(
                    ws.embedder, data["train"], data["test"], data.get("dev"), task=t.task,
                    config=cfg, name=t.name, label=str(data.get("label", "")),
                    max_train_sentences=t.options.get("max_train_sentences"),
                    first_sense_fn=data.get("first_sense_fn"), state=state,
                    on_event=lambda e: emit((token, e))))
            return out

        self._job = ws.worker.submit("Training probes: " + ", ".join(t.name for t in tasks), job,
                                     on_result=self._on_results, on_error=self._on_error,
                                     group="probes")
        self._ready = False
        self._busy(True)
        return self._job

    def cancel(self) -> None:
        if self._job is not None:
            self.workspace.worker.cancel(self._job)
            self.status.setText("Cancelled.")

    def _busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)
        self.train_button.setEnabled(not busy)
        self.demo_button.setEnabled(not busy)

    def _on_progress(self, job_id: int, done: int, total: int, message: str) -> None:
        if job_id == self._job:
            self.status.setText(f"{message} ({done}/{total})" if total else message)

    def _on_finished(self, job_id: int) -> None:
        if job_id == self._job:
            self._job = None
            self._busy(False)
            self._set_ready()

    def _on_results(self, results: List[ProbeResult]) -> None:
        self.runs.extend(results)
        self.status.setText("Done: " + "; ".join(
            f"{r.name} ({r.wall_time_s:.1f} s)" for r in results))
        self._redraw()
        self.runs_changed.emit()

    def _on_error(self, message: str) -> None:
        self.status.setText(f"Probe failed: {message}")

    def _on_event(self, payload) -> None:
        token, e = payload
        if token != self._token:
            return                                   # from a superseded run
        if e["phase"] == "start":
            self._curves = {}
            self.status.setText(f"{e['name']}: embedding…")
        else:
            c = self._curves.setdefault(e["phase"], [])
            c.append(e["loss"] + e["dev"])
        self._draw_curves()

    # ---- drawing ----------------------------------------------------------------------------
    def _draw_curves(self) -> None:
        self.loss_plot.clear()
        self.dev_plot.clear()
        for phase, rows in self._curves.items():
            n = len(rows[0]) // 2
            style = Qt.DashLine if phase.startswith("control") else Qt.SolidLine
            epochs = list(range(1, len(rows) + 1))
            for h in range(n):
                colour = "#000000" if phase.endswith("mix") else LAYER_COLOURS[h % len(LAYER_COLOURS)]
                pen = pg.mkPen(colour, width=2, style=style)
                self.loss_plot.plot(epochs, [r[h] for r in rows], pen=pen)
                self.dev_plot.plot(epochs, [r[n + h] for r in rows], pen=pen)

    def _colour(self, i: int) -> str:
        run = self.runs[i]
        pal = SEMANTIC_COLOURS if run.is_wsd or "sense" in run.task else SYNTAX_COLOURS
        same = [j for j in range(i) if (self.runs[j].is_wsd or "sense" in self.runs[j].task)
                == (run.is_wsd or "sense" in run.task)]
        return pal[len(same) % len(pal)]

    def _redraw(self) -> None:
        self.empty_label.setVisible(not self.runs)
        self.weight_plot.clear()
        self.acc_plot.clear()
        self.bars: List[pg.BarGraphItem] = []
        n = len(self.runs)
        k_max = max((len(r.layers) for r in self.runs), default=3)
        ticks = [(k, f"layer {k}") for k in range(k_max)]
        self.weight_plot.getAxis("bottom").setTicks([ticks])
        self.acc_plot.getAxis("bottom").setTicks([ticks + [(k_max, "mix")]])
        width = 0.8 / max(n, 1)
        for i, run in enumerate(self.runs):
            colour = self._colour(i)
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
        self._fill_table()

    def table_rows(self) -> List[List[str]]:
        """Every number of every run, one row per layer (and the mix); also the CSV export."""
        return results_rows(self.runs)

    def _fill_table(self) -> None:
        rows = self.table_rows()
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                self.table.setItem(r, c, QTableWidgetItem(text))
        self.table.resizeColumnsToContents()

    def view_state(self) -> Dict[str, Any]:
        """The view keeps no parameters in a workspace (its runs are saved as probe runs)."""
        return {}

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Nothing to restore (see :meth:`view_state`)."""

    def report_figures(self, folder: Path, options: FigureOptions) -> List[Path]:
        """No figures of its own: the report shows the view as it is on screen."""
        return []

    def report_tables(self) -> List[ReportTable]:
        return []

    def probe_runs(self) -> List[dict]:
        """The session's runs as ``results.json`` objects (saved with a workspace)."""
        return [r.to_dict() for r in self.runs]

    def restore_probe_runs(self, runs: List[dict]) -> None:
        """Show runs saved with a workspace (replacing the current ones)."""
        self.runs = [ProbeResult.from_dict(d) for d in runs]
        self._redraw()
        self.runs_changed.emit()

    def clear_runs(self) -> None:
        self.runs.clear()
        self._curves = {}
        self._draw_curves()
        self._redraw()
        self.runs_changed.emit()

    # ---- files and export -------------------------------------------------------------------
    def _open_files(self, task: str) -> None:
        flt = {"pos": "CoNLL-U (*.conllu *.conllu.gz);;All files (*)",
               "tsv": "TSV (*.tsv *.txt *.gz);;All files (*)",
               "wsd": "WSD XML (*.xml *.xml.gz);;All files (*)"}[task]
        keys = "Gold keys (*.txt *.gz);;All files (*)"
        asks = [("Training data", flt), ("Test data", flt)]
        if task == "wsd":
            asks += [("Gold keys of the training data", keys), ("Gold keys of the test data", keys)]
        names = []
        for title, f in asks:
            name, _ = QFileDialog.getOpenFileName(self, title, "", f)
            if not name:
                return
            names.append(name)
        self.add_task(file_task(task, *names))

    def add_task(self, task: ProbeTask) -> None:
        """Offer a task in the chooser and select it."""
        self.tasks.append(task)
        self.task_box.addItem(task.name)
        self.task_box.setCurrentIndex(len(self.tasks) - 1)

    def _export_plots(self) -> None:
        from elmo_explorer.export import IMAGE_FILTERS, ask_save_path, export_widget

        path = ask_save_path(self, "Export probe plots", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: export_widget(self.results, path))

    def _export_text(self, kind: str) -> None:
        from elmo_explorer.export import ask_save_path

        flt = "CSV (*.csv)" if kind == "csv" else "JSON (*.json)"
        path = ask_save_path(self, f"Export probe {kind.upper()}", flt)
        if path is not None:
            self._guard(lambda: self.write_export(path, kind))

    def write_export(self, path, kind: str) -> None:
        """Write every run as CSV (the table) or JSON (a list of results.json objects)."""
        (write_results_csv if kind == "csv" else write_results_json)(self.runs, path)

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:  # show, never crash the GUI
            log.exception("probe export failed")
            from elmo_explorer.dialogs import show_error

            show_error(self, "Export failed", str(e))
