"""The projection view: UMAP of the tokens, one plot per layer, side by side and linked.

PCA is drawn at once; UMAP then runs on the worker one layer at a time, each plot switching
from PCA to UMAP as its layer completes (the one-time compile: :mod:`.warmup`). Hover shows a
token in its sentence, Shift+drag in one plot selects the same tokens in all, the legend colours
by word, label or sentence, the search box marks a token.

Model, view, controller: :class:`~.model.ProjectionModel` (what is projected and drawn; no
Qt), :class:`~.view.ProjectionView` (controls, plots, legend, info line) and
:class:`ProjectionPanel`, which wires them and the linked interaction. Its parts: running the
projections and their cache (:class:`~.running.ProjectionRunner`), the export actions
(:class:`~.export_actions.ProjectionExports`), and functions of values for the sources, exports
and report (:mod:`.sources`, :mod:`.export`, :mod:`.report`).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
import numpy as np
from PySide6.QtWidgets import QTabWidget, QVBoxLayout, QWidget

from elmo_engine.analysis.projection import Projection, TokenSet
from elmo_engine.errors import ElmoError
from elmo_explorer.state.worker import JobHandle
from elmo_explorer.state.workspace import TokenRef
from elmo_explorer.views.projection import report
from elmo_explorer.views.projection.export_actions import ProjectionExports
from elmo_explorer.views.projection.faithful import MapFaithfulness
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.running import (MIN_UMAP_POINTS, ProjectionRunner, RunRequest,
                                                    run_layers, wants_umap)
from elmo_explorer.views.projection.trajectory_model import TrajectorySettings
from elmo_explorer.views.projection.trajectory_panel import TrajectoryPanel
from elmo_explorer.views.projection.sources import (ask_dataset_path, colour_categories,
                                                     dataset_job, request, typed_points)
from elmo_explorer.views.projection.view import ProjectionView, describe
from elmo_explorer.views.projection.warmup import UmapWarmUp
from elmo_explorer.views.protocol import PanelDefaults


class ProjectionPanel(PanelDefaults, QWidget):
    """UMAP (and instant PCA) of token vectors per layer, with linked plots.

    Signals
    -------
    ready() : the projection of the current data is drawn (PCA, then UMAP when it runs)
    """

    title = "Projection"
    ready = Signal()

    def __init__(self, workspace, parent=None):
        super().__init__(parent)
        self.ws = workspace
        self.model = ProjectionModel()
        self.view = ProjectionView(self)
        self.warm = UmapWarmUp(workspace.worker, self._run_imminent, self)
        self.jobs = workspace.worker.group("projection", self.title)
        # the maps, and the same tokens followed from layer to layer (issue 42)
        self.trajectories = TrajectoryPanel(self.model, self.jobs, lambda: self.ws.n_layers, self)
        self.tabs = QTabWidget(self)
        self.tabs.setDocumentMode(True)
        self.tabs.addTab(self.view, "Maps")
        self.tabs.addTab(self.trajectories, "Trajectories")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.tabs)
        self.runner = ProjectionRunner(self.jobs, self.model, self)
        self.trajectories.projector = self.runner.projector
        self.exports = ProjectionExports(self, self.jobs, self.model, self.view,
                                         self.grid_figure)
        r = self.runner
        r.pca_done.connect(self._on_pca)
        r.projected.connect(self._draw)
        r.job_submitted.connect(lambda: self.view.controls.set_running(True))
        r.message.connect(self.view.message)
        self.faith = MapFaithfulness(self.jobs, self.model, self.view, self)   # issue 42
        self.faith.settled.connect(self._on_faith_settled)
        self._ready_waits = False             # ready once the maps' measures are in
        r.finished.connect(self._on_run_finished)
        r.cancelled.connect(self.cancel)      # Esc as the view's own Cancel: the same reset

        c, plots = self.view.controls, self.view.plots
        c.run_requested.connect(lambda: self.run(auto=False))
        c.cancel_requested.connect(self.cancel)
        c.open_dataset_requested.connect(self.ask_open_dataset)
        c.source_changed.connect(self._on_source_changed)
        c.colour_changed.connect(lambda _k: self.apply_colours())
        c.search_changed.connect(self.search)
        c.select_mode_toggled.connect(plots.set_select_mode)
        c.clear_selection_requested.connect(lambda: plots.set_selection([]))
        plots.hovered.connect(self.on_hover)
        plots.point_clicked.connect(self.on_click)
        plots.selection_made.connect(self.on_selection)
        self.view.legend.entry_clicked.connect(self.on_legend)
        ws = self.ws
        ws.model_changed.connect(self._on_data_changed)
        ws.sentences_changed.connect(self._on_loaded_changed)
        ws.activations_changed.connect(self._on_loaded_changed)
        ws.selection_changed.connect(self.on_ws_selection)
        self._auto = QTimer(self)
        self._auto.setSingleShot(True)
        self._auto.setInterval(250)
        self._auto.timeout.connect(lambda: self.run(auto=True))
        # the compile waits for a model and for the jobs its load starts (scheduled after
        # them): at start-up, queued ahead of the demo model's load, it kept the model 7 s away
        ws.model_changed.connect(self._warm_up_later)
        if ws.embedder is not None:
            self._warm_up_later()

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        return self.model.ready

    def _on_run_finished(self) -> None:
        self.faith.run_finished()                    # measures the maps still unmeasured
        self._set_ready()

    def _on_faith_settled(self) -> None:
        if self._ready_waits:
            self._set_ready()

    def _set_ready(self) -> None:
        self.view.controls.set_running(False)
        self._ready_waits = self.faith.pending()     # every drawn map's caption first
        if self._ready_waits:
            return
        if not self.model.ready:
            self.model.ready = True
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        return list(self.exports.actions)

    def view_state(self) -> Dict[str, Any]:
        """The view's parameters as JSON values (docs/guide/projection.md)."""
        path = self.model.dataset_path
        state = self.view.controls.state(str(path) if path is not None else None)
        state["trajectories"] = self.trajectories.settings().to_json()
        return state

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict (invalid keys ignored); the scheduled automatic run
        recomputes, a data set file is read on the worker."""
        if not isinstance(state, dict):
            return
        c, m = self.view.controls, self.model
        c.apply_state(state)
        self.trajectories.apply_settings(TrajectorySettings.from_json(state.get("trajectories")))
        self.apply_colours()
        self.search(c.search.text())
        path = state.get("dataset_file")
        if (isinstance(path, str) and path and Path(path).is_file()
                and (m.dataset is None or Path(path) != m.dataset_path)):
            self.open_dataset(path, colour=c.colour_by(), run=c.source_key() == "dataset")
        if c.source_key() == "dataset" and m.dataset is None:
            if not (isinstance(path, str) and path and Path(path).is_file()):
                self.view.message("The saved view used a labelled data set that is not there "
                                  "now: open it with Open data set…")
            return                               # else waits for the data set (worker)
        m.dirty = True
        self.maybe_auto()

    def grid_figure(self, plots=None):
        """The drawn plots as one matplotlib figure (:func:`.report.grid_figure`)."""
        return report.grid_figure(self.model, self.colour_categories(),
                                  self.view.controls.colour_by(), plots,
                                  typed=self.view.plots.typed)

    # ---- warm-up ------------------------------------------------------------------------------
    def _warm_up_later(self) -> None:
        """After the jobs the current event starts (a model's load: its embedding); the timer
        is the panel's, so a deleted panel schedules nothing."""
        QTimer.singleShot(0, self, self._schedule_warm_up)

    def _schedule_warm_up(self) -> None:
        self.warm.schedule()

    def _run_imminent(self) -> bool:
        """A projection is about to start (its first UMAP fit then compiles instead)."""
        return self._auto.isActive() or (self.model.dirty and self.isVisible()
                                         and self.ws.all_embedded())

    # ---- data changes -------------------------------------------------------------------------
    def _on_data_changed(self, *_args) -> None:
        self.trajectories.refresh_choices()
        self.model.dirty = True
        self.model.ready = False
        self.maybe_auto()

    def _on_loaded_changed(self, *_args) -> None:
        if self.view.controls.source_key() != "dataset":
            self._on_data_changed()

    def _on_source_changed(self, key: str) -> None:
        if key == "dataset" and self.model.dataset is None:
            return
        self.model.dirty = True
        if key != "words" or self.view.controls.word_list():
            self.maybe_auto()

    def maybe_auto(self) -> None:
        if self.model.dirty and self.isVisible():
            self._auto.start()

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.maybe_auto()

    # ---- running (the runner runs, the panel draws) ----------------------------------------
    def run(self, auto: bool = False) -> None:
        """Project the chosen tokens: PCA at once, then UMAP layer by layer on the worker."""
        m, c, ws = self.model, self.view.controls, self.ws
        self._auto.stop()
        if ws.worker.is_stopped():                 # the window has closed
            return
        try:
            req = request(ws, m, c.source_key(), c.max_points.value(), c.word_list())
            params = c.params()
            weights = c.mix_weights(ws.n_layers) if ws.n_layers else []
        except ElmoError as e:
            self.view.message(str(e))
            self._set_ready()
            return
        if req is None:
            self.view.message("Waiting for the sentences to be embedded…")
            return
        m.dirty = False
        if isinstance(req, str):
            self._clear(req)
            self._set_ready()
            return
        tokens, acts = req
        if len(tokens) < 2:
            self._clear(f"Only {len(tokens)} token(s) to project; need at least 2.")
            self._set_ready()
            return
        m.ready = False
        layers = run_layers(ws.n_layers, weights, c.layer_norm.isChecked())
        checksum = ws.model_info.checksum if ws.model_info is not None else ""
        try:
            self.runner.start(RunRequest(tokens, acts, ws.embedder, tuple(layers), params,
                                         checksum, wants_umap(len(tokens), auto)))
        except ElmoError as e:                       # the PCA run here at once
            self._clear(str(e))
            self._set_ready()

    def _on_pca(self, req: RunRequest, projections: List[Projection]) -> None:
        """The current run's PCA: set the plots up, draw it, go on to UMAP or stop there."""
        m, v, tokens = self.model, self.view, req.tokens
        self.faith.run_started(req.with_umap)
        v.plots.set_layers([lay.name for lay in m.layers])
        typed = (typed_points(tokens, m.sentence_info)
                 if v.controls.source_key() == "reference" else [])
        v.plots.set_typed(typed, tokens.words)
        v.plots.set_select_mode(v.controls.select_button.isChecked())
        v.add_plot_menus(self.exports.ask_export_plot, self.exports.ask_export_tensorboard)
        self.apply_colours()
        for k, p in enumerate(projections):
            self._draw(k, p)
        self.search(v.controls.search.text())
        self.on_ws_selection(self.ws.selection)
        if req.with_umap:
            self.runner.umap()
        elif len(tokens) < MIN_UMAP_POINTS:
            v.message(f"PCA of {len(tokens):,} tokens: below {MIN_UMAP_POINTS} points UMAP's "
                      "neighbourhoods mean nothing, so PCA is shown (press Run UMAP to force it)."
                      + (" Ringed: your sentences." if typed else ""))
            self._set_ready()
        else:
            v.message(f"PCA of {len(tokens):,} tokens shown; press Run UMAP for UMAP.")
            self._set_ready()

    def cancel(self) -> None:
        """Stop the running projection; what is drawn stays."""
        self.runner.stop()
        self.faith.cancel()
        self.view.message("Cancelled; the plots keep what was drawn.")
        self._set_ready()

    def main_button(self):
        """Run UMAP, or Compute on the Trajectories tab (View ▸ Run, Ctrl+R)."""
        if self.tabs.currentWidget() is self.trajectories:
            return self.trajectories.view.compute
        return self.view.controls.run_button

    # ---- drawing --------------------------------------------------------------------------------
    def _draw(self, k: int, p: Projection) -> None:
        self.model.shown[k] = p
        tokens = self.model.tokens
        self.faith.drawn(k, p, self.view.draw(k, p, tokens.words if tokens is not None else ()))

    def _clear(self, message: str) -> None:
        self.runner.stop()                           # a running job's result would redraw
        self.faith.stop()
        self.model.clear()
        self.view.clear(message)

    def colour_categories(self):
        """``(codes, legend)`` of the drawn tokens for the colour-by choice."""
        return colour_categories(self.model.tokens, self.view.controls.colour_by(),
                                 self.model.sentence_info, self.model.reference_labels)

    def apply_colours(self, *_args) -> None:
        if self.model.tokens is None:
            return
        if self.faith.active():                      # each plot its own colours
            self.model.legend_codes = None
            self.faith.colour_all()
            return
        codes, legend = self.colour_categories()
        self.model.legend_codes = codes
        self.view.set_colours(codes, legend)
        self.trajectories.recolour()

    # ---- linked interaction: search, hover, click, box and legend selection -------------------
    def search(self, text: str) -> np.ndarray:
        """Mark every point whose token is ``text`` (case-insensitive) in all plots."""
        return self.view.show_search(self.model.tokens, text)

    def on_hover(self, k: int, i: int) -> None:
        if k >= 0 and k != self.model.current_plot:
            self.model.current_plot = k
            if self.faith.active():                  # the legend counts this plot
                self.faith.colour(k)
        if i >= 0 and self.model.tokens is not None:
            self.view.info.setText(describe(self.model.tokens, self.model.layers, i, k))

    def on_click(self, k: int, i: int) -> None:
        tokens = self.model.tokens
        if i < 0 or tokens is None:
            return
        self.view.info.setText(describe(tokens, self.model.layers, i, k))
        if self._from_loaded():
            self.ws.select(TokenRef(int(tokens.sentence[i]), int(tokens.position[i])))

    def on_selection(self, idx: np.ndarray) -> None:
        if self.model.tokens is not None:
            self.view.show_selection(self.model.tokens, idx)

    def on_legend(self, row: int) -> None:
        codes = self.model.legend_codes
        if codes is not None:
            idx = np.flatnonzero(codes == row)
            self.view.plots.set_selection(idx)
            self.on_selection(idx)

    def _from_loaded(self) -> bool:
        tokens = self.model.tokens
        return (tokens is not None and self.view.controls.source_key() != "dataset"
                and len(tokens.sentences) == len(self.ws.tokens))

    def on_ws_selection(self, ref) -> None:
        if ref is None or not self._from_loaded() or self.view.controls.search.text().strip():
            return
        t = self.model.tokens
        hit = np.flatnonzero((t.sentence == ref.sentence) & (t.position == ref.token))
        self.view.plots.set_highlight(hit)
        if len(hit):
            self.view.info.setText(describe(t, self.model.layers, int(hit[0])))

    # ---- a labelled data set --------------------------------------------------------------------
    def ask_open_dataset(self) -> None:
        path = ask_dataset_path(self)
        if path:
            self.open_dataset(path)

    def open_dataset(self, path, colour: str = "label", run: bool = True) -> JobHandle:
        """Read a labelled data set on the worker, then (``run``) project its labelled tokens
        coloured by ``colour``."""
        path = Path(path)

        def done(tokens: TokenSet) -> None:
            c = self.view.controls
            self.model.dataset, self.model.dataset_path = tokens, path
            c.dataset_label.setText(f"{path.name}: {len(tokens):,} labelled tokens")
            if run:
                c.set_colour_by(colour)
                c.set_source("dataset")
                self.run(auto=False)

        return self.jobs.submit(
            f"Reading {path.name}", dataset_job(path), kind="data", on_done=done,
            on_failed=lambda m: self.view.message(f"Cannot open: {m}"))
