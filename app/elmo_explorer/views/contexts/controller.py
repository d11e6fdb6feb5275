"""The contexts view: one word across sentences, layer by layer, and its nearest neighbours.

Pick a word (type it, or click a token anywhere in the app): its occurrences in the loaded
sentences are listed, and one cosine-similarity heatmap per layer (0…L and a user-weighted mix)
is drawn side by side, with self-similarity and within/between-group similarity per layer. The
selected occurrence's nearest neighbours per layer come from an index over the loaded sentences
plus an optional reference text file. All computation runs on the workspace's worker
(``elmo_engine.analysis.compare`` / ``elmo_engine.analysis.neighbours``).

Model, view, controller: :class:`~.contexts_model.ContextsModel` (the word, its comparison, the
neighbour corpus; no Qt), :class:`~.contexts_view.ContextsView` (the widgets) and
:class:`ContextsPanel`, which computes on the worker; its neighbour, export and report parts
are :class:`~.contexts_neighbours.ContextsNeighbours`, :class:`~.contexts_export.ContextsExports`
and :class:`~.contexts_report.ContextsReport`.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any, Dict, List

from PySide6.QtCore import QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QVBoxLayout, QWidget

from elmo_engine.analysis import compare as cmp
from elmo_engine.analysis.groups import word_groups
from elmo_engine.analysis.neighbour_corpus import IndexCache
from elmo_engine.io.report import ReportTable
from elmo_explorer.common.figure_export import FigureOptions
from elmo_explorer.views.contexts.export import ContextsExports
from elmo_explorer.views.contexts.model import (MAX_OCCURRENCES, ContextsModel,
                                                 groups_from_state, settings_from_state,
                                                 valid_ref)
from elmo_explorer.views.contexts.neighbours import COMPARE, INDEX, NEIGHBOURS, ContextsNeighbours
from elmo_explorer.views.contexts.report import ContextsReport
from elmo_explorer.views.contexts.view import ContextsView
from elmo_explorer.state.worker import Lane
from elmo_explorer.state.workspace import TokenRef
from elmo_explorer.views.protocol import PanelDefaults
from elmo_explorer.views.words import default_word

__all__ = ["ContextsPanel", "default_word"]


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
        self.nearest = ContextsNeighbours(self)
        self.exports = ContextsExports(self)
        self.report = ContextsReport(self)
        self._actions = self.exports.make_actions()
        v = self.view
        v.word_edit.returnPressed.connect(lambda: self.set_word(v.word_edit.text()))
        v.completer.activated[str].connect(self.set_word)
        for w in (v.case_box, v.correct_box, v.norm_box):
            w.toggled.connect(lambda _c: self.request_compare())
        v.direction_box.currentTextChanged.connect(lambda _t: self._recompute_all())
        v.k_box.valueChanged.connect(lambda _v: self.nearest.request_neighbours())
        v.mix.changed.connect(lambda _w: self.request_compare())
        v.ref_button.clicked.connect(self.nearest.ask_reference)
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
        return list(self._actions)

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
        ref = state.get("reference_file")
        if isinstance(ref, str) and ref and Path(ref).is_file() and (
                m.reference_path is None or Path(ref) != m.reference_path):
            self.nearest.set_reference_file(ref)

    def report_figures(self, folder: Path, options: FigureOptions) -> List[Path]:
        return self.report.figures(folder, options)

    def report_tables(self) -> List[ReportTable]:
        return self.report.tables()

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
            self.ws.worker.invalidate(kind)
        self.request_compare()

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

    def set_reference_file(self, path) -> None:
        """Add a text file's sentences to the neighbour corpus (read on the worker)."""
        self.nearest.set_reference_file(path)

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
            self.ws.worker.invalidate(kind)
        m.reset_ready()
        m.carry_groups(self.ws.sentences)
        self._update_completer()
        m.comparison = None
        m.index, m.index_sig = None, None              # rebuilt (or found in the cache)
        for act in self._actions:
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
        self.nearest.request_index()

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
            self.nearest.request_neighbours()

    def _on_groups_edited(self) -> None:
        self.model.groups[self.model.word] = self.view.occ_table.groups()
        self.request_compare()

    def _recompute_all(self) -> None:
        self.request_compare()
        self.nearest.request_neighbours()

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
                                    ignore, MAX_OCCURRENCES, center, layer_norm)

        ws.worker.submit(f"Comparing '{word}' across contexts", job, lane=Lane.INTERACTIVE,
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
        for act in self._actions:
            act.setEnabled(comp is not None)
        self._actions[2].setEnabled(m.table is not None)
        self.comparison_drawn.emit()
        self.done("compare")
        self.nearest.request_neighbours()

    def _on_compare_failed(self, message: str) -> None:
        self.show_error(message)
        self.done("compare")

    def show_error(self, message: str) -> None:
        self.view.show_error(message)
        self.failed.emit(message)
