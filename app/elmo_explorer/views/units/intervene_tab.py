"""The Units view's Intervene tab: units to change (typed or from the ranking), the operation,
where it acts, and the re-measure before → after side by side — both LMs word by word, the
bundled minimal pairs per set, a probe of the top layer and a word's similarity across its
contexts (:mod:`.intervention`)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QDoubleSpinBox, QHBoxLayout, QLabel, QLineEdit,
                               QPushButton, QSpinBox, QSplitter, QVBoxLayout, QWidget)

from elmo_explorer.views.units.intervention import InterventionSpec, Remeasure, parse_units
from elmo_explorer.views.units.model import INTERVENE_DIRECTIONS, INTERVENE_STATES, OPS
from elmo_explorer.views.units.widgets import fill, table


class InterveneTab(QWidget):
    """Signals: ``intervene_requested()``."""

    intervene_requested = Signal()

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.iv_layer = QSpinBox()
        self.iv_layer.setRange(0, 1)
        self.iv_layer.setValue(1)
        self.iv_direction = QComboBox()
        self.iv_direction.addItems(list(INTERVENE_DIRECTIONS))
        self.iv_state = QComboBox()
        for st in INTERVENE_STATES:
            self.iv_state.addItem(st, st)
        self.iv_units = QLineEdit()
        self.iv_units.setPlaceholderText("units, e.g. 78 403 or 0-15")
        self.iv_units.setMinimumWidth(110)
        self.iv_op = QComboBox()
        self.iv_op.addItems(list(OPS))
        self.iv_value = QDoubleSpinBox()
        self.iv_value.setRange(-100.0, 100.0)
        self.iv_value.setDecimals(2)
        self.iv_value.setToolTip("clamp: the value; scale: the factor")
        self.iv_position = QSpinBox()
        self.iv_position.setRange(0, 10_000)
        self.iv_position.setSpecialValueText("all")
        self.iv_position.setToolTip("the word from which on the change acts (in the direction's "
                                    "reading order); all: every position. patch: the position "
                                    "whose state is copied from the donor sentence")
        self.iv_donor = QLineEdit()
        self.iv_donor.setPlaceholderText("patch from this sentence")
        self.iv_word = QLineEdit()
        self.iv_word.setPlaceholderText("word (default: the selected one)")
        self.iv_word.setToolTip("its similarity across its contexts (the sentence, the reference "
                                "corpus and the demo POS task's sentences) is re-measured too")
        self.iv_button = QPushButton("Re-measure")
        self.iv_button.setToolTip("both LMs on the selected sentence, the bundled minimal pairs, "
                                  "a probe of the top layer for the Ranking tab's labels and the "
                                  "word's similarity across contexts, before and after")
        for text, x in (("Layer", self.iv_layer), ("Direction", self.iv_direction),
                        ("State", self.iv_state), ("Units", self.iv_units), ("Op", self.iv_op),
                        ("Value", self.iv_value), ("Word", self.iv_position)):
            row.addWidget(QLabel(text))
            row.addWidget(x)
        row.addStretch(1)
        lay.addLayout(row)
        row2 = QHBoxLayout()                  # (the button here: the first row fits 1280×800)
        row2.addWidget(QLabel("Patch from"))
        row2.addWidget(self.iv_donor, 2)
        row2.addWidget(QLabel("Similarity of"))
        row2.addWidget(self.iv_word, 1)
        row2.addWidget(self.iv_button)
        lay.addLayout(row2)
        self.iv_summary = QLabel("")
        self.iv_summary.setWordWrap(True)
        lay.addWidget(self.iv_summary)
        results = QSplitter(Qt.Orientation.Horizontal)
        self.iv_words = table(["word", "fwd top", "→ after", "fwd bits", "→ after", "bwd top",
                               "→ after", "bwd bits", "→ after"])
        self.iv_words.setToolTip("each LM's most probable word at the position and its "
                                 "surprisal of the actual word (bits), before → after")
        self.iv_pairs = table(["minimal pairs", "forward", "backward", "combined"])
        self.iv_pairs.setToolTip("accuracy before → after the change")
        self.iv_measures = table(["measure", "before → after"])
        self.iv_measures.setToolTip("a probe of the top layer trained on the unchanged model "
                                    "(held-out accuracy) and the word's mean cosine across its "
                                    "contexts, before → after")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.iv_pairs)
        right.addWidget(self.iv_measures)
        right.setSizes([180, 90])
        results.addWidget(self.iv_words)
        results.addWidget(right)
        results.setSizes([440, 560])
        lay.addWidget(results, 1)
        self.iv_op.currentIndexChanged.connect(self._on_op)
        self.iv_button.clicked.connect(self.intervene_requested)
        for field in (self.iv_units, self.iv_donor, self.iv_word):    # Enter re-measures
            field.returnPressed.connect(lambda: self.iv_button.isEnabled() and self.iv_button.click())
        self._on_op()

    def _on_op(self) -> None:
        op = self.iv_op.currentText()
        self.iv_value.setEnabled(op in ("clamp", "scale"))
        self.iv_donor.setEnabled(op == "patch")
        self.iv_position.setSpecialValueText("all" if op != "patch" else "—")

    def set_layers(self, n_layers: int) -> None:
        self.iv_layer.setRange(0, max(0, n_layers - 1))

    def fields(self) -> Dict[str, Any]:
        """The panel's fields as typed (saved with a workspace)."""
        return {"layer": self.iv_layer.value(), "direction": self.iv_direction.currentText(),
                "state": str(self.iv_state.currentData()), "units": self.iv_units.text(),
                "op": self.iv_op.currentText(), "value": self.iv_value.value(),
                "position": self.iv_position.value(), "donor": self.iv_donor.text(),
                "word": self.iv_word.text()}

    def apply_fields(self, d: Dict[str, Any]) -> None:
        if "layer" in d:
            self.iv_layer.setValue(d["layer"])
        if "direction" in d:
            self.iv_direction.setCurrentText(d["direction"])
        if "state" in d:
            self.iv_state.setCurrentIndex(INTERVENE_STATES.index(d["state"]))
        if "units" in d:
            self.iv_units.setText(d["units"])
        if "op" in d:
            self.iv_op.setCurrentText(d["op"])
        if "value" in d:
            self.iv_value.setValue(float(d["value"]))
        if "position" in d:
            self.iv_position.setValue(d["position"])
        if "donor" in d:
            self.iv_donor.setText(d["donor"])
        if "word" in d:
            self.iv_word.setText(d["word"])

    def spec(self) -> InterventionSpec:
        """The panel's fields (the units as typed: :func:`~.intervention.parse_units` checks
        them)."""
        return InterventionSpec(
            layer=self.iv_layer.value(), direction=self.iv_direction.currentText(),
            state=str(self.iv_state.currentData()), units=parse_units(self.iv_units.text()),
            op=self.iv_op.currentText(), value=self.iv_value.value(),
            position=self.iv_position.value(), donor=self.iv_donor.text().strip())

    def set_units(self, layer: int, direction: str, state: str, units: List[int]) -> None:
        self.iv_layer.setValue(layer)
        self.iv_direction.setCurrentText(direction)
        if state in INTERVENE_STATES:
            self.iv_state.setCurrentIndex(INTERVENE_STATES.index(state))
        self.iv_units.setText(" ".join(map(str, units)))

    def show_remeasure(self, res: Optional[Remeasure]) -> None:
        if res is None:
            for t in (self.iv_words, self.iv_pairs, self.iv_measures):
                t.setRowCount(0)
            self.iv_summary.setText("")
            return
        fill(self.iv_measures, [[m.name, f"{m.before:.3f} → {m.after:.3f}"]
                                for m in res.measures])
        for r, m in enumerate(res.measures):
            for c in (0, 1):
                item = self.iv_measures.item(r, c)
                if item is not None:
                    item.setToolTip(m.note)
        notes = "".join(f" {n}" for n in res.notes)
        b, a = res.before, res.after
        if b is None or a is None:                       # no softmax: the LMs not scored
            for t in (self.iv_words, self.iv_pairs):
                t.setRowCount(0)
            self.iv_summary.setText(f"{res.describe()}.{notes}")
            return
        rows = []
        for i, word in enumerate(b.words):
            cells = [f"{i + 1} {word}"]
            for d in (0, 1):
                cells += [b.top[d][i], a.top[d][i], f"{b.surprisal[d][i]:.2f}",
                          f"{a.surprisal[d][i]:.2f}"]
            rows.append(cells)
        fill(self.iv_words, rows)
        prs = []
        names = sorted(res.pairs_before.by_set, key=lambda n: (n != "all", n))
        for name in names:
            before, after = res.pairs_before.by_set[name], res.pairs_after.by_set[name]
            prs.append([name.replace("_", " ")] + [f"{x:.2f} → {y:.2f}"
                                                   for x, y in zip(before, after)])
        fill(self.iv_pairs, prs)
        mean = [sum(s) / len(s) for s in (*b.surprisal, *a.surprisal)]
        self.iv_summary.setText(
            f"{res.describe()}. Mean surprisal (bits/word) forward {mean[0]:.2f} → "
            f"{mean[2]:.2f}, backward {mean[1]:.2f} → {mean[3]:.2f}.{notes}")
