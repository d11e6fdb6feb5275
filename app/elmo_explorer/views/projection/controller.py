"""The projection view: UMAP of the tokens, one plot per layer, side by side and linked.

PCA is drawn at once; UMAP then runs on the worker one layer at a time, each plot switching
from PCA to UMAP as its layer completes (the one-time compile: :mod:`.warmup`). Hover shows a
token in its sentence, Shift+drag in one plot selects the same tokens in all, the legend colours
by word, label or sentence, the search box marks a token.

Model, view, controller: :class:`~.model.ProjectionModel` (what is projected and drawn; no
Qt), :class:`~.view.ProjectionView` (controls, plots, legend, info line) and
:class:`ProjectionPanel`, which runs the projections on the worker's long lane and wires the
linked interaction. Its sources, exports and report parts are functions of values
(:mod:`.sources`, :mod:`.export`, :mod:`.report`).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
import numpy as np
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.analysis.projection import LayerSpec, Projection, Projector, TokenSet, is_warm
from elmo_engine.errors import ElmoError, InputError
from elmo_engine.io.report import ReportTable
from elmo_explorer.common.figure_export import FigureOptions, panel_figure_options, save_figure
from elmo_explorer.state.worker import JobHandle, Lane
from elmo_explorer.state.workspace import TokenRef
from elmo_explorer.views.projection import export, report
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.sources import (ask_dataset_path, colour_categories,
                                                     dataset_job, request)
from elmo_explorer.views.projection.view import ProjectionView, describe
from elmo_explorer.views.projection.warmup import UmapWarmUp
from elmo_explorer.views.protocol import PanelDefaults

log = logging.getLogger(__name__)

AUTO_UMAP_MAX = 5_000          # with more tokens an automatic run stops at PCA (press Run)
MIN_UMAP_POINTS = 50           # below this UMAP means nothing: PCA, with a message
INLINE_PCA_MAX = 400_000       # tokens × dims up to which PCA runs on the GUI thread (~10 ms)
GROUP = "projection"


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
        self.warm = UmapWarmUp(workspace.worker, self._run_imminent, self)
        #: asked before a slow export (an SVG of many points); tests answer it themselves
        self.confirm: Callable[[str], bool] = lambda message: export.confirm(self, message)

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
        self._actions: List[QAction] = []
        for text, method in export.ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _checked=False, m=method: getattr(self, m)())
            self._actions.append(a)
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
        """The view's parameters as JSON values (docs/guide/projection.md)."""
        path = self.model.dataset_path
        return self.view.controls.state(str(path) if path is not None else None)

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict (invalid keys ignored); the scheduled automatic run
        recomputes, a data set file is read on the worker."""
        if not isinstance(state, dict):
            return
        c, m = self.view.controls, self.model
        c.apply_state(state)
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

    def report_figures(self, folder: Path, options: Optional[FigureOptions] = None) -> List[Path]:
        if self.model.tokens is None:
            return []
        return report.report_figures(self.model, self.colour_categories(),
                                     self.view.controls.colour_by(), folder,
                                     options or panel_figure_options(self),
                                     typed=self.view.plots.typed)

    def report_tables(self) -> List[ReportTable]:
        return report.report_tables(self.model, self.view.controls.settings_text())

    def grid_figure(self, plots=None):
        """The drawn plots as one matplotlib figure (:func:`.report.grid_figure`)."""
        return report.grid_figure(self.model, self.colour_categories(),
                                  self.view.controls.colour_by(), plots,
                                  typed=self.view.plots.typed)

    # ---- warm-up ------------------------------------------------------------------------------
    def _schedule_warm_up(self) -> None:
        self.warm.schedule()

    def _run_imminent(self) -> bool:
        """A projection is about to start (its first UMAP fit then compiles instead)."""
        return self._auto.isActive() or (self.model.dirty and self.isVisible()
                                         and self.ws.all_embedded())

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

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.maybe_auto()

    # ---- running ------------------------------------------------------------------------------
    def run(self, auto: bool = False) -> None:
        """Project the chosen tokens: PCA at once, then UMAP layer by layer on the worker."""
        m = self.model
        self._auto.stop()
        if self.ws.worker.is_stopped():                 # the window has closed
            return
        try:
            c = self.view.controls
            req = request(self.ws, m, c.source_key(), c.max_points.value(), c.word_list())
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
        v.add_plot_menus(self.ask_export_plot, self.ask_export_tensorboard)
        self.apply_colours()
        for k, p in enumerate(projections):
            self._draw(k, p)
        self.search(v.controls.search.text())
        self.on_ws_selection(self.ws.selection)
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
        label = f"UMAP of {layer.name} ({k + 1}/{len(m.layers)}, {len(tokens):,} tokens)"
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
        return colour_categories(self.model.tokens, self.view.controls.colour_by(),
                                 self.model.sentence_info)

    def apply_colours(self, *_args) -> None:
        if self.model.tokens is None:
            return
        codes, legend = self.colour_categories()
        self.model.legend_codes = codes
        self.view.set_colours(codes, legend)

    # ---- linked interaction: search, hover, click, box and legend selection -------------------
    def search(self, text: str) -> np.ndarray:
        """Mark every point whose token is ``text`` (case-insensitive) in all plots."""
        return self.view.show_search(self.model.tokens, text)

    def on_hover(self, k: int, i: int) -> None:
        if k >= 0:
            self.model.current_plot = k
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

        return self.ws.worker.submit(
            f"Reading {path.name}", dataset_job(path), kind="projection-data", on_done=done,
            on_failed=lambda m: self.view.message(f"Cannot open: {m}"))

    # ---- exports (export_*: no dialogs, for tests and scripts; ask_*: dialogs) ------------------
    def export_plot(self, k: int, path) -> Optional[Path]:
        """Write plot ``k`` as PNG/SVG/PDF (by extension); None when the user declines."""
        return self._export_figure([k], path)

    def export_all(self, path) -> Optional[Path]:
        """Write every drawn plot as one grid figure (PNG/SVG/PDF by extension)."""
        return self._export_figure(None, path)

    def _export_figure(self, plots, path) -> Optional[Path]:
        path, m = Path(path), self.model
        question = export.svg_warning(path, 0 if m.tokens is None else len(m.tokens))
        if question is not None and not self.confirm(question):
            return None
        if m.tokens is None or not m.shown:
            raise LookupError("nothing to export yet: no projection is drawn")
        return save_figure(self.grid_figure(plots), path, panel_figure_options(self))[0]

    def export_csv(self, path, on_done: Optional[Callable] = None) -> JobHandle:
        """Write the drawn coordinates of every plot as CSV (on the worker)."""
        return self.ws.worker.submit(
            "Exporting coordinates", export.coordinates_job(path, self.model.tokens,
                                                            self.model.drawn()),
            on_done=on_done, on_failed=self._export_failed)

    def export_tensorboard(self, folder, k: int, on_done: Optional[Callable] = None) -> JobHandle:
        """Write ``vectors.tsv`` + ``metadata.tsv`` of plot ``k``'s layer (on the worker)."""
        m = self.model
        return self.ws.worker.submit(
            "Exporting vectors", export.tensorboard_job(folder, m.tokens, m.acts, m.layers[k]),
            on_done=on_done, on_failed=self._export_failed)

    def _export_failed(self, message: str) -> None:
        self.view.message(f"Export failed: {message}")

    def _has_plot(self) -> bool:
        if self.model.tokens is None or not self.model.shown:
            self.view.message("Nothing to export yet: run a projection first.")
            return False
        return True

    def _plot_index(self, k: Optional[int]) -> int:
        return min(self.model.current_plot if k is None else k, len(self.view.plots.plots) - 1)

    def ask_export_all(self) -> None:
        if self._has_plot():
            export.ask_and_write_image(self, "Export the projection plots", self.export_all,
                                       self.view.message)

    def ask_export_plot(self, k: Optional[int] = None) -> None:
        if self._has_plot():
            k = self._plot_index(k)
            export.ask_and_write_image(self, f"Export the {self.model.layers[k].name} plot",
                                       lambda p: self.export_plot(k, p), self.view.message)

    def ask_export_csv(self) -> None:
        if self._has_plot() and (path := export.ask_csv_path(self)):
            self.export_csv(path, lambda p: self.view.message(f"Saved {p}"))

    def ask_export_tensorboard(self, k: Optional[int] = None) -> None:
        if not self._has_plot():
            return
        k = self._plot_index(k)
        name = self.model.layers[k].name
        folder = export.ask_folder(self, name)
        if folder:
            self.export_tensorboard(folder, k, lambda r: self.view.message(
                f"Saved {name} vectors: {r[0]} and {r[1]}"))
