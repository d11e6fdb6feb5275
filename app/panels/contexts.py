"""The contexts view: one word across sentences, layer by layer, and its nearest neighbours.

Pick a word (type it, or click a token anywhere in the app): its occurrences in the loaded
sentences are listed, and one cosine-similarity heatmap per layer (0…L and a user-weighted mix)
is drawn side by side, with self-similarity and within/between-group similarity per layer. The
selected occurrence's nearest neighbours per layer come from an index over the loaded sentences
plus an optional reference text file. All computation runs on the workspace's worker
(``elmo_engine.analysis.compare`` / ``elmo_engine.analysis.neighbours``); this module only wires and draws.
"""
from __future__ import annotations

import logging
import math
from collections import Counter
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np
from PySide6.QtCore import QStringListModel, Qt, QTimer, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (QCheckBox, QComboBox, QCompleter, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from elmo_explorer.panels.contexts_export import ContextsExports
from elmo_explorer.panels.contexts_neighbours import ContextsNeighbours
from elmo_explorer.panels.contexts_report import ContextsReport
from elmo_explorer.panels.contexts_widgets import MixWeights, NeighboursView, OccurrenceTable, vbox
from elmo_explorer.panels.heatmap import HeatmapGrid
from elmo_explorer.workspace import TokenRef
from elmo_engine.analysis import compare as cmp
from elmo_engine.analysis.neighbour_corpus import IndexCache
from elmo_engine.analysis.neighbours import NeighbourTable

log = logging.getLogger(__name__)

DEFAULT_WORD = "bank"
MAX_OCCURRENCES = 300
Occ = Tuple[int, int]


def default_word(tokens: List[List[str]]) -> str:
    """"bank" when present, else the most frequent word of 4+ letters seen twice, else ""."""
    counts = Counter(t for s in tokens for t in s)
    if counts.get(DEFAULT_WORD):
        return DEFAULT_WORD
    for word, n in counts.most_common():
        if n >= 2 and len(word) >= 4 and word.isalpha():
            return word
    return next(iter(counts), "")


class ContextsPanel(ContextsNeighbours, ContextsExports, ContextsReport, QWidget):
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
        self.word = ""
        self.comparison: Optional[cmp.Comparison] = None
        self.vectors = None                      # (L+1, n, 2P) of the compared occurrences
        self.query: Optional[Occ] = None         # the occurrence whose neighbours are shown
        self.index = None
        self.table: Optional[NeighbourTable] = None
        self.reference_path: Optional[Path] = None
        self._reference_tokens: List[List[str]] = []
        self._groups: Dict[str, Dict[Occ, str]] = {}
        self._index_sig = None
        self._reference_size = 0
        self._generation = 0
        self._sentences_seen: List[str] = []
        self._index_cache = IndexCache()         # used on the worker thread only
        self._keep_word: Optional[str] = None    # set while a saved view is being restored
        self._pending = {"compare", "neighbours"}
        self._ready = False
        self._build_ui()
        self._actions = self._make_actions()
        ws = self.ws
        ws.model_changed.connect(self._on_model_changed)
        ws.sentences_changed.connect(self._on_sentences_changed)
        ws.activations_changed.connect(self._on_activations_changed)
        ws.tokens_changed.connect(self._update_completer)
        ws.selection_changed.connect(self._on_selection_changed)
        QTimer.singleShot(0, self, self._on_model_changed)

    # ---- UI ---------------------------------------------------------------------------------
    def _build_ui(self) -> None:
        self.word_edit = QLineEdit()
        self.word_edit.setPlaceholderText("word, e.g. bank")
        self._completion = QStringListModel(self)
        completer = QCompleter(self._completion, self)
        completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.word_edit.setCompleter(completer)
        self.word_edit.returnPressed.connect(lambda: self.set_word(self.word_edit.text()))
        completer.activated[str].connect(self.set_word)
        self.case_box = QCheckBox("ignore case")
        self.direction_box = QComboBox()
        self.direction_box.addItems(list(cmp.DIRECTIONS))
        self.direction_box.setToolTip("both halves, or only the forward (left-context) or "
                                      "backward (right-context) LSTM half of every layer")
        self.correct_box = QCheckBox("anisotropy correction")
        self.correct_box.setToolTip("subtract the mean vector of the reference tokens (the loaded "
                                    "sentences + the reference text), per layer, before the cosine")
        self.k_box = QSpinBox()
        self.k_box.setRange(1, 100)
        self.k_box.setValue(8)
        self.k_box.setPrefix("k = ")
        self.ref_button = QPushButton("Reference text…")
        self.ref_button.setToolTip("add a text file (one sentence per line) to the neighbour "
                                   "corpus")
        self.ref_label = QLabel("")
        self.mix = MixWeights()
        for w in (self.case_box, self.correct_box):
            w.toggled.connect(lambda _c: self._request_compare())
        self.direction_box.currentTextChanged.connect(lambda _t: self._recompute_all())
        self.k_box.valueChanged.connect(lambda _v: self._request_neighbours())
        self.mix.changed.connect(lambda _w: self._request_compare())
        self.ref_button.clicked.connect(self._ask_reference)

        top = QHBoxLayout()
        for w in (QLabel("Word:"), self.word_edit, self.case_box, QLabel("direction:"),
                  self.direction_box, self.correct_box, self.mix):
            top.addWidget(w)
        top.addStretch(1)
        self.heatmaps = HeatmapGrid()
        self.heatmaps.setMinimumHeight(220)
        self.hover_label = QLabel("Hover over a cell to read its value; click it to see the "
                                  "row's neighbours.")
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.heatmaps.hovered.connect(lambda t: t and self.hover_label.setText(t))
        self.heatmaps.cell_clicked.connect(lambda _k, i, _j: self.select_occurrence(i))
        maps = vbox(self.heatmaps, self.hover_label, stretch=0)
        self.occ_table = OccurrenceTable()
        self.occ_table.groups_edited.connect(self._on_groups_edited)
        self.occ_table.occurrence_clicked.connect(lambda s, t: self.ws.select(TokenRef(s, t)))
        self.summary = QTableWidget(4, 0)
        self.summary.setVerticalHeaderLabels(["self-similarity", "within groups",
                                              "between groups", "within − between"])
        self.summary.verticalHeader().setDefaultSectionSize(22)
        self.summary.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.summary.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.summary.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.summary.setFixedHeight(4 * 22 + 30)
        left = vbox(self.occ_table, self.summary, stretch=0)
        self.neigh_title = QLabel("Nearest neighbours")
        self.neigh_title.setWordWrap(True)
        self.neighbours = NeighboursView()
        head = QHBoxLayout()
        for w in (self.k_box, self.ref_button, self.ref_label):
            head.addWidget(w)
        head.addStretch(1)
        right = vbox(self.neigh_title, head, self.neighbours, stretch=2)
        lower = QSplitter(Qt.Orientation.Horizontal)
        lower.addWidget(left)
        lower.addWidget(right)
        lower.setSizes([460, 440])
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(maps)
        split.addWidget(lower)
        split.setSizes([330, 400])
        self.status = QLabel("")
        self.status.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(split, 1)
        lay.addWidget(self.status)

    def _make_actions(self) -> List[QAction]:
        spec = [("Heatmap (PNG/SVG/PDF)…", self._ask_export_heatmap),
                ("Similarity matrices (CSV)…", self._ask_export_matrices),
                ("Nearest neighbours (CSV)…", self._ask_export_neighbours),
                ("Occurrence vectors (npz)…", self._ask_export_npz),
                ("Occurrence vectors (TSV)…", self._ask_export_tsv)]
        actions = []
        for text, slot in spec:
            act = QAction(text, self)
            act.triggered.connect(slot)
            act.setEnabled(False)
            actions.append(act)
        return actions

    def export_actions(self) -> List[QAction]:
        return list(self._actions)

    def is_ready(self) -> bool:
        return self._ready

    # ---- workspace events -------------------------------------------------------------------
    def _reset_ready(self) -> None:
        self._ready = False
        self._pending = {"compare", "neighbours"}

    def _done(self, what: str) -> None:
        self._pending.discard(what)
        if not self._pending and not self._ready:
            self._ready = True
            self.ready.emit()

    def _on_model_changed(self) -> None:
        self._reset_ready()
        self.index, self._index_sig, self.table = None, None, None
        self.mix.set_layers(self.ws.n_layers)
        self._on_sentences_changed()

    def _on_sentences_changed(self) -> None:
        self._generation += 1                          # results of older jobs are dropped
        self._reset_ready()
        self._carry_groups()
        self._update_completer()
        self.comparison = None
        self.index, self._index_sig = None, None       # rebuilt (or found in the cache)
        for act in self._actions:
            act.setEnabled(False)
        if self.ws.model_info is None and not self.ws.is_loading():
            self._show_status("Load a model to compare contexts.")
            self._done("compare")
            self._done("neighbours")
        self._on_activations_changed()

    def _on_activations_changed(self) -> None:
        if not self.word:
            word = default_word(self.ws.tokens)
            if word:
                self.word = word
                self.word_edit.setText(word)
        if self.comparison is None and self.word:
            self._request_compare()
        self._request_index()

    def _carry_groups(self) -> None:
        """Keep the user's group labels on sentences that are still there (found by text)."""
        old, new = self._sentences_seen, list(self.ws.sentences)
        if old == new:
            return
        where: Dict[str, int] = {}
        for i, text in enumerate(new):
            where.setdefault(text, i)
        self._groups = {w: {(where[old[s]], t): g for (s, t), g in labels.items()
                            if s < len(old) and old[s] in where}
                        for w, labels in self._groups.items()}
        self._sentences_seen = new

    def _update_completer(self) -> None:
        counts = Counter(t for s in self.ws.tokens for t in s)
        self._completion.setStringList([w for w, _ in counts.most_common()])
        if not self.word and self.ws.tokens:
            self._on_activations_changed()

    def _on_selection_changed(self, ref) -> None:
        if ref is None:
            return
        word = self.ws.word_at(ref)
        occ = (ref.sentence, ref.token)
        if self._keep_word is not None and word != self._keep_word:
            return                      # a restored view keeps its word, not the selection's
        if word != self.word and not (self.case_box.isChecked()
                                      and word.casefold() == self.word.casefold()):
            self.query = occ
            self.set_word(word)
            return
        if occ != self.query:
            self.query = occ
            self.occ_table.select_occurrence(occ)
            self._request_neighbours()

    # ---- user actions (also the API the tests drive) -----------------------------------------
    def set_word(self, word: str) -> None:
        """Compare the occurrences of ``word`` (and show its neighbours)."""
        word = word.strip()
        if " " in word:
            word = word.split()[0]
        self.word_edit.setText(word)
        if word == self.word and self.comparison is not None:
            return
        self.word = word
        self.comparison = None
        self.ws.worker.cancel_group("contexts-neighbours")    # they were for the old word
        self._request_compare()

    def set_direction(self, direction: str) -> None:
        self.direction_box.setCurrentText(direction)

    def set_corrected(self, on: bool) -> None:
        self.correct_box.setChecked(on)

    def set_weights(self, weights) -> None:
        self.mix.set_weights(weights)

    def set_group(self, row: int, label: str) -> None:
        self.occ_table.set_group(row, label)

    def select_occurrence(self, row: int) -> None:
        s, t = self.occ_table.occurrences[row]
        self.ws.select(TokenRef(s, t))

    def _on_groups_edited(self) -> None:
        self._groups[self.word] = self.occ_table.groups()
        self._request_compare()

    def _recompute_all(self) -> None:
        self._request_compare()
        self._request_neighbours()

    # ---- comparison -----------------------------------------------------------------------------
    def _request_compare(self) -> None:
        ws = self.ws
        if not self.word or not ws.all_embedded():
            return                                   # activations_changed will ask again
        tokens, acts = list(ws.tokens), list(ws.activations)
        word, ignore = self.word, self.case_box.isChecked()
        weights = self.mix.weights() or None
        direction, corrected = self.direction_box.currentText(), self.correct_box.isChecked()
        groups = dict(self._groups.get(word, {}))
        index = self.index
        center = index.mean if corrected and index is not None else None
        n_ref = index.n_tokens if center is not None else sum(len(t) for t in tokens)
        self._reference_size = n_ref
        gen = self._generation

        def job(state):
            return cmp.compare_word(tokens, acts, word, weights, direction, corrected, groups,
                                    ignore, MAX_OCCURRENCES, center)

        ws.worker.submit(f"Comparing '{word}' across contexts", job,
                         on_result=lambda r: self._on_compared(word, tokens, r, gen),
                         on_error=self._on_compare_failed, group="contexts")

    def _on_compared(self, word: str, tokens, result, generation: int) -> None:
        if word != self.word or generation != self._generation:
            return
        comp, vectors, total = result
        self.comparison, self.vectors = comp, vectors
        if comp is None:
            self.occ_table.set_occurrences([], tokens, {})
            self.heatmaps.clear_data(f"'{word}' does not occur in the loaded sentences")
            self.summary.setColumnCount(0)
            self._show_status(f"'{word}' does not occur in the loaded sentences; below are the "
                              "nearest known words to its character-CNN vector (layer 0) and "
                              "the neighbours of the word on its own in the other layers.")
        else:
            self.occ_table.set_occurrences(comp.occurrences, tokens,
                                           self._groups.get(word, {}))
            self.heatmaps.set_data(comp.names, comp.matrices, comp.labels)
            self._fill_summary(comp)
            more = f" (the first {len(comp.occurrences)} of {total})" if total > len(
                comp.occurrences) else ""
            corr = (f", corrected by the mean of {self._reference_size:,} tokens"
                    if comp.corrected else "")
            self._show_status(f"'{word}': {len(comp.occurrences)} occurrences{more}; "
                              f"{comp.direction} halves{corr}; mix weights "
                              + " ".join(f"{w:.2f}" for w in comp.weights))
            if self.query not in comp.occurrences:
                self.query = comp.occurrences[0]
            self.occ_table.select_occurrence(self.query)
        for act in self._actions:
            act.setEnabled(comp is not None)
        self._actions[2].setEnabled(self.table is not None)
        self.comparison_drawn.emit()
        self._done("compare")
        self._request_neighbours()

    def _on_compare_failed(self, message: str) -> None:
        self._show_error(message)
        self._done("compare")

    def _fill_summary(self, comp: cmp.Comparison) -> None:
        self.summary.setColumnCount(len(comp.names))
        self.summary.setHorizontalHeaderLabels(list(comp.names))
        for r, (_name, values) in enumerate(comp.summary_rows()):
            for c, v in enumerate(values):
                item = QTableWidgetItem("—" if math.isnan(v) else f"{v:.3f}")
                item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.summary.setItem(r, c, item)
        if np.isnan(comp.within).all():
            self.summary.setToolTip("type group labels (e.g. senses) in the occurrence list to "
                                    "see within- vs between-group similarity")

    # ---- messages -------------------------------------------------------------------------------
    def _show_status(self, text: str) -> None:
        self.status.setStyleSheet("")
        self.status.setText(text)

    def _show_error(self, message: str) -> None:
        log.warning("contexts: %s", message)
        self.status.setStyleSheet("color: #b00020;")
        self.status.setText(message)
        self.failed.emit(message)
