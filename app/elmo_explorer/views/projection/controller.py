"""The projection view: UMAP of the tokens, one plot per layer, side by side and linked.

PCA is drawn at once; UMAP then runs on the worker one layer at a time (group "projection"), each
plot switching from PCA to UMAP as its layer completes. umap's numba kernels are compiled once per
process by a warm-up job submitted once the worker has stayed idle for a moment (never on the GUI
thread, never between a model load and the embedding it triggers).
Hover shows a token in its sentence, box selection (Shift+drag) in one plot highlights the same
tokens in all, the legend colours by word, label or sentence, and the search box marks a token.

Model, view, controller: :class:`~.projection_model.ProjectionModel` (what is projected and
drawn; no Qt), :class:`~.projection_view.ProjectionView` (controls, plots, legend) and
:class:`ProjectionPanel`, which runs the projections on the worker; its interaction, export and
report parts are :class:`~.projection_interaction.ProjectionInteraction`,
:class:`~.projection_export.ProjectionExports` and :class:`~.projection_report.ProjectionReport`.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Dict, List

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.analysis.projection import (LayerSpec, Projection, Projector, all_tokens,
                                             is_warm, warm_up, word_tokens)
from elmo_engine.errors import ElmoError, InputError
from elmo_engine.io.report import ReportTable
from elmo_explorer.common.figure_export import FigureOptions
from elmo_explorer.views.projection.export import ProjectionExports
from elmo_explorer.views.projection.interaction import ProjectionInteraction
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.report import ProjectionReport
from elmo_explorer.views.projection.sources import (colour_categories, loaded_info,
                                                     reference_request, reference_word)
from elmo_explorer.views.projection.view import ProjectionView
from elmo_explorer.state.worker import Lane
from elmo_explorer.views.protocol import PanelDefaults

log = logging.getLogger(__name__)

AUTO_UMAP_MAX = 5_000          # with more tokens an automatic run stops at PCA (press Run)
MIN_UMAP_POINTS = 50           # below this UMAP means nothing: PCA, with a message
INLINE_PCA_MAX = 400_000       # tokens × dims up to which PCA runs on the GUI thread (~10 ms)
GROUP = "projection"
WARM_UP_QUIET_MS = 1500        # the worker stays idle this long before the UMAP compile starts


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
        self.projector = Projector()
        self.model = ProjectionModel()
        self.view = ProjectionView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.interaction = ProjectionInteraction(self)
        self.exports = ProjectionExports(self)
        self.report = ProjectionReport(self)
        #: asked before a slow export (an SVG of many points); tests answer it themselves
        self.confirm: Callable[[str], bool] = self.exports.ask_confirm

        c, plots = self.view.controls, self.view.plots
        c.run_requested.connect(lambda: self.run(auto=False))
        c.cancel_requested.connect(self.cancel)
        c.open_dataset_requested.connect(self.interaction.ask_open_dataset)
        c.source_changed.connect(self._on_source_changed)
        c.colour_changed.connect(lambda _k: self.apply_colours())
        c.search_changed.connect(self.interaction.search)
        c.select_mode_toggled.connect(plots.set_select_mode)
        c.clear_selection_requested.connect(lambda: plots.set_selection([]))
        plots.hovered.connect(self.interaction.on_hover)
        plots.point_clicked.connect(self.interaction.on_click)
        plots.selection_made.connect(self.interaction.on_selection)
        self.view.legend.entry_clicked.connect(self.interaction.on_legend)
        ws = self.ws
        ws.model_changed.connect(self._on_data_changed)
        ws.sentences_changed.connect(self._on_loaded_changed)
        ws.activations_changed.connect(self._on_loaded_changed)
        ws.selection_changed.connect(self.interaction.on_ws_selection)
        self._auto = QTimer(self)
        self._auto.setSingleShot(True)
        self._auto.setInterval(250)
        self._auto.timeout.connect(lambda: self.run(auto=True))
        self._actions = self.exports.make_actions()
        QTimer.singleShot(0, self._schedule_warm_up)

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        return self.model.ready

    def _set_ready(self) -> None:
        self.view.controls.set_running(False)
        if not self.model.ready:
            self.model.ready = True
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        return list(self._actions)

    def view_state(self) -> Dict[str, Any]:
        """The view's parameters as JSON values (see docs/guide/projection.md)."""
        return self.report.view_state()

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict (see :meth:`ProjectionReport.restore_view_state`)."""
        self.report.restore_view_state(state)

    def report_figures(self, folder: Path, options: FigureOptions) -> List[Path]:
        return self.report.figures(folder, options)

    def report_tables(self) -> List[ReportTable]:
        return self.report.tables()

    # ---- warm-up ------------------------------------------------------------------------------
    def _schedule_warm_up(self) -> None:
        """Compile umap's kernels on the worker once it is first idle (not before the model)."""
        if self.model.warm_submitted or is_warm() or self.ws.worker.is_stopped():
            return                         # (a timer may still fire after the window closed)
        if self.ws.worker.is_busy() or self._run_imminent():
            self.ws.worker.idle.connect(self._warm_when_idle)
            return
        self.model.warm_submitted = True
        self.ws.worker.submit("Preparing UMAP (one-time compile)", lambda s: warm_up(state=s),
                              lane=Lane.LONG, kind="projection-warmup")

    def _run_imminent(self) -> bool:
        """A projection is about to start (its first UMAP fit then compiles instead)."""
        return self._auto.isActive() or (self.model.dirty and self.isVisible()
                                         and self.ws.all_embedded())

    def _warm_when_idle(self) -> None:
        """The worker went idle: try again once it has stayed idle for a moment. A model load
        ends with the worker idle for an instant before the embedding is queued; the compile
        must not slip in there and hold the first vectors back."""
        if self._run_imminent():
            return
        self.ws.worker.idle.disconnect(self._warm_when_idle)
        QTimer.singleShot(WARM_UP_QUIET_MS, self._schedule_warm_up)

    # ---- data changes -------------------------------------------------------------------------
    def _on_data_changed(self, *_args) -> None:
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

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self.maybe_auto()

    # ---- running ------------------------------------------------------------------------------
    def _request(self):
        """The tokens, their activations (None: embed on the worker) and layers, or a message."""
        ws = self.ws
        if ws.embedder is None or ws.n_layers == 0:
            return "Load a model to project tokens."
        key = self.view.controls.source_key()
        cap = self.view.controls.max_points.value()
        if key == "dataset":
            if self.model.dataset is None:
                return "Open a labelled data set (CoNLL-U, WSD XML or token<TAB>label TSV)."
            return self.model.dataset.sample(cap).compact(), None
        if not ws.all_embedded():
            return None
        self.model.sentence_info = loaded_info(ws)
        if key == "reference":
            return self._reference_request(cap)
        if key == "words":
            words = self.view.controls.word_list()
            if not words:
                return "Type the words to project."
            tokens = word_tokens(ws.tokens, words)
        else:
            tokens = all_tokens(ws.tokens, f"{len(ws.tokens):,} loaded sentences")
        return tokens.sample(cap), list(ws.activations)

    def reference_word(self) -> str:
        return reference_word(self)

    def _reference_request(self, cap: int):
        return reference_request(self, cap)

    def run(self, auto: bool = False) -> None:
        """Project the chosen tokens: PCA at once, then UMAP layer by layer on the worker."""
        m = self.model
        self._auto.stop()
        if self.ws.worker.is_stopped():                 # the window has closed
            return
        try:
            req = self._request()
            m.params = self.view.controls.params()
            weights = (self.view.controls.mix_weights(self.ws.n_layers) if self.ws.n_layers
                       else [])
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
        n = self.ws.n_layers
        layers = [LayerSpec.single(k) for k in range(n)]
        if n > 1:
            layers.append(LayerSpec.mix(weights, self.view.controls.layer_norm.isChecked()))
        m.ready = False
        self.ws.worker.invalidate(GROUP)            # an older run's jobs are stale now
        emb, proj, params = self.ws.embedder, self.projector, m.params
        checksum = self.ws.model_info.checksum if self.ws.model_info is not None else ""
        with_umap = not auto or MIN_UMAP_POINTS <= len(tokens) <= AUTO_UMAP_MAX

        if acts is not None and len(tokens) * acts[0].shape[-1] <= INLINE_PCA_MAX:
            try:                       # milliseconds: draw at once, even while the worker is busy
                pcs = proj.run(acts, tokens, layers, "pca", params, checksum)
            except ElmoError as e:
                self._clear(str(e))
                self._set_ready()
                return
            self._on_pca(tokens, layers, checksum, with_umap, (acts, pcs))
            return

        def job(state):
            a = acts if acts is not None else emb.embed(tokens.sentences, state)
            return a, proj.run(a, tokens, layers, "pca", params, checksum, state)

        self.view.controls.set_running(True)
        self.view.message(f"PCA of {len(tokens):,} tokens…")
        m.job = self.ws.worker.submit(
            "Projection: PCA", job, lane=Lane.LONG, kind=GROUP, on_progress=self._on_progress,
            on_done=lambda r: self._on_pca(tokens, layers, checksum, with_umap, r),
            on_failed=self._on_error)

    def _on_pca(self, tokens, layers, checksum, with_umap, result) -> None:
        """The current run's PCA (an older run's never arrives: the worker drops it)."""
        m, v = self.model, self.view
        acts, projections = result
        m.tokens, m.acts, m.layers, m.checksum = tokens, acts, layers, checksum
        m.shown = {}
        v.plots.set_layers([lay.name for lay in layers])
        info = m.sentence_info
        typed = [i for i in range(len(tokens)) if info.get(tuple(tokens.sentences[
            tokens.sentence[i]]), ("", False))[1]] if self.view.controls.source_key() == \
            "reference" else []
        v.plots.set_typed(typed, tokens.words)
        v.plots.set_select_mode(v.controls.select_button.isChecked())
        self.exports.add_plot_menus()
        self.apply_colours()
        for k, p in enumerate(projections):
            self._draw(k, p)
        self.interaction.search(v.controls.search.text())
        self.interaction.on_ws_selection(self.ws.selection)
        if with_umap:
            m.compiled_here = False
            m.umap_errors = []
            self._umap_step(0)
        elif len(tokens) < MIN_UMAP_POINTS:
            v.message(f"PCA of {len(tokens):,} tokens: below {MIN_UMAP_POINTS} points UMAP's "
                      "neighbourhoods mean nothing, so PCA is shown (press Run UMAP to force it)."
                      + (" Ringed: your sentences." if typed else ""))
            self._set_ready()
        else:
            v.message(f"PCA of {len(tokens):,} tokens shown; press Run UMAP for UMAP.")
            self._set_ready()

    def _umap_step(self, k: int) -> None:
        """UMAP of layer ``k`` of the current run, then the next (one job each, long lane)."""
        m = self.model
        if k >= len(m.layers):
            secs = sum(p.seconds for p in m.shown.values() if p.method == "umap")
            note = (f" PCA kept for {'; '.join(m.umap_errors)}" if m.umap_errors else "")
            self.view.message(f"UMAP of {len(m.tokens):,} tokens done ({secs:.1f} s"
                              f"{', with the one-time compile' if m.compiled_here else ''})."
                              + note)
            self._set_ready()
            return
        layer, tokens, acts, params, checksum = (m.layers[k], m.tokens, m.acts, m.params,
                                                 m.checksum)
        hit = self.projector.cached(tokens, layer, "umap", params, checksum)
        if hit is not None:
            self._draw(k, hit)
            self._umap_step(k + 1)
            return
        proj = self.projector
        total = len(m.layers)

        label = f"UMAP of {layer.name} ({k + 1}/{total}, {len(tokens):,} tokens)"
        m.job_label = label

        def job(state):
            state.report(0, 1, label)
            try:
                return proj.umap(acts, tokens, layer, params, checksum, state)
            except InputError as e:          # too few distinct vectors: a result, not a failure
                return str(e)

        self.view.controls.set_running(True)
        if not is_warm():
            m.compiled_here = True
            self.view.message("UMAP: compiling its kernels once for this session (10–40 s)…")
        m.job = self.ws.worker.submit(
            f"Projection: UMAP {layer.name}", job, lane=Lane.LONG, kind=GROUP,
            on_progress=self._on_progress,
            on_done=lambda p: (self._on_umap_error(k, p) if isinstance(p, str)
                               else (self._draw(k, p), self._umap_step(k + 1))),
            on_failed=lambda msg: self._on_umap_error(k, msg))

    def cancel(self) -> None:
        """Stop the running projection; what is drawn stays."""
        self.ws.worker.invalidate(GROUP)
        self.view.message("Cancelled; the plots keep what was drawn.")
        self._set_ready()

    def _on_umap_error(self, k: int, message: str) -> None:
        """One layer failed (e.g. too few distinct vectors): keep its PCA, go on with the next."""
        m = self.model
        log.info("UMAP of %s failed: %s", m.layers[k].name, message)
        m.umap_errors.append(f"{m.layers[k].name}: {message}")
        self._umap_step(k + 1)

    def _on_error(self, message: str) -> None:
        self.view.message(f"Projection failed: {message}")
        self._set_ready()

    def _on_progress(self, done: int, total: int, message: str) -> None:
        if message:
            epoch = message.startswith("UMAP epoch")
            self.view.message(f"{self.model.job_label}: {message[5:]}" if epoch else message)

    # ---- drawing --------------------------------------------------------------------------------
    def _draw(self, k: int, p: Projection) -> None:
        self.model.shown[k] = p
        self.view.draw(k, p)

    def _clear(self, message: str) -> None:
        self.ws.worker.invalidate(GROUP)             # a running job's result would redraw
        self.model.clear()
        self.view.clear(message)

    def colour_categories(self):
        """``(codes, legend)`` of the drawn tokens for the colour-by choice."""
        return colour_categories(self)

    def apply_colours(self, *_args) -> None:
        if self.model.tokens is None:
            return
        codes, legend = self.colour_categories()
        self.model.legend_codes = codes
        self.view.set_colours(codes, legend)
