"""The Characters view: what the char-CNN and the highway layers make of any word.

The word lab (character ids, the filters each word fires most with their winning n-grams, the
highway gates, the norm and the nearest known words at layer 0), the filter atlas (every
filter's strongest n-grams over the reference corpus's word types, searchable, categorised) and
a perturbation sweep (a word in its sentence, perturbed; cosine per layer and direction). Every
computation is the engine's (:mod:`elmo_engine.analysis.characters`) and runs in the view's job
group on the long lane (progress, Cancel / Esc); the atlas search on the interactive lane.

Model, view, controller: :class:`~.model.CharactersModel`, :class:`~.view.CharactersView` and
:class:`CharactersPanel` (the :class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path
from elmo_explorer.state.worker import Lane
from elmo_explorer.views.characters import export
from elmo_explorer.views.characters.model import CharactersModel
from elmo_explorer.views.characters.view import CharactersView
from elmo_explorer.views.protocol import PanelDefaults

log = logging.getLogger(__name__)
#: perturbation variants per type in the view
PER_TYPE = 4
ATLAS_TOP = 10


class CharactersPanel(PanelDefaults, QWidget):
    """The word lab, the filter atlas and the perturbation sweep of the loaded model.

    Signals
    -------
    ready() : no job of this view is running and it shows what it can
    results_changed(str) : "lab", "atlas", "search" or "sweep" was drawn anew
    """

    title = "Characters"
    ready = Signal()
    results_changed = Signal(str)

    def __init__(self, workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.ws = workspace
        self.model = CharactersModel()
        self.view = CharactersView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.jobs = workspace.worker.group("characters", self.title)
        self._ready = False
        self._vocab = None            # (checksum, Vocabulary) of the reference corpus's words
        self._atlas = None            # (checksum, Atlas)
        self._softmax = None          # (checksum, Softmax) for the In context tab
        self.view.apply(self.model)
        self.view.analyse_requested.connect(self.analyse)
        self.view.sweep_requested.connect(self.run_sweep)
        self.view.search_changed.connect(self.search)
        self.view.nonce_requested.connect(self.run_nonce)
        self.view.cancel_button.clicked.connect(self.jobs.cancel_all)
        self.view.filters_box.valueChanged.connect(self._on_filters)
        workspace.model_changed.connect(self._on_model)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        self._redraw()
        if workspace.embedder is not None:
            self._on_model()
        else:
            self.view.show_status("Load a model to look at its character layer.")

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        return self._ready and self.jobs.is_idle()

    def _set_ready(self) -> None:
        self._ready = True
        if self.jobs.is_idle():
            self.ready.emit()

    def export_actions(self) -> List[QAction]:
        out = []
        for text, kind in export.ENTRIES:
            a = QAction(text, self)
            a.triggered.connect(lambda _=False, k=kind: self._ask_figure(k))
            a.setEnabled(export.has(self.model, kind))
            out.append(a)
        a = QAction("Filter atlas (TSV)…", self)
        a.triggered.connect(self._ask_tsv)
        a.setEnabled(self._atlas is not None)
        return out + [a]

    def view_state(self) -> Dict[str, Any]:
        self.view.read(self.model)
        return self.model.view_state()

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        self.model.restore(state)
        self.view.apply(self.model)
        if self.ws.embedder is not None:
            self.analyse()
            self.run_sweep()
            self.run_nonce()

    # ---- model --------------------------------------------------------------------------------
    def _on_model(self) -> None:
        emb = self.ws.embedder
        if emb is None:
            return
        self._ready = False
        self.model.model_changed(emb.checksum)
        self._redraw()
        self.analyse()
        self.build_atlas()
        self.run_sweep()
        self.run_nonce()
        self._set_ready()

    def _on_filters(self) -> None:
        self.view.read(self.model)
        self.view.draw_lab(self.model)

    # ---- jobs ---------------------------------------------------------------------------------
    def _submit(self, kind: str, name: str, fn, on_done, lane: Lane = Lane.LONG) -> None:
        self.jobs.submit(name, fn, lane=lane, kind=kind, on_done=on_done,
                         on_failed=self._on_error, on_progress=self._on_progress,
                         on_finished=self._on_finished)
        self._ready = False
        self.view.set_busy(True)

    def analyse(self) -> None:
        """The word lab for the words typed (long lane: the known words' vectors are computed
        once per model)."""
        emb = self.ws.embedder
        if emb is None:
            return
        self.view.read(self.model)
        words = self.model.words()
        if not words:
            self.view.show_status("Type one or more words.", error=True)
            return
        cached = self._vocab[1] if self._vocab and self._vocab[0] == emb.checksum else None
        checksum = emb.checksum

        def job(state):
            from elmo_engine.analysis.characters.windows import filters_of
            from elmo_engine.analysis.characters.word_lab import (Vocabulary, analyse,
                                                                  reference_words)

            vocab = cached
            if vocab is None:
                state.report(0, 2, "the known words' layer-0 vectors")
                known = reference_words()
                vocab = Vocabulary(known, emb.token_vectors(known),
                                   "the reference corpus's word types")
            state.check()
            state.report(1, 2, "the word lab")
            filters = filters_of(emb.model.char_cnn)
            reports = analyse(filters, words, vocab, neighbours=10)
            return vocab, [r.to_dict(filters, 100) for r in reports]

        def done(out) -> None:
            vocab, lab = out
            self._vocab = (checksum, vocab)
            self.model.lab = lab
            self.model.vocabulary, self.model.vocabulary_size = vocab.source, len(vocab.words)
            self.view.draw_lab(self.model)
            self.view.show_status("")
            self.results_changed.emit("lab")

        self._submit("lab", "Word lab", job, done)

    def build_atlas(self) -> None:
        """Every filter's strongest n-grams over the reference corpus's word types."""
        emb = self.ws.embedder
        if emb is None:
            return
        checksum = emb.checksum

        def job(state):
            from elmo_engine.analysis.characters.atlas import Atlas
            from elmo_engine.analysis.characters.windows import filters_of
            from elmo_engine.analysis.characters.word_lab import reference_words

            atlas = Atlas.build(filters_of(emb.model.char_cnn), reference_words(),
                                top=ATLAS_TOP, state=state)
            return atlas, [e.to_dict() for e in atlas.entries()]

        def done(out) -> None:
            atlas, entries = out
            self._atlas = (checksum, atlas)
            self.model.atlas, self.model.atlas_words = entries, len(atlas.words)
            self.results_changed.emit("atlas")
            self.search()

        self._submit("atlas", "Filter atlas", job, done)

    def search(self) -> None:
        """The atlas's filters for the search text and width (interactive lane)."""
        self.view.read(self.model)
        text = self.model.search.strip()
        if not text or self._atlas is None:
            self.model.search_hits = []
            self.jobs.invalidate("search")
            self.view.draw_atlas(self.model)
            return
        atlas = self._atlas[1]

        def job(state):
            return [{"filter": j, "relative": rel, "window": g, "value": v}
                    for j, rel, g, v in atlas.search(text, limit=200)]

        def done(hits) -> None:
            self.model.search_hits = hits
            self.view.draw_atlas(self.model)
            self.results_changed.emit("search")

        self._submit("search", "Searching the filters", job, done, lane=Lane.INTERACTIVE)

    def run_sweep(self) -> None:
        """The perturbation sweep of the word in its sentence."""
        emb = self.ws.embedder
        if emb is None:
            return
        self.view.read(self.model)
        sentence, word = self.model.sentence, self.model.word

        def job(state):
            from elmo_engine.analysis.characters.perturb import sweep
            from elmo_engine.errors import InputError
            from elmo_engine.model.tokenize import tokenize

            tokens = tokenize(sentence)
            if word not in tokens:
                raise InputError(f"'{word}' is not a token of the sentence "
                                 f"({' '.join(tokens)})")
            return sweep(emb, [tokens], word, PER_TYPE, state=state).to_dict()

        def done(result) -> None:
            self.model.sweep = result
            self.view.draw_sweep(self.model)
            self.results_changed.emit("sweep")

        self._submit("sweep", "Perturbation sweep", job, done)

    def run_nonce(self) -> None:
        """The In context tab: the word's layer-0 neighbours against the two LMs (the softmax is
        read once per model; a model without one says so in the tab)."""
        emb = self.ws.embedder
        spec = self.ws.model_spec
        if emb is None or spec is None:
            return
        self.view.read(self.model)
        sentence, word = self.model.nonce_sentence, self.model.nonce_word
        checksum = emb.checksum
        soft = self._softmax[1] if self._softmax and self._softmax[0] == checksum else None
        vocab = self._vocab[1] if self._vocab and self._vocab[0] == checksum else None
        folder = Path(spec.path) if Path(spec.path).is_dir() else Path(spec.path).parent

        def job(state):
            from elmo_engine.analysis.characters.nonce import in_context
            from elmo_engine.analysis.characters.word_lab import Vocabulary, reference_words
            from elmo_engine.errors import ElmoError, InputError
            from elmo_engine.model.softmax import load_softmax
            from elmo_engine.model.tokenize import tokenize

            tokens = tokenize(sentence)
            if word not in tokens:
                raise InputError(f"'{word}' is not a token of the sentence ({' '.join(tokens)})")
            softmax = soft
            if softmax is None:
                state.report(0, 2, "reading the softmax")
                try:
                    softmax = load_softmax(folder, output_dim=emb.opts.output_dim)
                except (ElmoError, OSError) as e:
                    return None, None, f"No predictions: this model has no usable softmax ({e})."
            known = vocab
            if known is None:
                words = reference_words()
                known = Vocabulary(words, emb.token_vectors(words),
                                   "the reference corpus's word types")
            state.report(1, 2, "predicting")
            res = in_context(emb, softmax, tokens, tokens.index(word), known, top_k=10)
            return softmax, res.to_dict(), ""

        def done(out) -> None:
            softmax, result, problem = out
            if softmax is not None:
                self._softmax = (checksum, softmax)
            self.model.nonce, self.model.nonce_problem = result, problem
            self.view.draw_nonce(self.model)
            self.results_changed.emit("nonce")

        self._submit("nonce", "Nonce word in context", job, done)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(f"{message} ({done}/{total})" if total else message)

    def _on_finished(self) -> None:
        if self.jobs.is_idle():
            self.view.set_busy(False)
            if not self.view.status.text().startswith("Characters:"):
                self.view.show_status("")
            self._set_ready()

    def _on_error(self, message: str) -> None:
        self.view.show_status(f"Characters: {message}", error=True)

    # ---- drawing and export -------------------------------------------------------------------
    def _redraw(self) -> None:
        self.view.draw_lab(self.model)
        self.view.draw_atlas(self.model)
        self.view.draw_sweep(self.model)
        self.view.draw_nonce(self.model)

    def _ask_figure(self, kind: str) -> None:
        path = ask_save_path(self, f"Export {kind}", IMAGE_FILTERS)
        if path is not None:
            self._guard(lambda: export.write_figure(self.model, kind, path))

    def _ask_tsv(self) -> None:
        path = ask_save_path(self, "Export the filter atlas", "TSV (*.tsv)")
        if path is not None and self._atlas is not None:
            atlas = self._atlas[1]
            self._guard(lambda: export.write_tsv(atlas.to_tsv(ATLAS_TOP), path))

    def _guard(self, fn) -> None:
        try:
            fn()
        except Exception as e:  # shown, never a crash
            log.exception("characters export failed")
            self.view.show_status(f"Export failed: {e}", error=True)
