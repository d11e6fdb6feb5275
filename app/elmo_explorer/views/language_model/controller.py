"""The "Language model" view: what ELMo's forward and backward LMs predict at each token of the
selected sentence, how far each direction sees, and minimal pairs (issue 27, item 4).

The sentence and token are the workspace's selection (a click on a token here selects it in
every view). Per token and direction the rank of the actual word colours it (GLTR's bins); the
detail shows both directions' top-k, surprisal and entropy and the substitutes; the reach
heatmap shows how far the selected token's vector moves per layer and direction when each other
token is replaced by ``<UNK>``. Everything is computed by the engine
(:mod:`elmo_engine.analysis.language_model`) on the worker: the softmax is read once per
checkpoint (long lane), one sentence's predictions and reach on the interactive lane, the
minimal-pair sets on the long lane; every job shows progress and can be cancelled, and results
are cached per checkpoint and tokens. A checkpoint without a softmax gets one line naming the
missing file; the reach works on every checkpoint.

Model, view, controller: :class:`~.model.LanguageModelModel`, :class:`~.view.LanguageModelView`
and :class:`LanguageModelPanel` (the :class:`~elmo_explorer.views.protocol.AnalysisPanel`
protocol); exports and report parts: :mod:`.export`'s functions of the model, which the panel
calls with the paths it asks for.
"""
from __future__ import annotations

import html
import logging
from functools import partial
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.analysis.language_model.report import BUNDLED
from elmo_explorer.common.figure_export import panel_figure_options
from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path, open_file_name
from elmo_explorer.state.worker import JobHandle, Lane
from elmo_explorer.state.workspace import TokenRef
from elmo_explorer.views.language_model import export
from elmo_explorer.views.language_model.model import (RECORDED_PAIRS, LanguageModelModel,
                                                      LMOptions, missing_softmax_line,
                                                      read_recorded_pairs)
from elmo_explorer.views.language_model.view import LanguageModelView
from elmo_explorer.views.protocol import PanelDefaults

log = logging.getLogger(__name__)

#: request kinds of this view's job group (one generation counter each, see state/worker.py)
SOFTMAX, SENTENCE, PAIRS = "softmax", "sentence", "pairs"
PAIRS_FILTER = "Minimal pairs (*.tsv *.txt);;All files (*)"


