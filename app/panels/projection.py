"""The projection view: UMAP of the tokens, one plot per layer, side by side and linked.

PCA is drawn at once; UMAP then runs on the worker one layer at a time (group "projection"), each
plot switching from PCA to UMAP as its layer completes. umap's numba kernels are compiled once per
process by a warm-up job submitted once the worker has stayed idle for a moment (never on the GUI
thread, never between a model load and the embedding it triggers).
Hover shows a token in its sentence, box selection (Shift+drag) in one plot highlights the same
tokens in all, the legend colours by word, label or sentence, and the search box marks a token.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Callable, Dict, List, Optional

import numpy as np
from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QSplitter, QVBoxLayout, QWidget

from elmo_explorer.panels.projection_controls import LegendList, ProjectionControls
from elmo_explorer.panels.projection_export import ProjectionExports
from elmo_explorer.panels.projection_interaction import ProjectionInteraction
from elmo_explorer.panels.projection_plots import ProjectionPlots, categories
from elmo_explorer.panels.projection_report import ProjectionReport
from elmo_engine.errors import ElmoError
from elmo_engine.analysis.projection import (LayerSpec, Projection, Projector, TokenSet, UmapParams,
                                             all_tokens, is_warm, warm_up, word_tokens)

log = logging.getLogger(__name__)

AUTO_UMAP_MAX = 5_000          # with more tokens an automatic run stops at PCA (press Run)
INLINE_PCA_MAX = 400_000       # tokens × dims up to which PCA runs on the GUI thread (~10 ms)
GROUP = "projection"
WARM_UP_QUIET_MS = 1500        # the worker stays idle this long before the UMAP compile starts


class ProjectionPanel(ProjectionInteraction, ProjectionExports, ProjectionReport, QWidget):
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
        self.tokens: Optional[TokenSet] = None
        self.acts: Optional[list] = None
        self.layers: List[LayerSpec] = []
        self.shown: Dict[int, Projection] = {}
        self.dataset: Optional[TokenSet] = None
        self.dataset_path: Optional[Path] = None
        self.params = UmapParams()
        self.confirm: Callable[[str], bool] = self._ask_confirm
        self._checksum = ""
        self._gen = 0
        self._job: Optional[int] = None
        self._dirty = True
        self._ready = False
        self._current_plot = 0
        self._warm_submitted = False
        self._legend_codes: Optional[np.ndarray] = None
        self._job_label = ""
        self._compiled_here = False
        self._umap_errors: List[str] = []

        self.controls = ProjectionControls(self)
        self.plots = ProjectionPlots(self)
        self.legend = LegendList(self)
        self.info = QLabel("Hover a point to see its token in context; Shift+drag to select.")
        self.info.setWordWrap(True)
        self.info.setTextFormat(Qt.TextFormat.PlainText)
        self.info.setMinimumHeight(self.info.fontMetrics().height() * 2 + 4)
        split = QSplitter(Qt.Orientation.Horizontal)
        split.addWidget(self.plots)
        split.addWidget(self.legend)
        split.setStretchFactor(0, 1)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.controls)
        lay.addWidget(split, 1)
        bottom = QHBoxLayout()
        bottom.setContentsMargins(4, 0, 4, 2)
        bottom.addWidget(self.info, 3)
        bottom.addWidget(self.controls.status, 2)
        self.controls.status.setAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
        lay.addLayout(bottom)

        c = self.controls
        c.run_requested.connect(lambda: self.run(auto=False))
        c.cancel_requested.connect(self.cancel)
        c.open_dataset_requested.connect(self.ask_open_dataset)
        c.source_changed.connect(self._on_source_changed)
        c.colour_changed.connect(lambda _k: self._apply_colours())
        c.search_changed.connect(self.search)
        c.select_mode_toggled.connect(self.plots.set_select_mode)
        c.clear_selection_requested.connect(lambda: self.plots.set_selection([]))
        self.plots.hovered.connect(self._on_hover)
        self.plots.point_clicked.connect(self._on_click)
        self.plots.selection_made.connect(self._on_selection)
        self.legend.entry_clicked.connect(self._on_legend)
        ws = self.ws
        ws.model_changed.connect(self._on_data_changed)
        ws.sentences_changed.connect(self._on_loaded_changed)
        ws.activations_changed.connect(self._on_loaded_changed)
        ws.selection_changed.connect(self._on_ws_selection)
        ws.worker.job_progress.connect(self._on_progress)
        self._auto = QTimer(self)
        self._auto.setSingleShot(True)
        self._auto.setInterval(250)
        self._auto.timeout.connect(lambda: self.run(auto=True))
        self._actions = self._make_actions()
        QTimer.singleShot(0, self._schedule_warm_up)

    # ---- contract -------------------------------------------------------------------------------
    def is_ready(self) -> bool:
        return self._ready

    def _set_ready(self) -> None:
        self.controls.set_running(False)
        if not self._ready:
            self._ready = True
            self.ready.emit()

    # ---- warm-up ------------------------------------------------------------------------------
    def _schedule_warm_up(self) -> None:
        """Compile umap's kernels on the worker once it is first idle (not before the model)."""
        if self._warm_submitted or is_warm():
            return
        if self.ws.worker.is_busy() or self._run_imminent():
            self.ws.worker.idle.connect(self._warm_when_idle)
            return
        self._warm_submitted = True
        self.ws.worker.submit("Preparing UMAP (one-time compile)", lambda s: warm_up(state=s),
                              group="projection-warmup")

    def _run_imminent(self) -> bool:
        """A projection is about to start (its first UMAP fit then compiles instead)."""
        return self._auto.isActive() or (self._dirty and self.isVisible()
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
        self._dirty = True
        self._ready = False
        self._maybe_auto()

    def _on_loaded_changed(self, *_args) -> None:
        if self.controls.source_key() != "dataset":
            self._on_data_changed()

    def _on_source_changed(self, key: str) -> None:
        if key == "dataset" and self.dataset is None:
            return
        self._dirty = True
        if key != "words" or self.controls.word_list():
            self._maybe_auto()

    def _maybe_auto(self) -> None:
        if self._dirty and self.isVisible():
            self._auto.start()

    def showEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().showEvent(event)
        self._maybe_auto()

    # ---- running ------------------------------------------------------------------------------
    def _request(self):
        """The tokens, their activations (None: embed on the worker) and layers, or a message."""
        ws = self.ws
        if ws.embedder is None or ws.n_layers == 0:
            return "Load a model to project tokens."
        key = self.controls.source_key()
        cap = self.controls.max_points.value()
        if key == "dataset":
            if self.dataset is None:
                return "Open a labelled data set (CoNLL-U, WSD XML or token<TAB>label TSV)."
            return self.dataset.sample(cap).compact(), None
        if not ws.all_embedded():
            return None
        if key == "words":
            words = self.controls.word_list()
            if not words:
                return "Type the words to project."
            tokens = word_tokens(ws.tokens, words)
        else:
            tokens = all_tokens(ws.tokens, f"{len(ws.tokens):,} loaded sentences")
        return tokens.sample(cap), list(ws.activations)

    def run(self, auto: bool = False) -> None:
        """Project the chosen tokens: PCA at once, then UMAP layer by layer on the worker."""
        self._auto.stop()
        try:
            req = self._request()
            self.params = self.controls.params()
            weights = self.controls.mix_weights(self.ws.n_layers) if self.ws.n_layers else []
        except ElmoError as e:
            self._message(str(e))
            self._set_ready()
            return
        if req is None:
            self._message("Waiting for the sentences to be embedded…")
            return
        self._dirty = False
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
            layers.append(LayerSpec.mix(weights))
        self._ready = False
        self._gen += 1
        self.ws.worker.cancel_group(GROUP)          # an older run's jobs are stale now
        gen, emb, proj, params = self._gen, self.ws.embedder, self.projector, self.params
        checksum = self.ws.model_info.checksum if self.ws.model_info is not None else ""
        with_umap = not auto or len(tokens) <= AUTO_UMAP_MAX

        if acts is not None and len(tokens) * acts[0].shape[-1] <= INLINE_PCA_MAX:
            try:                       # milliseconds: draw at once, even while the worker is busy
                pcs = proj.run(acts, tokens, layers, "pca", params, checksum)
            except ElmoError as e:
                self._clear(str(e))
                self._set_ready()
                return
            self._on_pca(gen, tokens, layers, checksum, with_umap, (acts, pcs))
            return

        def job(state):
            a = acts if acts is not None else emb.embed(tokens.sentences, state)
            return a, proj.run(a, tokens, layers, "pca", params, checksum, state)

        self.controls.set_running(True)
        self._message(f"PCA of {len(tokens):,} tokens…")
        self._job = self.ws.worker.submit(
            "Projection: PCA", job, group=GROUP,
            on_result=lambda r: self._on_pca(gen, tokens, layers, checksum, with_umap, r),
            on_error=self._on_error)

    def _on_pca(self, gen, tokens, layers, checksum, with_umap, result) -> None:
        if gen != self._gen:
            return
        acts, projections = result
        self.tokens, self.acts, self.layers, self._checksum = tokens, acts, layers, checksum
        self.shown = {}
        self.plots.set_layers([lay.name for lay in layers])
        self.plots.set_select_mode(self.controls.select_button.isChecked())
        self._add_plot_menus()
        self._apply_colours()
        for k, p in enumerate(projections):
            self._draw(k, p)
        self.search(self.controls.search.text())
        self._on_ws_selection(self.ws.selection)
        if with_umap:
            self._compiled_here = False
            self._umap_errors = []
            self._umap_step(gen, 0)
        else:
            self._message(f"PCA of {len(tokens):,} tokens shown; press Run UMAP for UMAP.")
            self._set_ready()

    def _umap_step(self, gen: int, k: int) -> None:
        if gen != self._gen:
            return
        if k >= len(self.layers):
            secs = sum(p.seconds for p in self.shown.values() if p.method == "umap")
            note = (f" PCA kept for {'; '.join(self._umap_errors)}" if self._umap_errors else "")
            self._message(f"UMAP of {len(self.tokens):,} tokens done ({secs:.1f} s"
                          f"{', with the one-time compile' if self._compiled_here else ''})."
                          + note)
            self._set_ready()
            return
        layer, tokens, acts, params, checksum = (self.layers[k], self.tokens, self.acts,
                                                 self.params, self._checksum)
        hit = self.projector.cached(tokens, layer, "umap", params, checksum)
        if hit is not None:
            self._draw(k, hit)
            self._umap_step(gen, k + 1)
            return
        proj = self.projector
        total = len(self.layers)

        label = f"UMAP of {layer.name} ({k + 1}/{total}, {len(tokens):,} tokens)"
        self._job_label = label

        def job(state):
            state.report(0, 1, label)
            return proj.umap(acts, tokens, layer, params, checksum, state)

        self.controls.set_running(True)
        if not is_warm():
            self._compiled_here = True
            self._message("UMAP: compiling its kernels once for this session (10–40 s)…")
        self._job = self.ws.worker.submit(
            f"Projection: UMAP {layer.name}", job, group=GROUP,
            on_result=lambda p: (self._draw(k, p), self._umap_step(gen, k + 1)),
            on_error=lambda m: self._on_umap_error(gen, k, m))

    def cancel(self) -> None:
        """Stop the running projection; what is drawn stays."""
        self.ws.worker.cancel_group(GROUP)
        self._gen += 1
        self._message("Cancelled; the plots keep what was drawn.")
        self._set_ready()

    def _on_umap_error(self, gen: int, k: int, message: str) -> None:
        """One layer failed (e.g. too few distinct vectors): keep its PCA, go on with the next."""
        if gen != self._gen:
            return
        log.info("UMAP of %s failed: %s", self.layers[k].name, message)
        self._umap_errors.append(f"{self.layers[k].name}: {message}")
        self._umap_step(gen, k + 1)

    def _on_error(self, message: str) -> None:
        self._message(f"Projection failed: {message}")
        self._set_ready()

    def _on_progress(self, job_id: int, done: int, total: int, message: str) -> None:
        if job_id == self._job and message:
            epoch = message.startswith("UMAP epoch")
            self._message(f"{self._job_label}: {message[5:]}" if epoch else message)

    # ---- drawing --------------------------------------------------------------------------------
    def _draw(self, k: int, p: Projection) -> None:
        self.shown[k] = p
        if p.method == "pca":
            ex = p.explained or (0.0, 0.0)
            title = f"{p.layer.name} · PCA ({100 * ex[0]:.0f}% + {100 * ex[1]:.0f}%)"
        else:
            title = f"{p.layer.name} · UMAP"
        self.plots.set_coords(k, p.coords, title)

    def _clear(self, message: str) -> None:
        self._gen += 1
        self.tokens, self.acts, self.shown = None, None, {}
        self.plots.set_layers([])
        self.legend.set_entries([])
        self._message(message)

    def _message(self, text: str) -> None:
        self.controls.status.setText(text)

    def _colour_categories(self):
        """``(codes, legend)`` of the drawn tokens for the colour-by choice (see categories)."""
        t = self.tokens
        by = self.controls.colour_by()
        if by == "label" and t.labels is not None:
            return categories([t.label_of(i) or "(none)" for i in range(len(t))])
        if by == "sentence":
            return categories([f"{s + 1}: {' '.join(t.sentences[s][:6])}"
                               for s in t.sentence.tolist()], by_frequency=False)
        return categories(t.words)

    def _apply_colours(self, *_args) -> None:
        if self.tokens is None:
            return
        codes, legend = self._colour_categories()
        self._legend_codes = codes
        self.plots.set_codes(codes)
        self.legend.set_entries(legend)
