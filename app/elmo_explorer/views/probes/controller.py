"""The probes view: how much does a probe use each biLM layer, for syntax and for word sense?

Choose a task (the built-in demo tasks or your own CoNLL-U / TSV / WSD files), train per-layer
and scalar-mix probes on the worker (live loss and dev-accuracy curves, cancel at any time), and
compare runs: the scalar mix's normalised layer weights as grouped bars, per-layer accuracy with
the control-task band, and a table with every number. Runs are kept for the session and export
as PNG/SVG/PDF, CSV and JSON.

Model, view, controller: :class:`~.probes_model.ProbesModel` (tasks, runs, curves),
:class:`~.probes_view.ProbesView` (the widgets) and :class:`ProbesPanel`, which trains on the
workspace's worker and provides the :class:`~.protocol.AnalysisPanel` protocol.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import List, Optional

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_explorer.common.save_dialog import open_file_name

from elmo_engine.progress import progress_text
from elmo_engine.analysis.probes.results import ProbeResult
from elmo_engine.analysis.probes.settings import ProbeConfig
from elmo_engine.analysis.probes.tables import write_results_csv, write_results_json
from elmo_engine.analysis.probes.tasks import ProbeTask, demo_task, file_task
from elmo_engine.analysis.probes.usefulness import write_usefulness_tsv
from elmo_explorer.views.probes.model import ProbesModel
from elmo_explorer.views.probes.view import ProbesView
from elmo_explorer.state.worker import JobHandle, Lane
from elmo_explorer.views.protocol import PanelDefaults

log = logging.getLogger(__name__)

__all__ = ["ProbeTask", "ProbesPanel", "demo_task", "file_task"]

FILE_FILTERS = {"pos": "CoNLL-U (*.conllu *.conllu.gz);;All files (*)",
                "tsv": "TSV (*.tsv *.txt *.gz);;All files (*)",
                "wsd": "WSD XML (*.xml *.xml.gz);;All files (*)"}
KEYS_FILTER = "Gold keys (*.txt *.gz);;All files (*)"


class ProbesPanel(PanelDefaults, QWidget):
    """Train probes and compare their layer weights across tasks.

    Signals
    -------
    ready() : the view has drawn what its current data asks for
    runs_changed() : runs were added, restored or cleared
    training_event(object) : a training event (dict) of the current run, on the GUI thread
    """

    title = "Probes"
    ready = Signal()
    runs_changed = Signal()
    training_event = Signal(object)

    def __init__(self, workspace, parent: Optional[QWidget] = None, recorded: bool = True):
        super().__init__(parent)
        self.workspace = workspace
        self.model = ProbesModel()
        if recorded:                             # the bundled model's reference results
            from elmo_engine.analysis.probes.reference import load_reference_runs

            self.model.show_recorded(load_reference_runs()[0])
        self.view = ProbesView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self._ready = False
        self.jobs = workspace.worker.group("probes", self.title)
        self.jobs.on_cancelled = lambda: self.view.status.setText("Cancelled.")
        self._shown = False
        v = self.view
        v.set_tasks([t.name for t in self.model.tasks])
        v.train_button.clicked.connect(self.train_selected)
        v.demo_button.clicked.connect(lambda: self.run_demo())
        v.usefulness.compute_button.clicked.connect(lambda: self.run_usefulness())
        v.cancel_button.clicked.connect(self.cancel)
        v.clear_button.clicked.connect(self.clear_runs)
        v.open_task_requested.connect(self._open_files)
        workspace.model_changed.connect(self._on_model)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        self._redraw()

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        return self._ready and self.jobs.is_idle()

    def _set_ready(self) -> None:
        if not self._ready:
            self._ready = True
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        """The view's exports, each enabled when there is something to write (the usefulness
        entries once Compute usefulness has run: before, they failed with a traceback)."""
        useful = bool(self.model.usefulness_runs())
        out = []
        for text, fn, enabled in (
                ("Probe plots (PNG, SVG, PDF)…", self._export_plots, True),
                ("Probe table (CSV)…", lambda: self._export_text("csv"), True),
                ("Probe runs (JSON)…", lambda: self._export_text("json"), True),
                ("Usefulness figure (PNG, SVG, PDF)…", self._export_usefulness, useful),
                ("Usefulness table (TSV)…", lambda: self._export_text("tsv"), useful)):
            a = QAction(text, self)
            a.triggered.connect(fn)
            a.setEnabled(enabled)
            out.append(a)
        return out

    def probe_runs(self) -> List[dict]:
        """The session's runs as ``results.json`` objects (saved with a workspace)."""
        return self.model.to_dicts()

    def restore_probe_runs(self, runs: List[dict]) -> None:
        """Show runs saved with a workspace (replacing the current ones)."""
        self.model.restore(runs)
        self._redraw()
        self.runs_changed.emit()

    # ---- workspace events ---------------------------------------------------------------------
    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._shown:
            self._shown = True
            self._settle()

    def _on_model(self) -> None:
        self.view.status.setText(f"model: {getattr(self.workspace.model_info, 'name', '')}")
        self._ready = False                      # a new model: ready again once its jobs are done
        self._settle()

    def _settle(self) -> None:
        """Nothing trains until the user asks: once no job runs and no model is loading, the
        current picture (recorded results, the user's runs or the empty-state text) is final."""
        if self.jobs.is_idle() and not self.workspace.is_loading():
            self._set_ready()

    # ---- running ----------------------------------------------------------------------------
    def train_selected(self) -> None:
        self.run_tasks([self.model.tasks[self.view.task_box.currentIndex()]])

    def run_demo(self) -> None:
        """Train the demo POS and word-sense probes (when the user presses Run demo)."""
        self.run_tasks(self.model.demo_tasks())

    def run_usefulness(self, tasks: Optional[List[ProbeTask]] = None,
                       config: Optional[ProbeConfig] = None) -> Optional[JobHandle]:
        """Usefulness beside identity for the selected task (or ``tasks``): the probes with the
        control task, the cumulative probes and the MDL probes, on the long lane."""
        self.view.pages.setCurrentWidget(self.view.usefulness)
        chosen = tasks or [self.model.tasks[self.view.task_box.currentIndex()]]
        return self.run_tasks(chosen, config, cumulative=True)

    def run_tasks(self, tasks: List[ProbeTask], config: Optional[ProbeConfig] = None,
                  cumulative: bool = False) -> Optional[JobHandle]:
        """Train the tasks one after another in one job of the long lane; returns its handle
        (None: no model). ``cumulative``: with the usefulness table
        (:func:`~elmo_engine.analysis.probes.usefulness.run_usefulness`)."""
        if self.workspace.embedder is None:
            self.view.status.setText("Load a model first (File → Open checkpoint…).")
            self._set_ready()
            return None
        embedder = self.workspace.embedder          # captured now: the job never reads the workspace
        # the probes train where the model runs, as `probe --device auto` (a GPU when there is one)
        cfg = config or ProbeConfig(**{**self.model.config.__dict__,
                                       "control": self.view.control_box.isChecked(),
                                       "device": str(embedder.device)})
        self.model.new_run()

        def job(state):
            from elmo_engine.analysis.probes.experiment import probe_sentences

            out = []
            for t in tasks:
                state.post({"phase": "start", "name": t.name})
                data = t.load()
                out.append(probe_sentences(
                    embedder, data.train, data.test, data.dev, task=t.task,
                    config=cfg.for_task(t.task), name=t.name, label=data.label,
                    max_train_sentences=t.options.get("max_train_sentences"),
                    first_sense_fn=data.first_sense_fn, state=state,
                    on_event=state.post, cumulative=cumulative))
            return out

        what = "Usefulness beside identity: " if cumulative else "Training probes: "
        handle = self.jobs.submit(
            what + ", ".join(t.name for t in tasks), job, lane=Lane.LONG,
            kind="train", on_done=self._on_results, on_failed=self._on_error,
            on_progress=self._on_progress, on_event=self._on_event, on_finished=self._on_finished)
        self._ready = False
        self.view.set_busy(True)
        return handle

    def cancel(self) -> None:
        if self.jobs.cancel("train"):
            self.view.status.setText("Cancelled.")

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.status.setText(progress_text(done, total, message))

    def _on_finished(self) -> None:
        if self.jobs.is_idle():             # (a superseded run ends before its successor)
            self.view.set_busy(False)
            self._set_ready()

    def _on_results(self, results: List[ProbeResult]) -> None:
        self.model.add_results(results)
        self.view.status.setText("Done: " + "; ".join(
            f"{r.name} ({r.wall_time_s:.1f} s)" for r in results))
        self._redraw()
        self.runs_changed.emit()

    def _on_error(self, message: str) -> None:
        self.view.status.setText(f"Probe failed: {message}")

    def _on_event(self, e: dict) -> None:
        """A training event of the current run (the worker drops a superseded run's)."""
        self.model.on_event(e)
        self.training_event.emit(e)
        if e["phase"] == "start":
            self.view.status.setText(f"{e['name']}: embedding…")
        self.view.draw_curves(self.model.curves)

    def _redraw(self) -> None:
        m = self.model
        self.view.draw_runs(m.runs, m.colours(), m.table_rows(), m.recorded_text(),
                            m.control_warning())
        self.view.usefulness.draw(m.usefulness_tables(), m.usefulness_colours(),
                                  m.usefulness_rows(), m.usefulness_flags())

    def clear_runs(self) -> None:
        self.model.clear()
        self.view.draw_curves(self.model.curves)
        self._redraw()
        self.runs_changed.emit()

    # ---- files and export -------------------------------------------------------------------
    def _open_files(self, task: str) -> None:
        flt = FILE_FILTERS[task]
        asks = [("Training data", flt), ("Test data", flt)]
        if task == "wsd":
            asks += [("Gold keys of the training data", KEYS_FILTER),
                     ("Gold keys of the test data", KEYS_FILTER)]
        names = []
        for title, f in asks:
            name = open_file_name(self, title, f)
            if not name:
                return
            names.append(name)
        self.add_task(file_task(task, *names))

    def add_task(self, task: ProbeTask) -> None:
        """Offer a task in the chooser and select it."""
        self.model.tasks.append(task)
        self.view.task_box.addItem(task.name)
        self.view.task_box.setCurrentIndex(len(self.model.tasks) - 1)

    def _export_plots(self) -> None:
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

        path = ask_save_path(self, "Export probe plots", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_plots(path))

    def export_plots(self, path) -> List[Path]:
        """The runs' figure — mix weights and test score per layer, ± sd, controls dashed,
        baselines dotted — drawn by the engine's figure module (PNG, SVG or PDF by the suffix;
        every format of the export options without one)."""
        from elmo_engine.io.figures.probes import probe_figure
        from elmo_explorer.common.figure_export import panel_figure_options, save_figure

        if not self.model.runs:
            raise LookupError("no probe runs to draw yet")
        return save_figure(probe_figure(self.model.runs), Path(path), panel_figure_options(self))

    def _export_usefulness(self) -> None:
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

        path = ask_save_path(self, "Export the usefulness figure", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: self.export_usefulness(path))

    def export_usefulness(self, path) -> List[Path]:
        """The usefulness figure (:mod:`elmo_engine.io.figures.usefulness`: weights and Δs as
        bars, scores as lines, both expected layers), PNG, SVG or PDF by the suffix."""
        from elmo_engine.io.figures.usefulness import usefulness_results_figure
        from elmo_explorer.common.figure_export import panel_figure_options, save_figure

        if not self.model.usefulness_runs():
            raise LookupError("no usefulness table yet: press Compute usefulness first")
        return save_figure(usefulness_results_figure(self.model.runs), Path(path),
                           panel_figure_options(self))

    def _export_text(self, kind: str) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path

        flt = {"csv": "CSV (*.csv)", "json": "JSON (*.json)", "tsv": "TSV (*.tsv)"}[kind]
        path = ask_save_path(self, f"Export probe {kind.upper()}", flt)
        if path is not None:
            self._guard(lambda: self.write_export(path, kind))

    def write_export(self, path, kind: str) -> None:
        """Write every run as CSV (the table) or JSON (a list of results.json objects), or the
        usefulness tables as TSV (``kind`` "tsv")."""
        if kind == "tsv":
            if not self.model.usefulness_runs():
                raise LookupError("no usefulness table yet: press Compute usefulness first")
            write_usefulness_tsv(self.model.usefulness_tables(), path)
            return
        (write_results_csv if kind == "csv" else write_results_json)(self.model.runs, path)

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:  # show, never crash the GUI
            log.exception("probe export failed")
            from elmo_explorer.common.error_dialog import show_error

            show_error(self, "Export failed", str(e))
