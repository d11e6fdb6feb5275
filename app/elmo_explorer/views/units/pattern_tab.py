"""The Units view's Pattern tab (LSTMVis, Strobelt et al. 2018: the units on over a span of the
selected sentence, and the corpus spans whose units are on the same way) and its Number units
tab (``units ablate``'s showcase, Lakretz et al. 2019)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QPushButton,
                               QSpinBox, QVBoxLayout, QWidget)

from elmo_explorer.views.units.corpus_choice import CorpusChoice
from elmo_explorer.views.units.intervention import SHOWCASE_KS, SHOWCASE_SEEDS
from elmo_explorer.views.units.model import (DIRECTIONS, PATTERN_DEFAULT, STATE_NAMES, STATES,
                                              PatternQuery)
from elmo_explorer.views.units.widgets import align, fill, table


class PatternTab(QWidget):
    """Signals: ``pattern_requested()``."""

    pattern_requested = Signal()

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.p_layer = QSpinBox()
        self.p_layer.setRange(0, 1)
        self.p_layer.setValue(1)
        self.p_direction = QComboBox()
        self.p_direction.addItems(list(DIRECTIONS))
        self.p_state = QComboBox()
        for st in STATES:
            self.p_state.addItem(STATE_NAMES[st], st)
        self.p_start = QSpinBox()
        self.p_start.setRange(1, 10_000)
        self.p_end = QSpinBox()
        self.p_end.setRange(1, 10_000)
        self.p_threshold = QDoubleSpinBox()
        self.p_threshold.setRange(-100.0, 100.0)
        self.p_threshold.setDecimals(2)
        self.p_threshold.setSingleStep(0.05)
        self.p_threshold.setValue(0.3)
        self.pattern_button = QPushButton("Find pattern")
        self.pattern_button.setToolTip(
            "the units above the threshold at every word of the span of the selected sentence, "
            "then the spans of the corpus below whose units are on the same way "
            "(Jaccard of the on-sets)")
        self.corpus = CorpusChoice("Search in", PATTERN_DEFAULT, indexes=True)
        for text, x in (("Layer", self.p_layer), ("Direction", self.p_direction),
                        ("State", self.p_state), ("Words", self.p_start), ("to", self.p_end),
                        ("Threshold", self.p_threshold)):
            row.addWidget(QLabel(text))
            row.addWidget(x)
        row.addStretch(1)
        lay.addLayout(row)
        self.p_note = QLabel("Choose a span of the selected sentence (its words, 1-based).")
        self.p_note.setWordWrap(True)
        row2 = QHBoxLayout()                  # (the button here: the first row fits 1280×800)
        row2.addWidget(self.p_note, 1)
        row2.addWidget(self.pattern_button)
        lay.addLayout(row2)
        lay.addWidget(self.corpus)
        self.pattern = table(["Jaccard", "shared / on", "left", "span", "right", "UPOS"])
        lay.addWidget(self.pattern, 1)
        self.pattern_button.clicked.connect(self.pattern_requested)

    def set_layers(self, n_layers: int) -> None:
        """A model's layers: the search starts at its top layer, as ``units pattern`` does."""
        self.p_layer.setRange(0, max(0, n_layers - 1))
        self.p_layer.setValue(max(0, n_layers - 1))

    def query(self) -> PatternQuery:
        return PatternQuery(layer=self.p_layer.value(), direction=self.p_direction.currentText(),
                            state=str(self.p_state.currentData()), start=self.p_start.value(),
                            end=self.p_end.value(), threshold=self.p_threshold.value())

    def show_pattern(self, res, where: str = PATTERN_DEFAULT) -> None:
        """Show a :class:`~elmo_engine.analysis.units.pattern.PatternResult` found in
        ``where`` (the corpus, described), or nothing (None)."""
        if res is None:
            self.pattern.setRowCount(0)
            return
        fill(self.pattern, [[f"{m.score:.3f}", f"{m.shared} / {m.on}", m.left,
                             " ".join(m.words), m.right,
                             " ".join(p or "_" for p in (m.pos or ()))] for m in res.matches])
        align(self.pattern, 2, Qt.AlignmentFlag.AlignRight)
        on = " ".join(map(str, res.on_units[:30])) + (" …" if len(res.on_units) > 30 else "")
        self.p_note.setText(
            f"{len(res.on_units)} units on (> {res.threshold:g}) over "
            f"“{' '.join(res.query[res.span[0] - 1:res.span[1]])}”: {on}. The best "
            f"{len(res.matches)} of {res.spans:,} spans of {where}.")


class ShowcaseTab(QWidget):
    """Signals: ``showcase_requested()``."""

    showcase_requested = Signal()

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        ks = ", ".join(map(str, SHOWCASE_KS))
        self.showcase_button = QPushButton("Number units: ablate top k vs k random")
        self.showcase_button.setToolTip(
            f"units ablate on the bundled data: the top layer's cells ranked for Number, the "
            f"top k (k = {ks}, at most half the cells) zeroed against k random cells "
            f"({SHOWCASE_SEEDS} seeds), the "
            "bundled minimal pairs scored per direction")
        row.addWidget(self.showcase_button)
        self.showcase_note = QLabel("")
        self.showcase_note.setWordWrap(True)
        row.addWidget(self.showcase_note, 1)
        lay.addLayout(row)
        self.showcase = table(["pairs", "cells zeroed", "forward: top / random",
                               "backward: top / random", "combined: top / random"])
        lay.addWidget(self.showcase, 1)
        self.showcase_button.clicked.connect(self.showcase_requested)

    def show_showcase(self, rows: List[Dict[str, Any]], note: str) -> None:
        out = []
        for r in rows:
            if r["random"] is None:
                cells = [f"{v:.3f}" for v in r["top"]]
                zeroed = "none"
            else:
                cells = [f"{t:.3f} / {m:.3f} ± {sd:.3f}" for t, (m, sd) in zip(r["top"],
                                                                                r["random"])]
                zeroed = f"top {r['k']} / {r['k']} random"
            out.append([r["set"].replace("_", " "), zeroed] + cells)
        fill(self.showcase, out)
        self.showcase_note.setText(note)
