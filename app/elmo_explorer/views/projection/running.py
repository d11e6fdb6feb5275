"""Running a projection: PCA of every layer at once (on the GUI thread when it is small, else on
the worker's long lane), then UMAP one layer at a time on the long lane, each from the
projector's cache when the same tokens, layer, settings and model were projected before.

:class:`ProjectionRunner` takes a :class:`RunRequest` (values captured on the GUI thread), writes
the run's part of the :class:`~.model.ProjectionModel` (tokens, activations, layers, settings)
and says what happened through its signals; it touches no widget. The panel
(:class:`~elmo_explorer.views.projection.controller.ProjectionPanel`) builds the request from
the controls and draws what the signals carry.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, List, Optional, Sequence, Tuple

from PySide6.QtCore import QObject, Signal

from elmo_engine.analysis.projection import (LayerSpec, Projection, Projector, TokenSet,
                                             UmapParams, is_warm)
from elmo_engine.errors import InputError
from elmo_explorer.state.worker import JobGroup, Lane
from elmo_explorer.views.projection.model import ProjectionModel

log = logging.getLogger(__name__)

AUTO_UMAP_MAX = 5_000          # with more tokens an automatic run stops at PCA (press Run)
MIN_UMAP_POINTS = 50           # below this UMAP means nothing: PCA, with a message
INLINE_PCA_MAX = 400_000       # tokens × dims up to which PCA runs on the GUI thread (~10 ms)
RUN = "run"                    # the job kind of a run (a newer run makes the older stale)


def wants_umap(n_tokens: int, auto: bool) -> bool:
    """Whether a run of ``n_tokens`` goes on from PCA to UMAP: always when asked for (``auto``
    False), automatically only between :data:`MIN_UMAP_POINTS` and :data:`AUTO_UMAP_MAX`."""
    return not auto or MIN_UMAP_POINTS <= n_tokens <= AUTO_UMAP_MAX


def run_layers(n_layers: int, weights: Sequence[float], layer_norm: bool) -> List[LayerSpec]:
    """The plots of a run: layer 0 … L, then (with more than one layer) their scalar mix."""
    layers = [LayerSpec.single(k) for k in range(n_layers)]
    if n_layers > 1:
        layers.append(LayerSpec.mix(list(weights), layer_norm))
    return layers


@dataclass(frozen=True)
class RunRequest:
    """One projection to run, as captured on the GUI thread.

    Attributes
    ----------
    tokens : the token set to project
    acts : its sentences' activations (None: ``embedder`` embeds them on the worker)
    embedder : the workspace's embedder
    layers : one plot each (layer 0 … L, then the mix)
    params : the UMAP settings
    checksum : the model's checksum (part of the projector's cache key)
    with_umap : go on from PCA to UMAP (:func:`wants_umap`)
    """

    tokens: TokenSet
    acts: Optional[list]
    embedder: Any
    layers: Tuple[LayerSpec, ...]
    params: UmapParams
    checksum: str
    with_umap: bool


class ProjectionRunner(QObject):
    """Runs one projection at a time in the view's job group ``jobs``; a new run makes the
    older one's jobs stale (their results are dropped, never drawn).

    Signals
    -------
    pca_done(request, projections) : the run's PCA of every layer; the model holds the run's
        tokens, activations and layers now. The receiver draws them, then calls :meth:`umap`
        when ``request.with_umap``.
    projected(k, projection) : plot ``k``'s UMAP (computed, or from the cache)
    job_submitted() : a job of the run is queued
    message(text) : what the run is doing or did, for the status line
    finished() : the run ended (UMAP of the last layer done, or a job failed)
    """

    pca_done = Signal(object, object)
    projected = Signal(int, object)
    job_submitted = Signal()
    message = Signal(str)
    finished = Signal()
    cancelled = Signal()              # a run's job cancelled (Esc, the status bar's Cancel)

    def __init__(self, jobs: JobGroup, model: ProjectionModel, parent=None):
        super().__init__(parent)
        self.jobs, self.model = jobs, model
        self.projector = Projector()

    def stop(self) -> None:
        """Make the running run's jobs stale (what was drawn stays)."""
        self.jobs.invalidate(RUN)

    def start(self, req: RunRequest) -> None:
        """Start ``req`` after stopping the older run: a small PCA runs here at once (raising
        :class:`~elmo_engine.errors.ElmoError` when it cannot), a larger one on the worker."""
        self.stop()
        self.model.params = req.params
        proj, layers = self.projector, list(req.layers)
        # the width from a sentence that holds a point (those that hold none are None)
        width = next((a.shape[-1] for a in req.acts or () if a is not None), 0)
        if req.acts is not None and len(req.tokens) * width <= INLINE_PCA_MAX:
            # milliseconds: draw at once, even while the worker is busy
            pcs = proj.run(req.acts, req.tokens, layers, "pca", req.params, req.checksum)
            self._on_pca(req, (req.acts, pcs))
            return

        def job(state):
            a = req.acts if req.acts is not None else req.embedder.embed(req.tokens.sentences,
                                                                         state)
            return a, proj.run(a, req.tokens, layers, "pca", req.params, req.checksum, state)

        self.job_submitted.emit()
        self.message.emit(f"PCA of {len(req.tokens):,} tokens…")
        self.jobs.submit(
            "Projection: PCA", job, lane=Lane.LONG, kind=RUN, on_progress=self._on_progress,
            on_done=lambda r: self._on_pca(req, r), on_failed=self._on_error,
            on_cancelled=self.cancelled.emit)

    def _on_pca(self, req: RunRequest, result) -> None:
        """The current run's PCA (an older run's never arrives: the worker drops it)."""
        m = self.model
        acts, projections = result
        m.tokens, m.acts, m.layers, m.checksum = req.tokens, acts, list(req.layers), req.checksum
        m.shown = {}
        self.pca_done.emit(req, list(projections))

    def umap(self) -> None:
        """UMAP of every layer of the current run, one after the other."""
        self.model.compiled_here = False
        self.model.umap_errors = []
        self._umap_step(0)

    def _umap_step(self, k: int) -> None:
        """UMAP of layer ``k`` of the current run, then the next (one job each, long lane)."""
        m = self.model
        if k >= len(m.layers):
            secs = sum(p.seconds for p in m.shown.values() if p.method == "umap")
            note = (f" PCA kept for {'; '.join(m.umap_errors)}" if m.umap_errors else "")
            self.message.emit(f"UMAP of {len(m.tokens):,} tokens done ({secs:.1f} s"
                              f"{', with the one-time compile' if m.compiled_here else ''})."
                              + note)
            self.finished.emit()
            return
        layer, tokens, acts, params, checksum = (m.layers[k], m.tokens, m.acts, m.params,
                                                 m.checksum)
        hit = self.projector.cached(tokens, layer, "umap", params, checksum)
        if hit is not None:
            self._on_umap(k, hit)
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

        self.job_submitted.emit()
        if not is_warm():
            m.compiled_here = True
            self.message.emit("UMAP: compiling its kernels once for this session (10–40 s)…")
        self.jobs.submit(
            f"Projection: UMAP {layer.name}", job, lane=Lane.LONG, kind=RUN,
            on_progress=self._on_progress,
            on_done=lambda p: (self._on_umap_error(k, p) if isinstance(p, str)
                               else self._on_umap(k, p)),
            on_failed=lambda msg: self._on_umap_error(k, msg), on_cancelled=self.cancelled.emit)

    def _on_umap(self, k: int, p: Projection) -> None:
        self.projected.emit(k, p)
        self._umap_step(k + 1)

    def _on_umap_error(self, k: int, message: str) -> None:
        """One layer failed (e.g. too few distinct vectors): keep its PCA, go on with the next."""
        m = self.model
        log.info("UMAP of %s failed: %s", m.layers[k].name, message)
        m.umap_errors.append(f"{m.layers[k].name}: {message}")
        self._umap_step(k + 1)

    def _on_error(self, message: str) -> None:
        self.message.emit(f"Projection failed: {message}")
        self.finished.emit()

    def _on_progress(self, done: int, total: int, message: str) -> None:
        if message:
            epoch = message.startswith("UMAP epoch")
            self.message.emit(f"{self.model.job_label}: {message[5:]}" if epoch else message)
