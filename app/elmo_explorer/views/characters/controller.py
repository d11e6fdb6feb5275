"""The Characters view: what the char-CNN and the highway layers make of any word.

The word lab (character ids, the filters each word fires most with their winning n-grams, the
highway gates, the norm and the nearest known words at layer 0 among a vocabulary the user picks:
the reference corpus's word types, the model's ``vocab.txt`` or a file), the filter atlas (every
filter's strongest n-grams over the reference corpus's word types, searchable, categorised), a
perturbation sweep (a word in its sentence, perturbed; cosine per layer and direction) and a
nonce word in context (its layer-0 neighbours, the two LMs' predictions at its place and its
nearest occurrences per layer in a corpus index). Every computation is the engine's
(:mod:`elmo_engine.analysis.characters`, :mod:`elmo_engine.index.search`) and runs in the view's
job group on the long lane (progress, Cancel / Esc); the atlas search on the interactive lane.
A vocabulary's layer-0 vectors are computed once per (model, vocabulary) and kept; an index is
opened once per (folder, model).

Model, view, controller: :class:`~.model.CharactersModel`, :class:`~.view.CharactersView` and
:class:`CharactersPanel` (the :class:`~elmo_explorer.views.protocol.AnalysisPanel` protocol).
"""
from __future__ import annotations

import os
import logging
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from PySide6.QtCore import Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QVBoxLayout, QWidget

from elmo_explorer.common.save_dialog import IMAGE_FILTERS, ask_save_path
from elmo_explorer.state.worker import Lane
from elmo_explorer.views.characters import export
from elmo_explorer.views import corpus_index
from elmo_explorer.views.characters.model import (CharactersModel, IndexSource,
                                                  VocabSource, not_a_token, words_note)
from elmo_explorer.views.characters.kept import (Kept, NonceOutcome, ReadError, VocabRequest,
                                                 model_vocab_file, nonce_in_context,
                                                 vocabulary_request)
from elmo_explorer.views.characters.view import CharactersView
from elmo_explorer.views.protocol import PanelDefaults, SettlesWithJobs

log = logging.getLogger(__name__)
ATLAS_TOP = 10
#: the Corpus view's last opened index (its settings key)
CORPUS_LAST_INDEX = "corpus/last_index"


