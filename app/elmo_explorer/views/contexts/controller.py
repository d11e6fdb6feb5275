"""The contexts view: one word across sentences, layer by layer, and its nearest neighbours.

Pick a word (type it, or click a token anywhere in the app): its occurrences in the loaded
sentences are listed, and one cosine-similarity heatmap per layer (0…L and a user-weighted mix)
is drawn side by side, with self-similarity and within/between-group similarity per layer. The
selected occurrence's nearest neighbours per layer come from an index over the loaded sentences
plus an optional reference text file. All computation runs on the workspace's worker
(``elmo_engine.analysis.contexts.compare`` / ``elmo_engine.analysis.contexts.neighbours``).

Model, view, controller: :class:`~.model.ContextsModel` (the word, its comparison, the
neighbour corpus; no Qt), :class:`~.view.ContextsView` (the widgets) and :class:`ContextsPanel`,
which computes on the worker (the comparison and the neighbours on the interactive lane, the
corpus index on the long one). Its exports and report parts are functions of values
(:mod:`.export`, :mod:`.report`); the neighbour corpus's reading rules are in
:mod:`.neighbours`.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Dict, List, Optional

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.analysis.contexts import compare as cmp
from elmo_engine.analysis.contexts.groups import word_groups
from elmo_engine.analysis.contexts.neighbour_corpus import (IndexCache, read_corpus, read_vocabulary,
                                                       vocabulary_file)
from elmo_engine.analysis.contexts.neighbours import NeighbourTable, neighbour_table
from elmo_engine.io.datasets.reference_set import REFERENCE_SET_SENTENCES, reference_set_corpus
from elmo_explorer.common.figure_export import panel_figure_options, save_figure
from elmo_explorer.common.save_dialog import ask_save_path, open_file_name
from elmo_explorer.state.worker import Lane
from elmo_explorer.state.workspace import TokenRef
from elmo_explorer.views.contexts import export, report
from elmo_explorer.views.contexts.model import (ContextsModel, groups_from_state,
                                                neighbour_corpus, settings_from_state, valid_ref)
from elmo_explorer.views.contexts.view import ContextsView
from elmo_explorer.views.contexts.widgets import neighbours_html
from elmo_explorer.views.protocol import PanelDefaults
from elmo_explorer.views.reading import CorpusReading
from elmo_explorer.views.reading_dialog import ask_reading, window_qsettings
from elmo_explorer.state.words import default_word

__all__ = ["ContextsPanel", "default_word"]

#: the request kinds of the view's jobs (a newer request of a kind supersedes older ones)
COMPARE, INDEX, NEIGHBOURS = "compare", "index", "neighbours"
CANCELLED = ("cancelled",)          # the index mark of a cancelled build: built when asked
READING_KEY = "contexts/reference_reading"     # how the last reference text was read (JSON)


class ContextsPanel(PanelDefaults, QWidget):
    """Cross-context similarity of one word and contextual nearest neighbours."""

    title = "Contexts"
    ready = Signal()
    comparison_drawn = Signal()
    neighbours_drawn = Signal()
    exported = Signal(str)
    failed = Signal(str)

    def __init__(self, workspace, parent=None):
        super().__init__(parent)
        self.ws = workspace
        self.model = ContextsModel()
        self.view = ContextsView(self)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.view)
        self.index_cache = IndexCache()          # used on the worker thread only
        self.jobs = workspace.worker.group("contexts", self.title)
        self._actions: Dict[str, QAction] = {}
        for key, text in export.ENTRIES:
            act = QAction(text, self)
            act.triggered.connect(lambda _=False, k=key: self.ask_export(k))
            act.setEnabled(False)                # until there is something to export
            self._actions[key] = act
        v = self.view
        v.word_edit.returnPressed.connect(lambda: self.set_word(v.word_edit.text()))
        v.completer.activated[str].connect(self.set_word)
        for w in (v.case_box, v.correct_box, v.norm_box):
            w.toggled.connect(lambda _c: self.request_compare())
        v.direction_box.currentTextChanged.connect(lambda _t: self._recompute_all())
        v.k_box.valueChanged.connect(lambda _v: self.request_neighbours())
        v.mix.changed.connect(lambda _w: self.request_compare())
        v.ref_button.clicked.connect(self.ask_reference)
        v.set_box.toggled.connect(lambda _on: self.request_index())
        v.heatmaps.cell_clicked.connect(lambda _k, i, _j: self.select_occurrence(i))
        v.occ_table.groups_edited.connect(self._on_groups_edited)
        v.occ_table.occurrence_clicked.connect(lambda s, t: self.ws.select(TokenRef(s, t)))
        ws = self.ws
        ws.model_changed.connect(self._on_model_changed)
        ws.sentences_changed.connect(self._on_sentences_changed)
        ws.activations_changed.connect(self._on_activations_changed)
        ws.tokens_changed.connect(self._update_completer)
        ws.selection_changed.connect(self._on_selection_changed)
        QTimer.singleShot(0, self, self._on_model_changed)

    # ---- the AnalysisPanel protocol -----------------------------------------------------------
    def is_ready(self) -> bool:
        return self.model.ready

    def export_actions(self) -> List[QAction]:
        return list(self._actions.values())

    def view_state(self) -> Dict[str, Any]:
        """The view's parameters as JSON values (see docs/guide/contexts.md)."""
        return self.model.view_state(self.view.settings())

    def restore_view_state(self, state: Dict[str, Any]) -> None:
        """Apply a ``view_state()`` dict; missing, unknown or invalid keys are ignored."""
        if not isinstance(state, dict):
            return
        m, tokens = self.model, self.ws.tokens
        self.view.apply_settings(settings_from_state(state, self.view.settings()))
        groups = groups_from_state(state.get("groups"), tokens)
        if groups is not None:
            m.groups = groups
        sel = state.get("selected")
        if isinstance(sel, dict) and valid_ref(tokens, sel.get("sentence"), sel.get("token")):
            m.query = (sel["sentence"], sel["token"])
        word = state.get("word")
        if isinstance(word, str) and word.strip():
            m.keep_word = word.strip()           # the workspace's selection follows in this call
            QTimer.singleShot(0, self, lambda: setattr(m, "keep_word", None))
            m.word = ""                          # recompute even when it is the same word
            self.set_word(word)
        else:
            self._recompute_all()
        ref, how = state.get("reference_file"), CorpusReading.from_dict(
            state.get("reference_reading"))
        if isinstance(ref, str) and ref and Path(ref).is_file() and (
                m.reference_path is None or Path(ref) != m.reference_path
                or how != m.reference_reading):
            self.set_reference_file(ref, how)

    # ---- what the tests and scripts drive -----------------------------------------------------
    def set_word(self, word: str) -> None:
        """Compare the occurrences of ``word`` (and show its neighbours)."""
        word = word.strip()
        if " " in word:
            word = word.split()[0]
        self.view.word_edit.setText(word)
        if word == self.model.word and self.model.comparison is not None:
            return
        self.model.word = word
        self.model.comparison = None
        for kind in (COMPARE, NEIGHBOURS):            # they were for the old word
            self.jobs.invalidate(kind)
        self.request_compare()
        self.request_index()                          # the word's reference-set sentences

    def set_direction(self, direction: str) -> None:
        self.view.direction_box.setCurrentText(direction)

    def set_corrected(self, on: bool) -> None:
        self.view.correct_box.setChecked(on)

    def set_weights(self, weights) -> None:
        self.view.mix.set_weights(weights)

    def set_group(self, row: int, label: str) -> None:
        self.view.occ_table.set_group(row, label)

    def select_occurrence(self, row: int) -> None:
        s, t = self.view.occ_table.occurrences[row]
        self.ws.select(TokenRef(s, t))

    # ---- workspace events -------------------------------------------------------------------
    def done(self, what: str) -> None:
        """A job of the current data finished ("compare" or "neighbours")."""
        if self.model.done(what):
            self.ready.emit()

    def _on_model_changed(self) -> None:
        self.model.reset_ready()
        self.model.index, self.model.index_sig, self.model.table = None, None, None
        self.view.mix.set_layers(self.ws.n_layers)
        self._on_sentences_changed()

    def _on_sentences_changed(self) -> None:
        m = self.model
        for kind in (COMPARE, INDEX, NEIGHBOURS):      # results of older jobs are dropped
            self.jobs.invalidate(kind)
        m.reset_ready()
        m.carry_groups(self.ws.sentences)
        self._update_completer()
        m.comparison = None
        m.index, m.index_sig, m.table = None, None, None   # rebuilt (or found in the cache)
        for act in self._actions.values():
            act.setEnabled(False)
        if self.ws.model_info is None and not self.ws.is_loading():
            self.view.show_status("Load a model to compare contexts.")
            self.done("compare")
            self.done("neighbours")
        self._on_activations_changed()

    def _on_activations_changed(self) -> None:
        m = self.model
        if not m.word:
            word = default_word(self.ws.tokens)
            if word:
                m.word = word
                self.view.word_edit.setText(word)
        if m.comparison is None and m.word:
            self.request_compare()
        self.request_index()

    def _update_completer(self) -> None:
        counts = Counter(t for s in self.ws.tokens for t in s)
        self.view.completion.setStringList([w for w, _ in counts.most_common()])
        if not self.model.word and self.ws.tokens:
            self._on_activations_changed()

    def _on_selection_changed(self, ref) -> None:
        if ref is None:
            return
        m = self.model
        word = self.ws.word_at(ref)
        occ = (ref.sentence, ref.token)
        if m.keep_word is not None and word != m.keep_word:
            return                      # a restored view keeps its word, not the selection's
        if word != m.word and not (self.view.case_box.isChecked()
                                   and word.casefold() == m.word.casefold()):
            m.query = occ
            self.set_word(word)
            return
        if occ != m.query:
            m.query = occ
            self.view.occ_table.select_occurrence(occ)
            self.request_neighbours()

    def _on_groups_edited(self) -> None:
        self.model.groups[self.model.word] = self.view.occ_table.groups()
        self.request_compare()

    def _recompute_all(self) -> None:
        self.request_compare()
        self.request_neighbours()

    # ---- comparison -------------------------------------------------------------------------
    def request_compare(self) -> None:
        ws, m = self.ws, self.model
        if not m.word or not ws.all_embedded():
            return                                   # activations_changed will ask again
        tokens, acts = list(ws.tokens), list(ws.activations)
        s = self.view.settings()
        word, ignore, weights = m.word, s.ignore_case, s.weights or None
        direction, corrected = s.direction, s.corrected
        if not m.groups.get(word):                 # a group<TAB>sentence file's senses
            found = word_groups(word, tokens, [ws.sentence_groups.get(t, "")
                                               for t in ws.sentences])
            if found:
                m.groups[word] = found
        groups = dict(m.groups.get(word, {}))
        layer_norm = s.layer_norm
        index = m.index
        center = index.mean if corrected and index is not None else None
        m.reference_size = index.n_tokens if center is not None else sum(len(t) for t in tokens)

        def job(state):
            return cmp.compare_word(tokens, acts, word, weights, direction, corrected, groups,
                                    ignore, cmp.MAX_OCCURRENCES, center, layer_norm)

        self.jobs.submit(f"Comparing '{word}' across contexts", job, lane=Lane.INTERACTIVE,
                         kind=COMPARE, on_done=lambda r: self._on_compared(word, tokens, r),
                         on_failed=self._on_compare_failed)

    def _on_compared(self, word: str, tokens, result) -> None:
        """The comparison of the current request (the worker drops superseded ones)."""
        m, v = self.model, self.view
        comp, vectors, total = result
        m.comparison, m.vectors = comp, vectors
        if comp is None:
            v.occ_table.set_occurrences([], tokens, {})
            v.heatmaps.clear_data(f"'{word}' does not occur in the loaded sentences")
            v.summary.setColumnCount(0)
            v.show_status(f"'{word}' does not occur in the loaded sentences; below are the "
                          "nearest known words to its character-CNN vector (layer 0) and "
                          "the neighbours of the word on its own in the other layers.")
        else:
            v.occ_table.set_occurrences(comp.occurrences, tokens, m.groups.get(word, {}))
            v.heatmaps.set_data(comp.names, comp.matrices, comp.labels, comp.groups)
            v.fill_summary(comp)
            more = f" (the first {len(comp.occurrences)} of {total})" if total > len(
                comp.occurrences) else ""
            corr = (f", corrected by the mean of {m.reference_size:,} tokens"
                    if comp.corrected else "")
            v.show_status(f"'{word}': {len(comp.occurrences)} occurrences{more}; "
                          f"{comp.direction} halves{corr}; mix weights "
                          + " ".join(f"{w:.2f}" for w in comp.weights)
                          + (", layers normalised" if comp.layer_norm else ""))
            if m.query not in comp.occurrences:
                m.query = comp.occurrences[0]
            v.occ_table.select_occurrence(m.query)
        for act in self._actions.values():
            act.setEnabled(comp is not None)
        self._actions["neighbours"].setEnabled(m.table is not None)
        self.comparison_drawn.emit()
        self.done("compare")
        self.request_neighbours()

    def _on_compare_failed(self, message: str) -> None:
        self.show_error(message)
        self.done("compare")

    def show_error(self, message: str) -> None:
        self.view.show_error(message)
        self.failed.emit(message)

    # ---- neighbours: the reference corpus, its index, the table ------------------------------
    def set_reference_file(self, path, reading: CorpusReading = CorpusReading()) -> None:
        """Add a text file's sentences, read as ``contexts --reference`` reads it with the
        same options, to the neighbour corpus (read on the worker)."""
        path, m = Path(path), self.model

        def done(tokens) -> None:
            m.reference_path, m.reference_tokens, m.reference_reading = path, tokens, reading
            how = reading.describe()
            self.view.ref_label.setText(f"{path.name}: {len(tokens):,} sentences"
                                        + (f" ({how})" if how else ""))
            self.request_index()

        self.jobs.submit(f"Reading {path.name}", lambda state: read_corpus(
            path, reading.pretokenized, reading.split_sentences).sentences,
                              kind="reference", on_done=done, on_failed=self.show_error)

    def ask_reference(self) -> None:
        name = open_file_name(self, "Reference text", "Text (*.txt *.txt.gz);;All files (*)")
        reading = ask_reading(self, window_qsettings(self), READING_KEY, "Add a reference text",
                              "Add", [Path(name)], "Add") if name else None
        if reading is not None:
            self.set_reference_file(name, reading)

    def request_index(self) -> None:
        """Index the neighbour corpus (the loaded sentences first, so that their indices match
        the workspace's, then the word's sentences of the bundled reference set, then the
        reference text) on the long lane; cached by checksum + corpus tokens + vocabulary.
        Layer 0 answers with known words."""
        ws, m = self.ws, self.model
        if ws.embedder is None or not ws.all_embedded():
            return
        set_word = m.word.casefold() if self.view.set_box.isChecked() else ""
        loaded = tuple(map(tuple, ws.tokens))
        text = tuple(map(tuple, m.reference_tokens))
        sig = (ws.model_info.checksum if ws.model_info else "", loaded, set_word, text)
        if sig == m.index_sig:
            return
        m.index_sig = sig
        m.index, m.table = None, None      # neighbours wait for this corpus's index
        self._actions["neighbours"].setEnabled(False)
        self.jobs.invalidate(NEIGHBOURS)               # they were for the old corpus
        info = ws.model_info
        emb, cache = ws.embedder, self.index_cache
        settings = getattr(self.window(), "settings", None)     # in a window: kept on disk too
        if settings is not None and cache.cache_dir is None:
            cache.cache_dir = Path(settings.data_dir()) / "cache" / "neighbours"
        vocab = vocabulary_file(info.options_path if info is not None else None)

        def job(state):
            words = read_vocabulary(vocab) if vocab is not None else []
            extra = reference_set_corpus(set_word, REFERENCE_SET_SENTENCES) if set_word else []
            return cache.get_or_build(emb, neighbour_corpus(loaded, extra, text), words, state)

        def done(index) -> None:                 # (a changed model or corpus superseded older ones)
            m.index = index
            if self.view.correct_box.isChecked():
                self.request_compare()           # the corpus mean is the better reference
            self.request_neighbours()

        def failed(message: str) -> None:
            m.index_sig = None
            self.show_error(message)
            self.done("neighbours")

        def cancelled() -> None:                 # Esc: built again when the neighbours are asked
            if m.index_sig == sig and m.index is None:
                m.index_sig = CANCELLED
            self.view.show_status("Cancelled: the neighbour index is built again when the "
                                  "neighbours are asked for.")
            self.done("neighbours")

        self.jobs.submit("Indexing the neighbour corpus", job, lane=Lane.LONG, kind=INDEX,
                         on_done=done, on_failed=failed, on_cancelled=cancelled)

    def request_neighbours(self) -> None:
        ws, m, v = self.ws, self.model, self.view
        index = m.index
        if index is None or not m.word:
            if m.index_sig == CANCELLED:             # (not a failed one: its error stays)
                self.request_index()
            return                                   # the index job asks again when it is done
        vec, exclude = None, []
        if m.comparison is not None and m.query in m.comparison.occurrences:
            s, t = m.query
            act = ws.activations[s] if s < len(ws.activations) else None
            if act is None:
                return
            vec = act[:, t].copy()                                  # (L+1, 2P)
            exclude = [m.query]
        emb, word, k = ws.embedder, m.word, v.k_box.value()
        direction = v.direction_box.currentText()
        query = m.query if vec is not None else None

        def job(state):
            if vec is None:                   # not in the sentences: the word on its own
                alone = emb.embed([[word]])[0][:, 0]                # (L+1, 2P)
                return neighbour_table(index, alone, word, k, direction)
            return neighbour_table(index, vec, word, k, direction, exclude)

        self.jobs.submit(f"Nearest neighbours of '{word}'", job, lane=Lane.INTERACTIVE,
                         kind=NEIGHBOURS, on_done=lambda t: self._on_neighbours(t, query, index),
                         on_failed=lambda msg: (self.show_error(msg), self.done("neighbours")))

    def _on_neighbours(self, table: NeighbourTable, query, index) -> None:
        """The neighbours of the current request (the worker drops superseded ones)."""
        m, v = self.model, self.view
        m.table = table
        where = ""
        if query is not None:
            where = (f" (the occurrence in sentence {query[0] + 1}; "
                     f"{v.direction_box.currentText()} halves)")
        v.neigh_title.setText(f"Nearest neighbours of '{table.query}'{where}")
        layers = [(name, [(nb.score, index.tokens[nb.sentence], nb.token) for nb in nbs])
                  for name, nbs in table.layers]
        note = "" if query is not None else (
            "not in the loaded sentences: the word on its own (no context); add a sentence "
            "with it to see its neighbours in context")
        v.neighbours.setHtml(neighbours_html(f"corpus: {index.n_tokens:,} tokens, "
                                             f"{len(index.words or [])} known words",
                                             table.words, layers, note))
        self._actions["neighbours"].setEnabled(True)
        self.neighbours_drawn.emit()
        self.done("neighbours")

    # ---- exports (export_*: no dialogs, for tests and scripts; ask_export: dialogs) ------------
    def export_heatmap(self, path, view: Optional[int] = None) -> None:
        """One heatmap (``view`` index) or all side by side (None) as a figure with titles,
        labelled axes, the groups and a labelled colour bar (the engine's figure path, at the
        report figure size/DPI); PNG, SVG or PDF by extension."""
        try:
            save_figure(report.heatmap_figure(self.model.comparison, view), path,
                        panel_figure_options(self))
        except Exception as exc:                     # broad on purpose: shown to the user
            self.show_error(f"could not export the heatmap: {exc}")
            return
        self._exported(Path(path))

    def export_matrices_csv(self, path) -> None:
        self._write("similarity matrices", path, export.matrices_writer(self.model.comparison))

    def export_neighbours_csv(self, path) -> None:
        self._write("neighbours", path, export.neighbours_writer(export.neighbour_rows(self.model)))

    def export_vectors_npz(self, path) -> None:
        """Vectors (all layers, both halves) of the selected occurrences (all if ≤ 1 selected)."""
        rows, occ, meta = self._selected()
        self._write("vectors", path, export.vectors_npz_writer(self.model.vectors, rows, occ, meta))

    def export_vectors_tsv(self, path, view: int = -1) -> None:
        """One view's vectors (current direction) as projector TSV + ``.metadata.tsv``."""
        rows, _occ, meta = self._selected()
        self._write("vectors", path, export.vectors_tsv_writer(
            self.model.comparison, self.model.vectors, rows, meta, view, path))

    def ask_export(self, key: str) -> None:
        """File → Export: ask (the view, the file), then export."""
        comp = self.model.comparison
        if key != "neighbours" and comp is None:
            self.show_error(export.NOTHING_YET)
            return
        view = export.ask_view(self, comp, key == "heatmap") if key in ("heatmap", "tsv") else 0
        if view is None:
            return
        path = ask_save_path(self, *export.SAVE_DIALOGS[key])
        if not path:
            return
        if key == "heatmap":
            self.export_heatmap(path, None if view < 0 else view)
        elif key == "tsv":
            self.export_vectors_tsv(path, view)
        else:
            {"matrices": self.export_matrices_csv, "neighbours": self.export_neighbours_csv,
             "npz": self.export_vectors_npz}[key](path)

    def _selected(self):
        return export.selected(self.model.comparison, self.view.occ_table.selected_rows(),
                               self.ws.tokens)

    def _write(self, what: str, path, write) -> None:
        path = Path(path)
        self.jobs.submit(f"Writing {what}", lambda state: write(path),
                              on_done=lambda _r: self._exported(path), on_failed=self.show_error)

    def _exported(self, path: Path) -> None:
        self.view.show_status(f"wrote {path}")
        self.exported.emit(str(path))
