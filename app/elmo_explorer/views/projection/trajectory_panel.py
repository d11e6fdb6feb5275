"""The Projection view's Trajectories tab: the Maps tab's tokens followed from layer to layer in
one aligned frame (issue 42).

The layouts are computed on the worker (the view's job group, kind ``trajectories``; progress
and cancel as the maps), by
:func:`~elmo_engine.analysis.projection.aligned.align_layers`, with the kNN change between two of
the layers (:func:`~elmo_engine.analysis.projection.knn_change.knn_changes`). A slider and a
play button morph the points between layers (linear interpolation of the aligned positions);
trails follow chosen tokens; the animation is exported as a GIF and as PNG frames
(:mod:`elmo_engine.analysis.projection.animation`) on the worker.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import numpy as np
from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_explorer.common.save_dialog import ask_save_path, existing_folder, start_dir

from elmo_engine.analysis.projection.aligned import AlignMethod, align_layers, aligned_features
from elmo_engine.analysis.projection import Projector
from elmo_engine.analysis.projection.knn_change import knn_changes
from elmo_engine.errors import ElmoError
from elmo_explorer.state.worker import JobGroup, JobHandle, Lane
from elmo_explorer.views.palette import PALETTE
from elmo_explorer.views.projection.model import ProjectionModel
from elmo_explorer.views.projection.trajectory_model import (METHODS, SEQUENCE_KEYS,
                                                             TICKS_PER_LAYER, TrajectoryModel,
                                                             TrajectoryRequest,
                                                             TrajectorySettings, layer_sequences)
from elmo_explorer.views.projection.trajectory_view import TrajectoryView

KIND, EXPORT_KIND = "trajectories", "trajectories-export"
PLAY_INTERVAL_MS = 40              # 25 frames per second while playing
PLAY_TICKS_PER_FRAME = 3           # a layer in ~1.3 s
#: where the frames go inside a chosen folder that holds other things (never written over)
FRAMES_SUBFOLDER = "trajectory-frames"


class TrajectoryPanel(QWidget):
    """The Trajectories tab of the Projection view.

    Signals
    -------
    computed() : the layouts of the current request are drawn
    exported(object) : an export finished; the list of paths written
    """

    computed = Signal()
    exported = Signal(object)

    def __init__(self, maps: ProjectionModel, jobs: JobGroup, n_layers, parent=None):
        super().__init__(parent)
        self.maps, self.jobs, self.n_layers = maps, jobs, n_layers   # n_layers(): the model's
        self.model = TrajectoryModel()
        #: the maps' projector: Procrustes of the per-layer maps reuses the maps drawn there
        self.projector: Optional[Projector] = None
        self.view = v = TrajectoryView(self)
        #: settings restored before the model's layers were known (see apply_settings)
        self._waiting: Optional[TrajectorySettings] = None
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(v)
        self._timer = QTimer(self)
        self._timer.setInterval(PLAY_INTERVAL_MS)
        self._timer.timeout.connect(self._advance)
        v.compute.clicked.connect(self.compute)
        v.cancel.clicked.connect(self.cancel)
        v.sequence.currentIndexChanged.connect(lambda _i: self._on_sequence())
        v.method.currentIndexChanged.connect(lambda _i: self._on_method())
        v.slider.valueChanged.connect(self.set_ticks)
        v.play.toggled.connect(self.set_playing)
        v.trail_word.returnPressed.connect(lambda: self.trail_word(v.trail_word.text()))
        v.clear_trails.clicked.connect(lambda: self.set_trails([]))
        v.changes.cellClicked.connect(self._on_change_row)
        v.map.point_clicked.connect(self._on_point_clicked)
        v.map.hovered.connect(self._on_hover)
        v.export_gif.clicked.connect(self.ask_export_gif)
        v.export_frames.clicked.connect(self.ask_export_frames)
        self.refresh_choices()

    # ---- choices ------------------------------------------------------------------------------
    def refresh_choices(self) -> None:
        """The layer sequences for the model's number of layers; the chosen reference and pair
        stay where they still exist, and settings restored before there were layers to choose
        from are applied now."""
        v = self.view
        kept = (v.reference.currentIndex(), v.pair_a.currentIndex(), v.pair_b.currentIndex())
        seqs = layer_sequences(self.n_layers())
        v.set_sequences([name for name, _ in seqs])
        self._on_sequence()
        n = v.reference.count()
        if min(kept) >= 0 and max(kept) < n:
            for box, i in zip((v.reference, v.pair_a, v.pair_b), kept):
                box.setCurrentIndex(i)
        if self._waiting is not None and v.sequence.count():
            wanted, self._waiting = self._waiting, None
            self.apply_settings(wanted)

    def _layers(self):
        seqs = layer_sequences(self.n_layers())
        i = self.view.sequence.currentIndex()
        return seqs[i][1] if 0 <= i < len(seqs) else ()

    def _on_sequence(self) -> None:
        self.view.set_layer_names([lay.name for lay in self._layers()])

    def _on_method(self) -> None:
        choice = METHODS[self.view.method.currentIndex()]
        self.view.reference.setEnabled(choice.method is AlignMethod.PROCRUSTES)

    # ---- saved with a workspace --------------------------------------------------------------
    def settings(self) -> TrajectorySettings:
        """The choices as a workspace saves them (restored ones still waiting for a model's
        layers as they were restored)."""
        if self._waiting is not None:
            return self._waiting
        v = self.view
        seq = v.sequence.currentIndex()
        return TrajectorySettings(
            method=METHODS[max(0, v.method.currentIndex())].key,
            sequence=SEQUENCE_KEYS[seq] if 0 <= seq < len(SEQUENCE_KEYS) else SEQUENCE_KEYS[0],
            reference=v.reference.currentIndex() if v.reference.count() else None,
            k=v.k.value(),
            pair=((v.pair_a.currentIndex(), v.pair_b.currentIndex()) if v.pair_a.count()
                  else None),
            trail=v.trail_word.text())

    def apply_settings(self, s: TrajectorySettings) -> None:
        """Set the controls to ``s`` (a position past the sequence's layers is ignored);
        the trail word is typed into its box and trails once Compute has drawn the layouts.
        Without layers to choose from (no model yet) the settings wait for
        :meth:`refresh_choices`."""
        v = self.view
        if not v.sequence.count():
            self._waiting = s
            return
        v.method.setCurrentIndex([m.key for m in METHODS].index(s.method))
        if SEQUENCE_KEYS.index(s.sequence) < v.sequence.count():
            v.sequence.setCurrentIndex(SEQUENCE_KEYS.index(s.sequence))   # refills the layers
        n = v.reference.count()
        if s.reference is not None and s.reference < n:
            v.reference.setCurrentIndex(s.reference)
        if s.pair is not None and max(s.pair) < n:
            v.pair_a.setCurrentIndex(s.pair[0])
            v.pair_b.setCurrentIndex(s.pair[1])
        v.k.setValue(s.k)
        v.trail_word.setText(s.trail)

    def request(self) -> TrajectoryRequest:
        """The computation the controls ask for, on the Maps tab's tokens."""
        m, v = self.maps, self.view
        if m.tokens is None or m.acts is None:
            raise ElmoError("Project tokens in the Maps tab first: the trajectories follow the "
                            "same tokens.")
        layers = self._layers()
        if len(layers) < 2:
            raise ElmoError("The model has one layer: there is no trajectory to follow.")
        k = min(v.k.value(), len(m.tokens) - 1)
        return TrajectoryRequest(m.tokens, m.acts, layers, METHODS[v.method.currentIndex()],
                                 v.reference.currentIndex(),
                                 (v.pair_a.currentIndex(), v.pair_b.currentIndex()), k,
                                 m.checksum)

    # ---- computing ------------------------------------------------------------------------------
    def compute(self) -> Optional[JobHandle]:
        """Align the layers of the Maps tab's tokens and compare two of them, on the worker."""
        try:
            req = self.request()
        except ElmoError as e:
            self.view.note.setText(str(e))
            return None
        params, projector = self.maps.params, self.projector
        self.set_playing(False)

        def job(state):
            lay = align_layers(req.acts, req.tokens, req.layers, req.choice.method, params,
                               base=req.choice.base, reference=req.reference,
                               projector=projector, checksum=req.checksum, state=state)
            a, b = (req.layers[i] for i in req.knn_pair)
            ch = knn_changes(aligned_features(req.acts, req.tokens, a),
                             aligned_features(req.acts, req.tokens, b), req.tokens, req.k,
                             50, (a.name, b.name), state)
            return lay, ch

        self.view.set_running(True)
        self.view.status.setText(f"{req.choice.label} of {len(req.tokens):,} tokens…")
        return self.jobs.submit(
            f"Projection: trajectories ({req.choice.label})", job, lane=Lane.LONG, kind=KIND,
            on_progress=lambda d, t, msg: self.view.status.setText(msg),
            on_done=lambda r: self._on_done(req, r), on_failed=self._on_failed,
            on_cancelled=self.cancel)          # Esc as the tab's own Cancel

    def cancel(self) -> None:
        self.jobs.cancel(KIND)
        self.view.set_running(False)
        self.view.status.setText("Cancelled; what is drawn stays.")

    def _on_failed(self, message: str) -> None:
        self.view.set_running(False)
        self.view.status.setText(f"Trajectories failed: {message}")

    def _on_done(self, req: TrajectoryRequest, result) -> None:
        m, v = self.model, self.view
        m.tokens, (m.layouts, m.changes) = req.tokens, result
        m.trails = []
        m.ticks = 0
        v.set_running(False)
        v.map.set_codes(self.maps.legend_codes, len(req.tokens))
        v.slider.blockSignals(True)
        v.slider.setRange(0, m.max_ticks)
        v.slider.setValue(0)
        v.slider.blockSignals(False)
        v.set_playable(True)
        v.map.fit(m.layouts.coords)
        v.show_changes(m.changes)
        v.note.setText(m.method_note())
        cut = (f" The neighbours compared: k = {req.k}, not {v.k.value()} (only "
               f"{len(req.tokens):,} tokens)." if req.k < v.k.value() else "")
        v.status.setText(f"{req.choice.label}: {len(req.tokens):,} tokens, "
                         f"{len(req.layers)} layers in {m.layouts.seconds:.1f} s.{cut}")
        word = v.trail_word.text().strip()
        if word:                         # the word in the box (typed, or from a workspace)
            m.set_trails(req.tokens.find(word))
        self.redraw()
        self.computed.emit()

    # ---- drawing and playing --------------------------------------------------------------------
    def recolour(self) -> None:
        """Take the Maps tab's colours (its colour-by changed)."""
        m = self.model
        if m.tokens is not None and m.tokens is self.maps.tokens:
            self.view.map.set_codes(self.maps.legend_codes, len(m.tokens))
            self.redraw()

    def redraw(self) -> None:
        m, v = self.model, self.view
        if m.layouts is None or m.tokens is None:
            return
        pos = m.positions()                                                   # (N, 2)
        v.map.set_points(pos)
        v.map.set_trails(m.trail_paths(), pos[m.trails] if m.trails else np.zeros((0, 2)),
                         [m.tokens.words[i] for i in m.trails])
        v.where.setText(m.where())

    def set_ticks(self, ticks: int) -> None:
        """Move to ``ticks`` (``TICKS_PER_LAYER`` per layer) and redraw."""
        m = self.model
        m.ticks = int(min(max(ticks, 0), m.max_ticks))
        if self.view.slider.value() != m.ticks:
            self.view.slider.blockSignals(True)
            self.view.slider.setValue(m.ticks)
            self.view.slider.blockSignals(False)
        self.redraw()

    def set_playing(self, on: bool) -> None:
        on = bool(on) and self.model.layouts is not None
        if on and self.model.ticks >= self.model.max_ticks:
            self.set_ticks(0)
        (self._timer.start if on else self._timer.stop)()
        self.view.play.blockSignals(True)
        self.view.play.setChecked(on)
        self.view.play.setText("Pause" if on else "Play")
        self.view.play.blockSignals(False)

    def _advance(self) -> None:
        m = self.model
        if m.ticks >= m.max_ticks:
            self.set_playing(False)
            return
        self.set_ticks(min(m.max_ticks, m.ticks + PLAY_TICKS_PER_FRAME))

    # ---- trails ---------------------------------------------------------------------------------
    def set_trails(self, indices) -> None:
        self.model.set_trails(indices)
        self.redraw()

    def trail_word(self, word: str) -> int:
        """Trails for the tokens of ``word`` (any case); how many."""
        m = self.model
        if m.tokens is None or not word.strip():
            return 0
        hits = m.tokens.find(word.strip())
        self.set_trails(hits)
        self.view.status.setText(f"'{word.strip()}': {len(hits):,} tokens"
                                 + (f", trails for the first {len(m.trails)}"
                                    if len(hits) > len(m.trails) else ""))
        return len(hits)

    def _on_change_row(self, row: int, _col: int) -> None:
        ch = self.model.changes
        if ch is not None and 0 <= row < len(ch.top):
            self.set_trails(self.model.trails + [ch.top[row].index])

    def _on_point_clicked(self, i: int) -> None:
        if i >= 0:
            t = self.model.trails
            self.set_trails([j for j in t if j != i] if i in t else t + [i])

    def _on_hover(self, i: int) -> None:
        tokens = self.model.tokens
        if i >= 0 and tokens is not None:
            self.view.note.setText(f"'{tokens.words[i]}' · {tokens.context(i, 10)}")

    # ---- exports --------------------------------------------------------------------------------
    def export(self, gif: Optional[Path] = None, frames: Optional[Path] = None,
               steps: int = TICKS_PER_LAYER // 8) -> Optional[JobHandle]:
        """Write the animation as ``gif`` and/or its frames into ``frames``, on the worker."""
        from elmo_engine.analysis.projection.animation import (AnimationSpec, render_frames,
                                                               write_animation,
                                                               write_frames_folder)
        from elmo_engine.io.figures.trajectories import FRAMES_KIND
        from elmo_engine.io.writing import replace_folder_problem

        m = self.model
        if m.layouts is None or m.tokens is None:
            self.view.status.setText("Nothing to export yet: press Compute.")
            return None
        codes = self.maps.legend_codes
        spec = AnimationSpec(steps=steps, trails=tuple(m.trails[:12]),
                             codes=None if codes is None or len(codes) != len(m.tokens)
                             else np.asarray(codes), palette=PALETTE)
        layouts, words = m.layouts, m.tokens.words

        def job(state):
            pics = render_frames(layouts, words, spec, state)
            out = []
            if gif is not None:
                out.append(write_animation(gif, pics, spec.fps))
            if frames is not None:       # the chosen folder, if new, empty or our frames;
                target = frames          # else a folder of ours inside it
                if replace_folder_problem(frames, FRAMES_KIND) is not None:
                    target = frames / FRAMES_SUBFOLDER
                out += write_frames_folder(target, pics, overwrite=True)
            return out

        self.view.status.setText("Drawing the animation…")
        return self.jobs.submit(
            "Projection: animation", job, lane=Lane.LONG, kind=EXPORT_KIND,
            on_progress=lambda d, t, msg: self.view.status.setText(msg),
            on_done=self._on_exported,
            on_failed=lambda msg: self.view.status.setText(f"Export failed: {msg}"),
            on_cancelled=lambda: self.view.status.setText("Export cancelled."))

    def _on_exported(self, paths) -> None:
        self.view.status.setText(f"Wrote {len(paths)} file(s): {paths[0]}"
                                 + (" …" if len(paths) > 1 else ""))
        self.exported.emit(list(paths))

    def ask_export_gif(self) -> None:
        path = ask_save_path(self, "Export the animation", "GIF (*.gif);;MP4 (*.mp4)",
                             str(Path(start_dir(self)) / "trajectories.gif"))
        if path:
            self.export(gif=Path(path))

    def ask_export_frames(self) -> None:
        folder = existing_folder(self, "Export the frames (PNG) into")
        if folder:
            self.export(frames=Path(folder))