class CharactersPanel(PanelDefaults, SettlesWithJobs, QWidget):
    """The word lab, the filter atlas and the perturbation sweep of the loaded model.

    Signals
    -------
    ready() : no job of this view is running and it shows what it can
    results_changed(str) : "lab", "atlas", "search", "sweep" or "nonce" was drawn anew
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
        self._atlas = None            # (checksum, Atlas)
        self._softmax = None          # (checksum, Softmax) for the In context tab
        self.kept = Kept()            # vocabularies' vectors, the open index (long lane)
        self._vocab_shown: Tuple[VocabSource, str] = (VocabSource.REFERENCE, "")
        self._index_shown: Tuple[IndexSource, str] = (IndexSource.CORPUS, "")
        self._error = ""              # the last failure since the user's last request (status)
        self._note = ""               # what the last word lab left out of the words (status)
        self.view.apply(self.model)
        for request in (self.view.analyse_requested, self.view.sweep_requested,
                        self.view.search_changed, self.view.nonce_requested,
                        self.view.vocabulary_chosen, self.view.index_chosen):
            request.connect(self._new_request)          # first: before the request's own slot
        self.view.analyse_requested.connect(self.analyse)
        self.view.sweep_requested.connect(self.run_sweep)
        self.view.search_changed.connect(self.search)
        self.view.nonce_requested.connect(self.run_nonce)
        self.view.cancel_button.clicked.connect(self.jobs.cancel_all)
        self.view.filters_box.valueChanged.connect(self._on_filters)
        self.view.vocabulary_chosen.connect(self.choose_vocabulary)
        self.view.index_chosen.connect(self.choose_index)
        workspace.model_changed.connect(self._on_model)
        workspace.tokenization_changed.connect(self._on_tokenization)
        workspace.model_load_failed.connect(lambda *_: self._set_ready())
        self._redraw()
        if workspace.embedder is not None:
            self._on_model()
        else:
            self.view.show_status("Load a model to look at its character layer.")

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
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
        self._new_request()
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
        self._new_request()
        self.model.model_changed(emb.checksum)
        mv = model_vocab_file(emb)
        self.view.set_model_vocabulary(None if mv is None else str(mv))
        self._redraw()
        self.analyse()
        self.build_atlas()
        self.run_sweep()
        self.run_nonce()
        self._set_ready()

    def _on_tokenization(self, _how: str) -> None:
        """Settings ▸ Tokenization changed: the sweep's and the nonce word's sentences are split
        the new way (as ``chars perturb/nonce --pretokenized``)."""
        if self.ws.embedder is None:
            return
        self._new_request()
        self.run_sweep()
        self.run_nonce()

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
        words, note = self.model.words(), words_note(self.model.words_text)
        if not words:
            self.view.show_status("Type one or more words.", error=True)
            return
        known = self._vocabulary_or_last()
        if known is None:
            return

        def job(state):
            from elmo_engine.analysis.characters.windows import filters_of
            from elmo_engine.analysis.characters.word_lab import analyse

            try:
                vocab = self.kept.vocabulary(emb, known, state)
            except ReadError as e:
                return None, str(e)
            state.check()
            state.report(1, 2, "the word lab")
            filters = filters_of(emb.model.char_cnn)
            reports = analyse(filters, words, vocab, neighbours=10)
            return vocab, [r.to_dict(filters, 100) for r in reports]

        def done(out) -> None:
            vocab, lab = out
            if vocab is None:
                self._vocab_failed(lab)
                return
            self._vocab_shown = (self.model.vocab_source, self.model.vocab_file)
            self.model.lab = lab
            self.model.vocabulary, self.model.vocabulary_size = vocab.source, len(vocab.words)
            self.view.vocab_info.setText(f"{len(vocab.words):,} words ({vocab.source})")
            self.view.draw_lab(self.model)
            self._note = note                      # said once the view's jobs are done
            self.results_changed.emit("lab")

        self._submit("lab", "Word lab", job, done)

    # ---- the known words ----------------------------------------------------------------------
    def _vocabulary_or_last(self) -> Optional[VocabRequest]:
        """The chosen vocabulary (:func:`~.kept.vocabulary_request`), or, when it cannot be
        read, the last one that worked (the status says why); None when that fails too."""
        try:
            return vocabulary_request(self.ws.embedder, self.model)
        except ReadError as e:
            self._vocab_failed(str(e))                # back to the last one that worked
            try:
                return vocabulary_request(self.ws.embedder, self.model)
            except ReadError:
                return None

    def choose_vocabulary(self, value: str) -> None:
        """The Word lab tab's choice; "A file…" asks for the file (Cancel: nothing changes)."""
        source = VocabSource(value)
        path = ""
        if source is VocabSource.FILE:
            path, _ = QFileDialog.getOpenFileName(
                self, "Known words: a file of words, one a line", self.model.vocab_file,
                "Word lists (*.txt *.vocab *.tsv);;All files (*)")
            if not path:
                self.view.show_choices(self.model)
                return
        self.set_vocabulary(source, path)

    def set_vocabulary(self, source: VocabSource, path: str = "") -> None:
        """Use ``source`` (a file at ``path``) for the known words: the lab and the In context
        tab are computed again with it."""
        self.model.set_vocabulary(source, path)
        self.view.show_choices(self.model)
        self.analyse()
        self.run_nonce()

    def _vocab_failed(self, message: str) -> None:
        """A vocabulary that cannot be read: one line in the status; the words shown and the
        choice go back to the last vocabulary that worked."""
        self.model.set_vocabulary(*self._vocab_shown)
        self.view.show_choices(self.model)
        self._show_error(message)

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
                    for j, rel, g, v in atlas.search(text, limit=None)]   # cut after the width

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
        sentence, word, how = self.model.sentence, self.model.word, self.ws.tokenization

        def job(state):
            from elmo_engine.analysis.characters.perturb import PER_KIND, sweep
            from elmo_engine.errors import InputError
            from elmo_engine.model.tokenize import sentence_tokens

            tokens = sentence_tokens(sentence, how)
            if word not in tokens:
                raise InputError(not_a_token(word, tokens, how))
            return sweep(emb, [tokens], word, PER_KIND, state=state).to_dict()

        def done(result) -> None:
            self.model.sweep = result
            self.view.draw_sweep(self.model)
            self.results_changed.emit("sweep")

        self._submit("sweep", "Perturbation sweep", job, done)

    def run_nonce(self) -> None:
        """The In context tab: the word's layer-0 neighbours against the two LMs (the softmax is
        read once per model; a model without one says so in the tab) and its nearest
        occurrences per layer in the chosen corpus index (opened once per folder and model)."""
        emb = self.ws.embedder
        spec = self.ws.model_spec
        if emb is None or spec is None:
            return
        self.view.read(self.model)
        sentence, word = self.model.nonce_sentence, self.model.nonce_word
        checksum = emb.checksum
        soft = self._softmax[1] if self._softmax and self._softmax[0] == checksum else None
        folder = Path(spec.path) if Path(spec.path).is_dir() else Path(spec.path).parent
        known = self._vocabulary_or_last()
        if known is None:
            return
        index_folder = self._index_folder()

        how = self.ws.tokenization

        def job(state):
            return nonce_in_context(emb, self.kept, known, soft, folder, sentence, word,
                                    index_folder, state, tokenization=how)

        def done(out: NonceOutcome) -> None:
            if out.softmax is not None:
                self._softmax = (checksum, out.softmax)
            self.model.nonce, self.model.nonce_problem = out.result, out.problem
            self.model.nonce_index, self.model.nonce_hits = str(out.index_folder or ""), out.hits
            if out.index_folder is not None and not out.index_problem:
                self._index_shown = (self.model.index_source, self.model.index_folder)
                self.view.index_info.setText(out.index_summary)
                self.view.index_info.setToolTip(str(out.index_folder))
            self.view.draw_nonce(self.model)
            if out.vocab_problem:
                self._vocab_failed(out.vocab_problem)
            failed = (self.model.index_source, self.model.index_folder)
            if out.index_problem:
                self._index_failed(out.index_problem)
            self.results_changed.emit("nonce")
            if out.index_problem and (self.model.index_source, self.model.index_folder) != failed:
                self.run_nonce()                 # the occurrences in the last index that worked

        self._submit("nonce", "Nonce word in context", job, done)

    # ---- the corpus index of the In context tab -----------------------------------------------
    def _data_dir(self) -> Path:
        settings = getattr(self.window(), "settings", None)
        if settings is None:
            from elmo_explorer.state.settings import AppSettings

            settings = AppSettings()
        return settings.data_dir()

    def corpus_index_folder(self) -> Optional[Path]:
        """The Corpus view's index of the loaded model: the one it opened last if it is of this
        model and complete, else its default folder's if built; None without either."""
        from elmo_engine.errors import ElmoError
        from elmo_engine.index.store import read_manifest

        emb = self.ws.embedder
        if emb is None:
            return None
        qs = getattr(getattr(self.window(), "settings", None), "qs", None)
        last = qs.value(CORPUS_LAST_INDEX, "", type=str) if qs is not None else ""
        for path in (last, corpus_index.default_index_folder(self._data_dir(), emb.checksum,
                                                            emb.precision)):
            if not path or not os.path.isfile(os.path.join(path, "index.json")):
                continue
            try:
                m = read_manifest(Path(path))
            except ElmoError:
                continue
            if m.complete and m.checksum == emb.checksum:
                return Path(path)
        return None

    def _index_folder(self) -> Optional[Path]:
        """The chosen index's folder (None: no index, or the Corpus view has none of this
        model; the tab's line says which)."""
        src = self.model.index_source
        if src is IndexSource.NONE:
            self.view.index_info.setText("")
            return None
        if src is IndexSource.FOLDER:
            return Path(self.model.index_folder)
        found = self.corpus_index_folder()
        if found is None:
            self.view.index_info.setText("none of this model yet: build one in the Corpus "
                                         "view, or pick a folder")
        return found

    def choose_index(self, value: str) -> None:
        """The In context tab's index choice; "Index…" asks for a folder (Cancel: nothing
        changes)."""
        source = IndexSource(value)
        path = ""
        if source is IndexSource.FOLDER:
            path = QFileDialog.getExistingDirectory(self, "A corpus index folder",
                                                    self.model.index_folder)
            if not path:
                self.view.show_choices(self.model)
                return
        self.set_index(source, path)

    def set_index(self, source: IndexSource, path: str = "") -> None:
        """Search the nonce word's occurrences in ``source`` (a folder at ``path``)."""
        self.model.set_index(source, path)
        self.view.show_choices(self.model)
        self.run_nonce()

    def _index_failed(self, message: str) -> None:
        """A folder that is not an index of this model: one line in the status; the choice
        goes back to the last index that worked (and the occurrences are searched there)."""
        self.model.set_index(*self._index_shown)
        self.view.show_choices(self.model)
        self._show_error(message)

    def _on_progress(self, done: int, total: int, message: str) -> None:
        self.view.show_status(f"{message} ({done}/{total})" if total else message)

    def _on_finished(self) -> None:
        if self.jobs.is_idle():
            self.view.set_busy(False)
            if self._error:
                self.view.show_status(f"Characters: {self._error}", error=True)
            else:
                self.view.show_status(self._note)
            self._note = ""
            self._set_ready()

    def _on_error(self, message: str) -> None:
        self._show_error(message)

    def _new_request(self, *_args) -> None:
        """The user asked for something (or a model or a workspace came): the last failure
        leaves the status once the jobs are done."""
        self._error = ""

    def _show_error(self, message: str) -> None:
        """One line in the status, kept there (progress lines of later jobs aside) until the
        user's next request."""
        self._error = message
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
