"""The contexts view's widgets: the word bar, the heatmaps, the occurrences, the neighbours.

:class:`ContextsView` only shows what it is given (a comparison, a neighbour table, messages)
and holds the user's settings (:class:`~.contexts_model.ContextsSettings`); the controller,
:class:`~elmo_explorer.views.contexts.controller.ContextsPanel`, connects its widgets and computes.
"""
from __future__ import annotations

import logging
import math

import numpy as np
from PySide6.QtCore import QStringListModel, Qt
from PySide6.QtWidgets import (QCheckBox, QComboBox, QCompleter, QHBoxLayout, QHeaderView, QLabel,
                               QLineEdit, QPushButton, QSpinBox, QSplitter, QTableWidget,
                               QTableWidgetItem, QVBoxLayout, QWidget)

from elmo_engine.analysis.contexts import compare as cmp
from elmo_explorer.views.contexts.model import ContextsSettings
from elmo_explorer.views.contexts.widgets import MixWeights, NeighboursView, OccurrenceTable, vbox
from elmo_explorer.views.heatmap import HeatmapGrid
from elmo_explorer.views.layer_norm import layer_norm_box

log = logging.getLogger(__name__)


WORD_FIELD_CHARS = 12   # the word field shows at least this many letters


class ContextsView(QWidget):
    """The widgets of the contexts view."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.word_edit = QLineEdit()
        self.word_edit.setPlaceholderText("word, e.g. bank")
        self.completion = QStringListModel(self)
        self.completer = QCompleter(self.completion, self)
        self.completer.setCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.word_edit.setCompleter(self.completer)
        self.case_box = QCheckBox("ignore case")
        self.direction_box = QComboBox()
        self.direction_box.addItems(list(cmp.DIRECTIONS))
        self.direction_box.setToolTip("both halves, or only the forward (left-context) or "
                                      "backward (right-context) LSTM half of every layer")
        self.correct_box = QCheckBox("anisotropy correction")
        self.correct_box.setToolTip("subtract the mean vector of the neighbour corpus (the loaded "
                                    "sentences, the word's reference-set sentences, the reference "
                                    "text), per layer, before the cosine")
        self.k_box = QSpinBox()
        self.k_box.setRange(1, 100)
        self.k_box.setValue(8)
        self.k_box.setPrefix("k = ")
        self.set_box = QCheckBox("reference set")
        self.set_box.setChecked(True)
        self.set_box.setToolTip("add the word's sentences of the bundled reference set to the "
                                "neighbour corpus: its sense-tagged SemCor sentences first, then "
                                "fiction and textbooks (at most 250)")
        self.ref_button = QPushButton("Reference text…")
        self.ref_button.setToolTip("add a text file (one sentence per line) to the neighbour "
                                   "corpus")
        self.ref_label = QLabel("")
        self.mix = MixWeights()
        self.norm_box = layer_norm_box("layer norm", "all loaded tokens")

        # two rows: in one, at 1280 px wide beside the sentences, the word field was squeezed
        # to a few letters (issue 29); the field keeps room for a word of WORD_FIELD_CHARS
        self.word_edit.setMinimumWidth(
            self.word_edit.fontMetrics().horizontalAdvance("m" * WORD_FIELD_CHARS) + 16)
        first = QHBoxLayout()
        for w in (QLabel("Word:"), self.word_edit, self.case_box, QLabel("direction:"),
                  self.direction_box):
            first.addWidget(w)
        first.addStretch(1)
        second = QHBoxLayout()
        for w in (self.correct_box, self.mix, self.norm_box):
            second.addWidget(w)
        second.addStretch(1)
        top = QVBoxLayout()
        top.setSpacing(2)
        top.addLayout(first)
        top.addLayout(second)
        self.heatmaps = HeatmapGrid()
        self.heatmaps.setMinimumHeight(220)
        self.hover_label = QLabel("Hover over a cell to read its value; click it to see the "
                                  "row's neighbours.")
        self.hover_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.heatmaps.hovered.connect(lambda t: t and self.hover_label.setText(t))
        maps = vbox(self.heatmaps, self.hover_label, stretch=0)
        self.occ_table = OccurrenceTable()
        self.summary = QTableWidget(5, 0)
        self.summary.setVerticalHeaderLabels(["self-similarity", "within groups",
                                              "between groups", "within − between",
                                              "p (permutation)"])
        self.summary.verticalHeader().setDefaultSectionSize(22)
        self.summary.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.summary.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.summary.setVerticalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.summary.setFixedHeight(5 * 22 + 30)
        left = vbox(self.occ_table, self.summary, stretch=0)
        self.neigh_title = QLabel("Nearest neighbours")
        self.neigh_title.setWordWrap(True)
        self.neighbours = NeighboursView()
        head = QHBoxLayout()
        for w in (self.k_box, self.set_box, self.ref_button, self.ref_label):
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

    # ---- settings ---------------------------------------------------------------------------
    def settings(self) -> ContextsSettings:
        return ContextsSettings(self.case_box.isChecked(), self.direction_box.currentText(),
                                self.correct_box.isChecked(), self.mix.weights(),
                                self.k_box.value(), self.norm_box.isChecked(),
                                self.set_box.isChecked())

    def apply_settings(self, s: ContextsSettings) -> None:
        """Show ``s`` without announcing it (the controller recomputes once, after)."""
        boxes = (self.case_box, self.correct_box, self.direction_box, self.k_box, self.mix,
                 self.norm_box, self.set_box)
        for box in boxes:
            box.blockSignals(True)
        try:
            self.case_box.setChecked(s.ignore_case)
            self.correct_box.setChecked(s.corrected)
            self.norm_box.setChecked(s.layer_norm)
            self.set_box.setChecked(s.reference_set)
            self.direction_box.setCurrentText(s.direction)
            self.k_box.setValue(s.k)                         # clamped to the box's range
            if s.weights != self.mix.weights():
                self.mix.set_weights(s.weights)
        finally:
            for box in boxes:
                box.blockSignals(False)

    # ---- showing results --------------------------------------------------------------------
    def fill_summary(self, comp: cmp.Comparison) -> None:
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
        else:
            self.summary.setToolTip(
                "within − between: mean cosine of pairs in the same group minus pairs in "
                "different groups. p: " + comp.test.describe() + " (exact when there are at "
                "most 50,000 relabellings, else 9,999 random ones); ties count as ≥.")

    def show_status(self, text: str) -> None:
        self.status.setStyleSheet("")
        self.status.setText(text)

    def show_error(self, message: str) -> None:
        log.warning("contexts: %s", message)
        self.status.setStyleSheet("color: #b00020;")
        self.status.setText(message)
