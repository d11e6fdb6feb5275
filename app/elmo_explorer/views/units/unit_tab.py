"""The Units view's Unit tab: one unit (layer, direction, state, number) and its top contexts
over the reference corpus, a file or a corpus index (keyword in context, Karpathy et al. 2015),
with its values per label as histograms when a ranking is shown."""
from __future__ import annotations

from typing import Optional

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QSplitter,
                               QVBoxLayout, QWidget)

from elmo_engine.analysis.units.corpus import CORPUS_TOKENS
from elmo_explorer.views.units.corpus_choice import CorpusChoice
from elmo_explorer.views.units.model import (CONTEXTS_DEFAULT, DIRECTIONS,
                                             STATE_NAMES, STATES, UnitChoice, UnitContexts)
from elmo_explorer.views.units.widgets import align, fill, table

COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]


class UnitTab(QWidget):
    """Signals: ``contexts_requested()``; ``choice_changed()`` (layer, direction, state or
    unit: once per :meth:`set_unit_choice`)."""

    contexts_requested = Signal()
    choice_changed = Signal()

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.u_layer = QSpinBox()
        self.u_layer.setRange(0, 1)
        self.u_direction = QComboBox()
        self.u_direction.addItems(list(DIRECTIONS))
        self.u_state = QComboBox()
        for st in STATES:
            self.u_state.addItem(STATE_NAMES[st], st)
        self.u_unit = QSpinBox()
        self.u_unit.setRange(0, 100_000)
        self.contexts_button = QPushButton("Top contexts")
        self.contexts_button.setToolTip(
            f"the unit's highest and lowest positions over the corpus below (a file's first "
            f"{CORPUS_TOKENS:,} words, an index's every sentence, as units top reads them) and, "
            "with a ranking shown, its values per label")
        self.corpus = CorpusChoice("Contexts from", CONTEXTS_DEFAULT, indexes=True)
        for text, x in (("Layer", self.u_layer), ("Direction", self.u_direction),
                        ("State", self.u_state), ("Unit", self.u_unit)):
            row.addWidget(QLabel(text))
            row.addWidget(x)
        row.addWidget(self.contexts_button)
        self.u_note = QLabel("Select a row of the ranking, or choose a unit.")
        self.u_note.setWordWrap(True)
        row.addWidget(self.u_note, 1)
        lay.addLayout(row)
        lay.addWidget(self.corpus)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.contexts = table(["value", "left", "word", "right"])
        self.hist = pg.PlotWidget(background="w")
        self.hist.setMouseEnabled(False, False)
        self.hist.getAxis("left").enableAutoSIPrefix(False)      # shares as 0.8, not 800 ×0.001
        self.hist.setTitle("values per label (rank first)", size="9pt")
        self.hist_legend = self.hist.addLegend(offset=(5, 5))
        split.addWidget(self.contexts)
        split.addWidget(self.hist)
        split.setSizes([700, 360])
        lay.addWidget(split, 1)
        self.contexts_button.clicked.connect(self.contexts_requested)
        self._fields = (self.u_layer, self.u_direction, self.u_state, self.u_unit)
        self.u_layer.valueChanged.connect(self.choice_changed)
        self.u_unit.valueChanged.connect(self.choice_changed)
        self.u_direction.currentIndexChanged.connect(self.choice_changed)
        self.u_state.currentIndexChanged.connect(self.choice_changed)

    def set_layers(self, n_layers: int) -> None:
        self.u_layer.setRange(0, max(0, n_layers - 1))

    def unit_choice(self) -> UnitChoice:
        return UnitChoice(layer=self.u_layer.value(), direction=self.u_direction.currentText(),
                          state=str(self.u_state.currentData()), unit=self.u_unit.value())

    def set_unit_choice(self, c: UnitChoice) -> None:
        before = self.unit_choice()
        for w in self._fields:
            w.blockSignals(True)
        try:
            self.u_layer.setValue(c.layer)
            self.u_direction.setCurrentText(c.direction)
            self.u_state.setCurrentIndex(STATES.index(c.state))
            self.u_unit.setValue(c.unit)
        finally:
            for w in self._fields:
                w.blockSignals(False)
        if self.unit_choice() != before:
            self.choice_changed.emit()

    def show_contexts(self, res: Optional[UnitContexts], labels: str = "") -> None:
        self.hist.clear()
        self.hist_legend.clear()
        if res is None:
            self.contexts.setRowCount(0)
            self.u_note.setText("")
            return
        rows = [[f"{c.value:+.3f}", c.left, c.word, c.right] for c in res.highest]
        rows += [["…", "", "", ""]]
        rows += [[f"{c.value:+.3f}", c.left, c.word, c.right] for c in res.lowest]
        fill(self.contexts, rows)
        align(self.contexts, 1, Qt.AlignmentFlag.AlignRight)
        align(self.contexts, 2, Qt.AlignmentFlag.AlignCenter)
        self.u_note.setText(f"{res.choice.describe()}: its {len(res.highest)} highest, then "
                            f"{len(res.lowest)} lowest of {res.positions:,} positions in "
                            f"{res.corpus or CONTEXTS_DEFAULT}.")
        h = res.histogram
        if h is None:
            self.hist.setTitle("values per label (rank first)", size="9pt")
            return
        for k, (label, counts) in enumerate(h.counts.items()):
            share = counts / max(1, counts.sum())
            self.hist.plot(h.edges, share, stepMode="center",
                           pen=pg.mkPen(COLORS[k % len(COLORS)], width=2),
                           name=f"{label} (mean {h.means[label]:+.2f})")
        self.hist.setLabel("bottom", "value")
        self.hist.setLabel("left", "share of the label's words")
        self.hist.setTitle("values per label", size="9pt")
        self.hist.setToolTip(f"the unit's values on the words of {labels or 'the ranking'}, per "
                             "label (the six most frequent), each label's share per bin")
