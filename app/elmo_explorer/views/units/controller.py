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
from pathlib import Path
from typing import Any, Dict, List, Optional

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_explorer.state.worker import Lane
from elmo_explorer.views.protocol import PanelDefaults, SettlesWithJobs
from elmo_explorer.views.units import export
from elmo_explorer.views.units.model import (RANK_TOKENS, SHOWCASE_KS, SHOWCASE_SEEDS,
                                             SHOWCASE_TOKENS, UnitsModel,
                                             bundled_minimal_pairs, number_showcase,
                                             UnitChoice, pattern_search, rank_demo_pos,
                                             remeasure,
                                             sentence_rows, showcase_rows, unit_contexts)
from elmo_explorer.views.units.view import UnitsView

log = logging.getLogger(__name__)


class UnitsPanel(PanelDefaults, SettlesWithJobs, QWidget):
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
        self.view.intervene_requested.connect(self.intervene)
        self.view.showcase_requested.connect(self.run_showcase)
        self.view.ranking_row_selected.connect(self._on_ranking_row)
        self.view.contexts_requested.connect(self.contexts)
        self.view.pattern_requested.connect(self.pattern)
        self._softmax: Optional[Any] = None   # the loaded checkpoint's, read by the first job
        self._softmax_of: Optional[Path] = None
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
    def export_actions(self) -> List[QAction]:
        out = []
        for text, kind in export.ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _=False, k=kind: self._ask_export(k))
            a.setEnabled(export.has(self.model, kind))
            out.append(a)
        return out

    def _ask_export(self, kind: str) -> None:
        from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path

        figure = kind == "gates"
        path = ask_save_path(self, f"Export {kind}", IMAGE_FILTERS if figure else "TSV (*.tsv)")
        if path is None:
            return
        try:
            if figure:
                export.write_figure(self.model, path)
            else:
                export.write_tsv(self.model, kind, path)
            self.view.show_status(f"Saved {path}")
        except Exception as e:  # shown, never a crash
            log.exception("units export failed")
            self.view.show_status(f"Export failed: {e}", error=True)

    def view_state(self) -> Dict[str, Any]:
        self.model.settings = self.view.current_settings()
        self.model.panel = self.view.panel_fields()
        return self.model.view_state()

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        self.model.restore(state)
        self.view.apply_settings(self.model.settings)
        self.view.apply_panel_fields(self.model.panel)
        self.refresh()

    # ---- jobs ---------------------------------------------------------------------------------
    def _on_model(self) -> None:
        emb = self.ws.embedder
        if emb is not None:
            self.view.set_layers(emb.opts.n_layers)
        self.model.ranking = []
        self.model.remeasure = None
        self.model.showcase = []
        self._softmax, self._softmax_of = None, None
        self.view.show_ranking([])
        self.view.show_remeasure(None)
        self.view.show_showcase([], "")
        self.model.contexts = None
        self.model.pattern = None
        self.view.show_contexts(None)
        self.view.show_pattern(None)
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
        if any([self.jobs.cancel(k) for k in ("rank", "intervene", "showcase", "contexts",
                                                  "pattern")]):
            self.view.show_status("Cancelled.")

    # ---- interventions ------------------------------------------------------------------------
    def _on_ranking_row(self, row: int) -> None:
        if 0 <= row < len(self.model.ranking):
            r = self.model.ranking[row]
            self.view.set_intervention_units(r["layer"], r["direction"], r["state"],
                                             r["top"]["mean-diff"])
            self.view.set_unit_choice(UnitChoice(r["layer"], r["direction"], r["state"],
                                                 r["top"]["mean-diff"][0]))
            self.contexts()

    def pattern(self) -> None:
        """Pattern search (LSTMVis) for a span of the selected sentence."""
        emb = self.ws.embedder
        tokens = self._sentence()
        if emb is None or tokens is None:
            self.view.show_status("Load a model and type a sentence first.", error=True)
            return
        q = self.view.pattern_query()
        model, vectors = emb.model, emb.token_vectors
        self.jobs.invalidate("pattern")

        def job(state):
            return pattern_search(model, tokens, q, vectors, state)

        def done(res) -> None:
            self.model.pattern = res
            self.view.show_pattern(res)
            self.view.tabs.setCurrentWidget(self.view.pattern_page)
            self.view.show_status("Pattern search: the spans whose units are on as over the "
                                  "chosen span (Jaccard of the on-sets).")

        self.view.set_busy(True)
        self.view.show_status("Searching for the pattern…")
        self.jobs.submit("Units pattern", job, lane=Lane.LONG, kind="pattern", on_done=done,
                         on_failed=self._on_error, on_progress=self._on_progress,
                         on_finished=self._on_finished)

    def contexts(self) -> None:
        """The chosen unit's top contexts (and its histogram per tag with a ranking shown)."""
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return
        choice = self.view.unit_choice()
        model, vectors, labels = emb.model, emb.token_vectors, bool(self.model.ranking)
        self.jobs.invalidate("contexts")

        def job(state):
            return unit_contexts(model, choice, labels, vectors, state)

        def done(res) -> None:
            self.model.contexts = res
            self.view.show_contexts(res)
            self.view.tabs.setCurrentWidget(self.view.unit_page)
            self.view.show_status(f"Top contexts of {choice.describe()}.")

        self.view.set_busy(True)
        self.view.show_status(f"Finding the contexts of {choice.describe()}…")
        self.jobs.submit("Unit contexts", job, lane=Lane.LONG, kind="contexts", on_done=done,
                         on_failed=self._on_error, on_progress=self._on_progress,
                         on_finished=self._on_finished)

    def _softmax_folder(self) -> Optional[Path]:
        spec = self.ws.model_spec
        if spec is None:
            return None
        p = Path(spec.path)
        return p if p.is_dir() else p.parent

    def _softmax_getter(self):
        """A function for the job: the cached softmax, or read it (on the worker)."""
        folder = self._softmax_folder()
        cached = self._softmax if self._softmax_of == folder else None
        emb = self.ws.embedder
        dim = emb.opts.output_dim if emb is not None else 0

        def get(state):
            if cached is not None:
                return cached
            if folder is None:
                from elmo_engine.errors import InputError

                raise InputError("the checkpoint's folder is unknown: no softmax to predict with")
            from elmo_explorer.views.softmax_files import missing_softmax_line
            from elmo_engine.model.softmax import load_softmax

            missing = missing_softmax_line(folder)
            if missing is not None:
                from elmo_engine.errors import InputError

                raise InputError(missing)
            return load_softmax(folder, output_dim=dim, progress=state.report)

        return folder, get

    def _keep_softmax(self, folder, softmax) -> None:
        if folder == self._softmax_folder():
            self._softmax, self._softmax_of = softmax, folder

    def intervene(self) -> None:
        emb = self.ws.embedder
        tokens = self._sentence()
        if emb is None or tokens is None:
            self.view.show_status("Load a model and type a sentence first.", error=True)
            return
        from elmo_engine.errors import InputError

        try:
            spec = self.view.intervention_spec()
        except InputError as exc:
            self.view.show_status(str(exc), error=True)
            return
        model, vectors = emb.model, emb.token_vectors
        folder, get_softmax = self._softmax_getter()

        def job(state):
            softmax = get_softmax(state)
            return softmax, remeasure(model, softmax, tokens, spec, bundled_minimal_pairs(),
                                      vectors, state)

        def done(out) -> None:
            self._keep_softmax(folder, out[0])
            self.model.remeasure = out[1]
            self.view.show_remeasure(out[1])
            self.view.tabs.setCurrentWidget(self.view.intervene_page)
            self.view.show_status("Before → after: both LMs on the selected sentence, and the "
                                  "bundled minimal pairs per set.")

        self.view.set_busy(True)
        self.view.show_status("Re-measuring…")
        self.jobs.submit("Units intervention", job, lane=Lane.LONG, kind="intervene",
                         on_done=done, on_failed=self._on_error,
                         on_progress=self._on_progress, on_finished=self._on_finished)

    def run_showcase(self) -> None:
        emb = self.ws.embedder
        if emb is None:
            self.view.show_status("Load a model first (File → Open checkpoint…).", error=True)
            return
        model, vectors = emb.model, emb.token_vectors
        folder, get_softmax = self._softmax_getter()

        def job(state):
            softmax = get_softmax(state)
            src, res = number_showcase(model, softmax, vectors, state)
            return softmax, src, res

        def done(out) -> None:
            softmax, src, res = out
            self._keep_softmax(folder, softmax)
            self.model.showcase = showcase_rows(src, res)
            top = res.top_units
            note = (f"Top layer's cells ranked for {src.label} on {src.name} "
                    f"(≤ {SHOWCASE_TOKENS:,} labelled words); top cells forward "
                    f"{list(top[0][:4])}, backward {list(top[1][:4])}. Each cell: the LM's "
                    f"accuracy with its own direction's top k zeroed / k random zeroed (mean ± "
                    f"sd over {SHOWCASE_SEEDS} seeds).")
            self.model.showcase_note = note
            self.view.show_showcase(self.model.showcase, note)
            self.view.tabs.setCurrentWidget(self.view.showcase_page)
            self.view.show_status("Number units: done.")

        self.view.set_busy(True)
        self.view.show_status(f"Number units: ranking and ablating (k = "
                              f"{', '.join(map(str, SHOWCASE_KS))})…")
        self.jobs.submit("Number units", job, lane=Lane.LONG, kind="showcase",
                         on_done=done, on_failed=self._on_error,
                         on_progress=self._on_progress, on_finished=self._on_finished)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(f"{message} ({done}/{total})" if total else message)

    def _on_finished(self) -> None:
        if self.jobs.is_idle():
            self.view.set_busy(False)
            self._set_ready()

    def _on_error(self, message: str) -> None:
        self.view.show_status(f"Units: {message}", error=True)
