"""The Units view: inside the LSTM of the loaded model (issue 40, docs/guide/units.md).

The selected sentence (the first one with tokens when nothing is selected) as rows of the units
that vary most over its words, for the chosen layer, direction and state kind (cell, gates,
candidate, outputs), beside the mean forget and input gates per word; "Rank units (demo POS)"
ranks the cells and outputs of every layer and direction for the demo POS task's tags, with the
top-k against random-k curve. Every computation is a job of the view's group on the long lane
(progress, Cancel / Esc); the states come from the engine's step path
(:mod:`elmo_engine.model.lstm_inspect`), per call: the model is shared with the other views.

Model, view, controller: :class:`~.model.UnitsModel`, :class:`~.view.UnitsView` and
:class:`UnitsPanel` (the :class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol).
"""
from __future__ import annotations

import logging
from typing import Any, Dict, List, Optional

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_explorer.state.worker import Lane
from elmo_explorer.views.protocol import PanelDefaults
from elmo_explorer.views.units.model import (RANK_TOKENS, UnitsModel, rank_demo_pos,
                                             sentence_rows)
from elmo_explorer.views.units.view import UnitsView

log = logging.getLogger(__name__)


class UnitsPanel(PanelDefaults, QWidget):
    """Signals: ``ready()`` (no job of the view runs and it shows what it can)."""

    title = "Units"
    ready = Signal()

    def __init__(self, workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.ws = workspace
        self.model = UnitsModel()
        self.view = UnitsView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.jobs = workspace.worker.group("units", self.title)
        self._ready = False
        self.view.apply_settings(self.model.settings)
        self.view.settings_changed.connect(self._on_settings)
        self.view.rank_requested.connect(self.rank)
        self.view.cancel_button.clicked.connect(self.cancel)
        workspace.model_changed.connect(self._on_model)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        workspace.tokens_changed.connect(self.refresh)
        workspace.sentences_changed.connect(self.refresh)
        workspace.selection_changed.connect(lambda _ref: self.refresh())
        if workspace.embedder is None:
            self.view.show_status("Load a model to look inside its LSTM.")
        else:
            self._on_model()

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        return self._ready and self.jobs.is_idle()

    def _set_ready(self) -> None:
        self._ready = True
        if self.jobs.is_idle():
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        return []

    def view_state(self) -> Dict[str, Any]:
        self.model.settings = self.view.current_settings()
        return self.model.view_state()

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        self.model.restore(state)
        self.view.apply_settings(self.model.settings)
        self.refresh()

    # ---- jobs ---------------------------------------------------------------------------------
    def _on_model(self) -> None:
        emb = self.ws.embedder
        if emb is not None:
            self.view.set_layers(emb.opts.n_layers)
        self.model.ranking = []
        self.view.show_ranking([])
        self.refresh()

    def _on_settings(self) -> None:
        self.model.settings = self.view.current_settings()
        self.refresh()

    def _sentence(self) -> Optional[List[str]]:
        toks = self.ws.tokens
        sel = self.ws.selection
        if sel is not None and sel.sentence < len(toks) and toks[sel.sentence]:
            return list(toks[sel.sentence])
        return next((list(t) for t in toks if t), None)

    def refresh(self) -> None:
        """Draw the selected sentence's units (a job: the model runs on the worker)."""
        emb = self.ws.embedder
        tokens = self._sentence()
        if emb is None or tokens is None:
            if emb is not None:
                self.view.show_status("Type or open a sentence to see its units.")
            self._set_ready()
            return
        settings = self.view.current_settings()
        model = emb.model

        def job(state):
            return sentence_rows(model, tokens, settings)

        self._ready = False
        self.jobs.submit("Units of the sentence", job, lane=Lane.LONG, kind="sentence",
                         on_done=self._on_sentence, on_failed=self._on_error,
                         on_finished=self._on_finished)

    def _on_sentence(self, rows) -> None:
        self.model.sentence = rows
        self.view.show_sentence(rows)
        if not self.model.ranking:
            self.view.show_status("Rank units (demo POS) ranks every layer's cells and outputs "
                                  f"for part of speech ({RANK_TOKENS:,} tokens).")

    def rank(self) -> None:
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return
        model, vectors = emb.model, emb.token_vectors

        def job(state):
            return rank_demo_pos(model, vectors, state)

        self.view.set_busy(True)
        self.view.show_status("Ranking units…")
        self.jobs.submit("Ranking units", job, lane=Lane.LONG, kind="rank",
                         on_done=self._on_ranking, on_failed=self._on_error,
                         on_progress=self._on_progress, on_finished=self._on_finished)

    def _on_ranking(self, rows) -> None:
        self.model.ranking = rows
        self.view.show_ranking(rows)
        self.view.show_status("Units ranked for the demo POS tags: held-out accuracy on all "
                              "units, the top units of each method, and a probe on the top k "
                              "units against k random ones (mean of 3 seeds).")

    def cancel(self) -> None:
        if self.jobs.cancel("rank"):
            self.view.show_status("Cancelled.")

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(f"{message} ({done}/{total})" if total else message)

    def _on_finished(self) -> None:
        if self.jobs.is_idle():
            self.view.set_busy(False)
            self._set_ready()

    def _on_error(self, message: str) -> None:
        self.view.show_status(f"Units: {message}", error=True)