class LanguageModelPanel(PanelDefaults, QWidget):
    """Predictions, reach and minimal pairs of the loaded model.

    Signals
    -------
    ready() : no job of this view is running and it shows what its data asks for
    drawn() : the sentence part was redrawn with new results
    pairs_drawn() : minimal-pair scores are shown
    exported(str) : a file was written
    """

    title = "Language model"
    ready = Signal()
    drawn = Signal()
    pairs_drawn = Signal()
    exported = Signal(str)

    def __init__(self, workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.ws = workspace
        self.model = LanguageModelModel()
        self.view = LanguageModelView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.softmax = None                   # the loaded model's, read on the long lane
        self.jobs = workspace.worker.group("language_model", self.title)
        self._pending_pair: Optional[int] = None
        self._want_pairs = False
        v = self.view
        v.rows.clicked.connect(self._on_token_clicked)
        v.rows.hovered.connect(self._on_token_hovered)
        v.reach.hovered.connect(self._on_reach_hovered)
        v.top_k_changed.connect(self._on_top_k)
        v.cancel_button.clicked.connect(self.cancel)
        v.pairs.run_requested.connect(lambda: self.score_pairs())
        v.pairs.source_requested.connect(self._on_pairs_source)
        v.pairs.cancel_button.clicked.connect(self.cancel_pairs)
        v.pairs.pair_selected.connect(self.select_pair)
        ws = self.ws
        ws.model_changed.connect(self._on_model_changed)
        ws.model_load_failed.connect(lambda *_: self._check_ready())
        ws.selection_changed.connect(lambda _ref: self._follow_selection())
        ws.sentences_changed.connect(self._follow_selection)
        ws.tokens_changed.connect(self._follow_selection)
        self._redraw()
        QTimer.singleShot(0, self, self._on_model_changed)

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        if self.ws.embedder is None:
            return not self.ws.is_loading()
        return self.jobs.is_idle() and (not self.model.tokens or self.model.reach_done())

    def _check_ready(self) -> None:
        if self.is_ready():
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        out = []
        for key, text in export.ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _=False, k=key: self._ask_export(k))
            a.setEnabled(export.has(self.model, key))
            out.append(a)
        return out

    def view_state(self) -> Dict[str, Any]:
        return self.model.view_state()

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        where, source, pair = self.model.restore(state)
        self.view.k_box.blockSignals(True)
        self.view.k_box.setValue(self.model.options.top_k)
        self.view.k_box.blockSignals(False)
        self._show_source()
        if where is not None:
            s, t = where
            if 0 <= s < len(self.ws.tokens) and 0 <= t < len(self.ws.tokens[s]):
                self.ws.select(TokenRef(s, t))
        self._follow_selection(force=True)
        if source is not None:
            self._pending_pair = pair
            self._want_pairs = self.softmax is None      # scored once the softmax is read
            self.score_pairs(recorded=True)

    # ---- model and softmax --------------------------------------------------------------------
    def _on_model_changed(self) -> None:
        emb = self.ws.embedder
        self.softmax = None
        self.jobs.invalidate(SENTENCE)
        self.jobs.invalidate(PAIRS)
        self.model.model_changed(getattr(emb, "checksum", ""))
        if emb is None:
            self._redraw()
            self._check_ready()
            return
        folder = self.checkpoint_folder()
        missing = missing_softmax_line(folder) if folder is not None else (
            "No predictions: the checkpoint's folder is unknown.")
        if missing is not None:
            self.model.softmax_problem = missing
            self.jobs.invalidate(SOFTMAX)
        else:
            dim = emb.opts.output_dim

            def job(state):
                from elmo_engine.model.softmax import load_softmax

                return load_softmax(folder, output_dim=dim, progress=state.report)

            self.jobs.submit(
                "Reading the softmax", job, lane=Lane.LONG, kind=SOFTMAX,
                on_done=self._on_softmax, on_failed=self._on_softmax_error,
                on_progress=self._on_progress, on_finished=self._on_job_finished)
        self._follow_selection(force=True)

    def checkpoint_folder(self) -> Optional[Path]:
        spec = self.ws.model_spec
        if spec is None:
            return None
        p = Path(spec.path)
        return p if p.is_dir() else p.parent

    def _on_softmax(self, softmax) -> None:
        self.softmax = softmax
        self.model.softmax_problem = ""
        if self._want_pairs:
            self._want_pairs = False
            self.score_pairs(recorded=True)
        else:
            self._show_recorded_pairs()
        self._compute()

    def _show_recorded_pairs(self) -> None:
        """The bundled sets as recorded with this model (the demo's), until Score is pressed."""
        m = self.model
        if m.pair_scores or m.options.pairs != BUNDLED:
            return
        from elmo_engine.analysis.language_model import read_pairs
        from elmo_engine.analysis.language_model.pairs import bundled_pairs
        from elmo_engine.resources import HERE

        try:
            bundled = [p for f in bundled_pairs() for p in read_pairs(f)]
        except Exception:  # a broken installation: nothing recorded to show
            log.warning("the bundled minimal pairs cannot be read", exc_info=True)
            return
        scores = read_recorded_pairs(HERE / RECORDED_PAIRS, m.checksum, bundled)
        if scores is not None:
            self._on_pairs((BUNDLED, scores, True))

    def _on_softmax_error(self, message: str) -> None:
        self.model.softmax_problem = f"No predictions: {message}"
        self._redraw()

    # ---- the sentence -------------------------------------------------------------------------
    def _follow_selection(self, force: bool = False) -> None:
        """Show the workspace's selected sentence and token (the first sentence before any)."""
        ws, m = self.ws, self.model
        ref = ws.selection
        if ref is not None:
            s, t = ref.sentence, ref.token
        elif m.sentence is not None and m.sentence < len(ws.tokens):
            s, t = m.sentence, m.token
        else:
            s, t = (0, None) if ws.tokens else (None, None)
        tokens = tuple(ws.tokens[s]) if s is not None and s < len(ws.tokens) else ()
        if not force and s == m.sentence and tokens == m.tokens:
            if t is not None and t != m.token:
                m.token = t
                self._redraw()
            return
        m.show_sentence(s if s is not None else 0, tokens, t)
        self._compute()

    def _compute(self) -> Optional[JobHandle]:
        """Submit what the shown sentence still lacks (interactive lane); redraw at once."""
        m, emb = self.model, self.ws.embedder
        self._redraw()
        if emb is None:
            return None
        need_pred, need_reach = m.needs()
        need_pred = need_pred and self.softmax is not None
        if not (need_pred or need_reach):
            self.jobs.invalidate(SENTENCE)
            self._check_ready()
            return None
        tokens, k, softmax = m.tokens, m.options.top_k, self.softmax if need_pred else None

        def job(state):
            from elmo_engine.analysis.language_model import predict, reach

            r = reach(emb, tokens, state) if need_reach else None    # cancellable by batch
            state.check()
            p = predict(emb, softmax, [tokens], top_k=k, state=state)[0] if softmax else None
            return tokens, k, p, r

        sentence_job = self.jobs.submit(
            f"Language model: {' '.join(tokens)[:40]}", job, lane=Lane.INTERACTIVE,
            kind=SENTENCE, on_done=self._on_sentence, on_failed=self._on_error,
            on_progress=self._on_progress, on_finished=self._on_job_finished)
        self.view.set_busy(True)
        return sentence_job

    def _on_sentence(self, result) -> None:
        tokens, k, preds, reach = result
        self.model.store(tokens, k, preds, reach)
        self._redraw()
        self.drawn.emit()

    def _on_token_clicked(self, i: int) -> None:
        m = self.model
        if m.sentence is not None and m.sentence < len(self.ws.tokens):
            self.ws.select(TokenRef(m.sentence, i))
        if m.token != i:                      # the selection may already be this token
            m.token = i
            self._redraw()

    def select_token(self, i: int) -> None:
        """Select token ``i`` of the shown sentence (as a click does)."""
        self._on_token_clicked(i)

    def _on_token_hovered(self, i: int) -> None:
        m = self.model
        if 0 <= i < len(m.tokens):
            self.view.detail.setHtml(m.detail_html(i))
        else:
            self.view.detail.setHtml(m.detail_html(m.token))

    def _on_reach_hovered(self, row: int, j: int) -> None:
        self.view.reach.setToolTip(self.model.reach_hover(row, j))

    def _on_top_k(self, k: int) -> None:
        self.model.options = LMOptions.from_dict({"top_k": k}, self.model.options)
        self._follow_selection(force=True)

    def cancel(self) -> None:
        self.jobs.cancel(SENTENCE)
        self.jobs.cancel(SOFTMAX)
        self.view.show_status("Cancelled.")

    # ---- minimal pairs ------------------------------------------------------------------------
    def _on_pairs_source(self, what: str) -> None:
        if what == "choose":
            name = open_file_name(self, "Minimal pairs (set, good, bad)", PAIRS_FILTER)
            if name:
                self.set_pairs_source(name)
            else:
                self._show_source()
        else:
            self.set_pairs_source(BUNDLED)

    def set_pairs_source(self, source: str) -> None:
        """Score ``source`` ("bundled" or a TSV file) from the next Score."""
        self.model.options.pairs = source
        self._show_source()

    def _show_source(self) -> None:
        src = self.model.options.pairs
        self.view.pairs.set_source("Bundled sets" if src == BUNDLED else Path(src).name)

    def score_pairs(self, recorded: bool = False) -> Optional[JobHandle]:
        """Score the chosen minimal-pair sets (long lane; cached per checkpoint and source);
        ``recorded``: take the recorded scores of the bundled sets when they are this model's."""
        m, emb = self.model, self.ws.embedder
        if emb is None:
            return None
        if self.softmax is None:
            self.view.pairs.status.setText(m.softmax_problem or "The softmax is still being read.")
            return None
        source, softmax = m.options.pairs, self.softmax
        self._pending_pair = self._pending_pair if self._pending_pair is not None else m.pair
        cached = m.cache_pairs.get(m.pairs_key(source))
        if cached is not None:
            self._on_pairs((source, cached, False))
            return None

        def job(state):
            from elmo_engine.analysis.language_model.report import recorded_or_scored

            return (source, *recorded_or_scored(emb, softmax, source, state, recorded))

        pairs_job = self.jobs.submit(
            "Scoring minimal pairs", job, lane=Lane.LONG, kind=PAIRS, on_done=self._on_pairs,
            on_failed=lambda msg: self.view.pairs.status.setText(f"Minimal pairs: {msg}"),
            on_progress=lambda d, t, _m: self.view.pairs.show_progress(d, t),
            on_finished=self._on_job_finished)
        self.view.pairs.set_busy(True)
        self.view.pairs.status.setText("Scoring…")
        return pairs_job

    def cancel_pairs(self) -> None:
        if self.jobs.cancel(PAIRS):
            self.view.pairs.status.setText("Cancelled; the previous scores stay.")

    def _on_pairs(self, result) -> None:
        source, scores, recorded = result
        m = self.model
        m.store_pairs(source, scores, recorded)
        if self._pending_pair is not None and self._pending_pair < len(scores):
            m.pair = self._pending_pair
        self._pending_pair = None
        n = len(scores)
        where = "the bundled sets" if source == BUNDLED else Path(source).name
        self.view.pairs.status.setText(
            f"{n} pairs from {where}, recorded with this model (`elmo-explorer lm --pairs "
            "bundled`); Score recomputes." if recorded else f"{n} pairs from {where}.")
        self._redraw_pairs()
        self.pairs_drawn.emit()

    def select_pair(self, k: int) -> None:
        self.model.pair = k
        self._draw_pair()

    # ---- jobs and drawing ---------------------------------------------------------------------
    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(f"{message} ({done:,}/{total:,})" if total else message)

    def _on_error(self, message: str) -> None:
        self.view.show_status(f"Language model: {message}", error=True)

    def _on_job_finished(self) -> None:
        busy = self.jobs.is_running(SENTENCE) or self.jobs.is_running(SOFTMAX)
        self.view.set_busy(busy)
        self.view.pairs.set_busy(self.jobs.is_running(PAIRS))
        if not busy:
            self._redraw()
        self._check_ready()

    def _redraw(self) -> None:
        m, v = self.model, self.view
        tips = [m.token_tip(i) for i in range(len(m.tokens))]
        v.rows.set_tokens(m.tokens, m.token_bins(), m.token, tips)
        v.perplexity.setText(m.perplexity_text())
        v.detail.setHtml(m.detail_html(m.token))
        if self.ws.embedder is None:
            v.show_status("Load a model (File → Open checkpoint…).")
        elif m.softmax_problem:
            v.show_status(m.softmax_problem, error=True)
        elif not m.tokens:
            v.show_status("Select a sentence (Sentences dock) to see its language models.")
        else:
            v.show_status("")
        matrix, labels = m.reach_heatmap()
        title = ""
        if matrix is not None:
            word = html.escape(m.tokens[m.token])
            title = (f"How far '{word}' moves per layer (→ forward, ← backward half) when each "
                     "token is replaced by &lt;UNK&gt;")
        labels = [lab.replace(" forward", " →").replace(" backward", " ←") for lab in labels]
        v.reach.set_matrix(matrix, labels, m.tokens, title,
                           "" if not m.tokens else m.reach_problem() or "Computing the reach…",
                           m.reach_top())
        self._redraw_pairs()

    def _redraw_pairs(self) -> None:
        m = self.model
        self.view.pairs.fill(m.accuracy_rows(), m.pair_rows(), m.pair)
        if not m.pair_scores and not self.jobs.is_running(PAIRS):
            self.view.pairs.status.setText(
                m.softmax_problem and "Minimal pairs need the softmax."
                or "Score the minimal-pair sets (90 bundled pairs: about a minute on 2 cores).")
        self._draw_pair()

    def _draw_pair(self) -> None:
        m = self.model
        diffs = m.pair_differences()
        title = "" if diffs is None else f"pair {m.pair + 1}: where each direction tells them apart"
        self.view.pairs.draw_differences(diffs, title)

    # ---- File → Export (export_*: no dialogs, for tests and scripts) --------------------------
    def figure(self, kind: str):
        """The export figure of ``kind`` ("sentence", "pairs"), or None (nothing to draw)."""
        return export.figure(self.model, kind)

    def export_figure(self, kind: str, path) -> List[Path]:
        written = export.write_figure(self.model, kind, path, panel_figure_options(self))
        for p in written:
            self.exported.emit(str(p))
        return written

    def export_tsv(self, path) -> Path:
        written = export.write_tsv(self.model, path)
        self.exported.emit(str(path))
        return written

    def export_json(self, path) -> Path:
        written = export.write_json(self.model, path)
        self.exported.emit(str(path))
        return written

    def _ask_export(self, key: str) -> None:
        write: Callable[[Path], object]
        if key in export.FIGURES:
            title, filters = f"Export the {key} figure", IMAGE_FILTERS
            write = partial(self.export_figure, key)
        elif key == "tsv":
            title, filters, write = ("Export per-token predictions", "TSV (*.tsv)",
                                     self.export_tsv)
        else:
            title, filters, write = ("Export the sentence as lm --json", "JSON (*.json)",
                                     self.export_json)
        path = ask_save_path(self, title, filters)
        if path is None:
            return
        try:
            write(path)
        except Exception as e:  # shown, never a crash
            log.exception("language model export failed")
            self.view.show_status(f"Export failed: {e}", error=True)
