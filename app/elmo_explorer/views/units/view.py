"""The Units view's widgets: the controls, the selected sentence's top units over its words (a
heatmap, one row per unit), the mean forget and input gates per word, and the ranking table."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QDoubleSpinBox, QHBoxLayout,
                               QLabel, QLineEdit, QPushButton, QSpinBox, QSplitter, QTableWidget,
                               QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from elmo_explorer.views.units.model import (CONTEXT_TOKENS, DIRECTIONS, INTERVENE_DIRECTIONS,
                                             INTERVENE_STATES, OPS, RANK_KS, SHOWCASE_KS,
                                             SHOWCASE_SEEDS, STATE_NAMES, STATES,
                                             InterventionSpec, PatternQuery, Remeasure,
                                             SentenceRows,
                                             UnitChoice, UnitContexts, UnitsSettings)

TABLE_COLUMNS = ["layer", "direction", "state", "all units", "majority", "top units (mean diff)",
                 "top units (elastic net)"] + [f"k={k} top / random" for k in RANK_KS]


def _fill(table: QTableWidget, rows: List[List[str]]) -> None:
    table.setRowCount(len(rows))
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
            table.setItem(r, c, item)
    table.resizeColumnsToContents()


def _table(columns: List[str]) -> QTableWidget:
    t = QTableWidget(0, len(columns))
    t.setHorizontalHeaderLabels(columns)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 6)
    t.horizontalHeader().setStretchLastSection(True)
    return t


class UnitsView(QWidget):
    """Signals: ``settings_changed()``, ``rank_requested()``, ``intervene_requested()``,
    ``showcase_requested()``, ``ranking_row_selected(int)``."""

    settings_changed = Signal()
    rank_requested = Signal()
    intervene_requested = Signal()
    showcase_requested = Signal()
    ranking_row_selected = Signal(int)
    contexts_requested = Signal()
    pattern_requested = Signal()

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.layer = QSpinBox()
        self.layer.setRange(0, 1)
        self.direction = QComboBox()
        self.direction.addItems(list(DIRECTIONS))
        self.state = QComboBox()
        for s in STATES:
            self.state.addItem(STATE_NAMES[s], s)
        self.rows = QSpinBox()
        self.rows.setRange(1, 256)
        self.rank_button = QPushButton("Rank units (demo POS)")
        self.rank_button.setToolTip("Rank the cells and outputs of every layer and direction for "
                                    "the demo POS task's tags, with the top-k vs random-k curve")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        for text, w in (("Layer", self.layer), ("Direction", self.direction),
                        ("State", self.state), ("Units shown", self.rows)):
            row.addWidget(QLabel(text))
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.rank_button)
        row.addWidget(self.cancel_button)
        lay.addLayout(row)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        lay.addWidget(self.status)

        split = QSplitter(Qt.Orientation.Vertical)
        top = QSplitter(Qt.Orientation.Horizontal)
        self.heat = pg.PlotWidget(background="w")
        self.heat.setMouseEnabled(False, False)
        self.image = pg.ImageItem()
        self.heat.addItem(self.image)
        self.heat.setTitle("the sentence's units that vary most (rows) over its words", size="9pt")
        self.gates = pg.PlotWidget(background="w")
        self.gates.setMouseEnabled(False, False)
        self.gates.setTitle("mean gate per word", size="9pt")
        self.gates.addLegend(offset=(5, 5))
        self.gates.setYRange(0, 1)
        top.addWidget(self.heat)
        top.addWidget(self.gates)
        top.setSizes([700, 300])
        self.table = _table(TABLE_COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setToolTip("select a row: its top units (class-mean difference) go to the "
                              "intervention panel")
        self.tabs = QTabWidget()
        self.tabs.addTab(self.table, "Ranking")
        self.unit_page = self._unit_tab()
        self.intervene_page = self._intervene_tab()
        self.showcase_page = self._showcase_tab()
        self.pattern_page = self._pattern_tab()
        self.tabs.addTab(self.unit_page, "Unit")
        self.tabs.addTab(self.intervene_page, "Intervene")
        self.tabs.addTab(self.pattern_page, "Pattern")
        self.tabs.addTab(self.showcase_page, "Number units")
        split.addWidget(top)
        split.addWidget(self.tabs)
        split.setSizes([360, 320])
        lay.addWidget(split, 1)
        self.table.itemSelectionChanged.connect(self._on_table_selection)

        for w in (self.layer, self.rows):
            w.valueChanged.connect(lambda _=0: self.settings_changed.emit())
        for c in (self.direction, self.state):
            c.currentIndexChanged.connect(lambda _=0: self.settings_changed.emit())
        self.rank_button.clicked.connect(self.rank_requested)

    def _unit_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
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
            f"the unit's highest and lowest positions over the reference corpus (its first "
            f"{CONTEXT_TOKENS:,} words) and, with a ranking shown, its values per POS tag")
        for text, x in (("Layer", self.u_layer), ("Direction", self.u_direction),
                        ("State", self.u_state), ("Unit", self.u_unit)):
            row.addWidget(QLabel(text))
            row.addWidget(x)
        row.addWidget(self.contexts_button)
        self.u_note = QLabel("Select a row of the ranking, or choose a unit.")
        self.u_note.setWordWrap(True)
        row.addWidget(self.u_note, 1)
        lay.addLayout(row)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.contexts = _table(["value", "left", "word", "right"])
        self.hist = pg.PlotWidget(background="w")
        self.hist.setMouseEnabled(False, False)
        self.hist.setTitle("the unit's values per POS tag (rank units first)", size="9pt")
        self.hist_legend = self.hist.addLegend(offset=(5, 5))
        split.addWidget(self.contexts)
        split.addWidget(self.hist)
        split.setSizes([700, 360])
        lay.addWidget(split, 1)
        self.contexts_button.clicked.connect(self.contexts_requested)
        return w

    def panel_fields(self) -> Dict[str, Any]:
        """The intervention panel's and Unit tab's fields as typed (saved with a workspace)."""
        return {"layer": self.iv_layer.value(), "direction": self.iv_direction.currentText(),
                "state": str(self.iv_state.currentData()), "units": self.iv_units.text(),
                "op": self.iv_op.currentText(), "value": self.iv_value.value(),
                "position": self.iv_position.value(), "donor": self.iv_donor.text(),
                "unit_layer": self.u_layer.value(), "unit_direction": self.u_direction.currentText(),
                "unit_state": str(self.u_state.currentData()), "unit": self.u_unit.value()}

    def apply_panel_fields(self, d: Dict[str, Any]) -> None:
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
        if "unit_layer" in d:
            self.u_layer.setValue(d["unit_layer"])
        if "unit_direction" in d:
            self.u_direction.setCurrentText(d["unit_direction"])
        if "unit_state" in d:
            self.u_state.setCurrentIndex(STATES.index(d["unit_state"]))
        if "unit" in d:
            self.u_unit.setValue(d["unit"])

    def unit_choice(self) -> UnitChoice:
        return UnitChoice(layer=self.u_layer.value(), direction=self.u_direction.currentText(),
                          state=str(self.u_state.currentData()), unit=self.u_unit.value())

    def set_unit_choice(self, c: UnitChoice) -> None:
        self.u_layer.setValue(c.layer)
        self.u_direction.setCurrentText(c.direction)
        self.u_state.setCurrentIndex(STATES.index(c.state))
        self.u_unit.setValue(c.unit)

    def show_contexts(self, res: Optional[UnitContexts]) -> None:
        self.hist.clear()
        self.hist_legend.clear()
        if res is None:
            self.contexts.setRowCount(0)
            self.u_note.setText("")
            return
        rows = [[f"{c.value:+.3f}", c.left, c.word, c.right] for c in res.highest]
        rows += [["…", "", "", ""]]
        rows += [[f"{c.value:+.3f}", c.left, c.word, c.right] for c in res.lowest]
        _fill(self.contexts, rows)
        for r in range(self.contexts.rowCount()):
            for c, align in ((1, Qt.AlignmentFlag.AlignRight), (2, Qt.AlignmentFlag.AlignCenter)):
                item = self.contexts.item(r, c)
                if item is not None:
                    item.setTextAlignment(align | Qt.AlignmentFlag.AlignVCenter)
        self.u_note.setText(f"{res.choice.describe()}: its {len(res.highest)} highest, then "
                            f"{len(res.lowest)} lowest of {res.positions:,} positions of the "
                            "reference corpus.")
        h = res.histogram
        if h is None:
            self.hist.setTitle("the unit's values per POS tag (rank units first)", size="9pt")
            return
        colors = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b"]
        for k, (label, counts) in enumerate(h.counts.items()):
            share = counts / max(1, counts.sum())
            self.hist.plot(h.edges, share, stepMode="center",
                           pen=pg.mkPen(colors[k % len(colors)], width=2),
                           name=f"{label} (mean {h.means[label]:+.2f})")
        self.hist.setLabel("bottom", "value")
        self.hist.setLabel("left", "share of the tag's words")
        self.hist.setTitle("the unit's values per POS tag (demo POS words)", size="9pt")

    def _intervene_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
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
        self.iv_button = QPushButton("Re-measure")
        self.iv_button.setToolTip("both LMs on the selected sentence and the bundled minimal "
                                  "pairs, before and after the change")
        for text, x in (("Layer", self.iv_layer), ("Direction", self.iv_direction),
                        ("State", self.iv_state), ("Units", self.iv_units), ("Op", self.iv_op),
                        ("Value", self.iv_value), ("Word", self.iv_position)):
            row.addWidget(QLabel(text))
            row.addWidget(x)
        row.addStretch(1)
        lay.addLayout(row)
        row2 = QHBoxLayout()                  # (the button here: the first row fits 1280×800)
        row2.addWidget(QLabel("Patch from"))
        row2.addWidget(self.iv_donor, 1)
        row2.addWidget(self.iv_button)
        lay.addLayout(row2)
        self.iv_summary = QLabel("")
        self.iv_summary.setWordWrap(True)
        lay.addWidget(self.iv_summary)
        results = QSplitter(Qt.Orientation.Horizontal)
        self.iv_words = _table(["word", "fwd top", "→ after", "fwd bits", "→ after", "bwd top",
                                "→ after", "bwd bits", "→ after"])
        self.iv_words.setToolTip("each LM's most probable word at the position and its "
                                 "surprisal of the actual word (bits), before → after")
        self.iv_pairs = _table(["minimal pairs", "forward", "backward", "combined"])
        self.iv_pairs.setToolTip("accuracy before → after the change")
        results.addWidget(self.iv_words)
        results.addWidget(self.iv_pairs)
        results.setSizes([600, 380])
        lay.addWidget(results, 1)
        self.iv_op.currentIndexChanged.connect(self._on_op)
        self.iv_button.clicked.connect(self.intervene_requested)
        self._on_op()
        return w

    def _pattern_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
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
            "then the spans of the demo POS sentences (EWT) whose units are on the same way "
            "(Jaccard of the on-sets)")
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
        self.pattern = _table(["Jaccard", "shared / on", "left", "span", "right", "UPOS"])
        lay.addWidget(self.pattern, 1)
        self.pattern_button.clicked.connect(self.pattern_requested)
        return w

    def pattern_query(self) -> PatternQuery:
        return PatternQuery(layer=self.p_layer.value(), direction=self.p_direction.currentText(),
                            state=str(self.p_state.currentData()), start=self.p_start.value(),
                            end=self.p_end.value(), threshold=self.p_threshold.value())

    def show_pattern(self, res) -> None:
        if res is None:
            self.pattern.setRowCount(0)
            return
        _fill(self.pattern, [[f"{m.score:.3f}", f"{m.shared} / {m.on}", m.left,
                              " ".join(m.words), m.right,
                              " ".join(p or "_" for p in (m.pos or ()))] for m in res.matches])
        for r in range(self.pattern.rowCount()):
            item = self.pattern.item(r, 2)
            if item is not None:
                item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        on = " ".join(map(str, res.on_units[:30])) + (" …" if len(res.on_units) > 30 else "")
        self.p_note.setText(
            f"{len(res.on_units)} units on (> {res.threshold:g}) over "
            f"“{' '.join(res.query[res.span[0] - 1:res.span[1]])}”: {on}. The best "
            f"{len(res.matches)} of {res.spans:,} spans of the demo POS sentences.")

    def _showcase_tab(self) -> QWidget:
        w = QWidget()
        lay = QVBoxLayout(w)
        row = QHBoxLayout()
        ks = ", ".join(map(str, SHOWCASE_KS))
        self.showcase_button = QPushButton("Number units: ablate top k vs k random")
        self.showcase_button.setToolTip(
            f"units ablate on the bundled data: the top layer's cells ranked for Number, the "
            f"top k (k = {ks}) zeroed against k random cells ({SHOWCASE_SEEDS} seeds), the "
            "bundled minimal pairs scored per direction")
        row.addWidget(self.showcase_button)
        self.showcase_note = QLabel("")
        self.showcase_note.setWordWrap(True)
        row.addWidget(self.showcase_note, 1)
        lay.addLayout(row)
        self.showcase = _table(["pairs", "cells zeroed", "forward: top / random",
                                "backward: top / random", "combined: top / random"])
        lay.addWidget(self.showcase, 1)
        self.showcase_button.clicked.connect(self.showcase_requested)
        return w

    def _on_op(self) -> None:
        op = self.iv_op.currentText()
        self.iv_value.setEnabled(op in ("clamp", "scale"))
        self.iv_donor.setEnabled(op == "patch")
        self.iv_position.setSpecialValueText("all" if op != "patch" else "—")

    def _on_table_selection(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            self.ranking_row_selected.emit(rows[0].row())

    # ---- settings -----------------------------------------------------------------------------
    def set_layers(self, n_layers: int) -> None:
        self.layer.setRange(0, max(0, n_layers - 1))
        self.iv_layer.setRange(0, max(0, n_layers - 1))
        self.u_layer.setRange(0, max(0, n_layers - 1))
        self.p_layer.setRange(0, max(0, n_layers - 1))

    def intervention_spec(self) -> InterventionSpec:
        """The panel's fields (the units as typed: :func:`~.model.parse_units` checks them)."""
        from elmo_explorer.views.units.model import parse_units

        return InterventionSpec(
            layer=self.iv_layer.value(), direction=self.iv_direction.currentText(),
            state=str(self.iv_state.currentData()), units=parse_units(self.iv_units.text()),
            op=self.iv_op.currentText(), value=self.iv_value.value(),
            position=self.iv_position.value(), donor=self.iv_donor.text().strip())

    def set_intervention_units(self, layer: int, direction: str, state: str,
                               units: List[int]) -> None:
        self.iv_layer.setValue(layer)
        self.iv_direction.setCurrentText(direction)
        if state in INTERVENE_STATES:
            self.iv_state.setCurrentIndex(INTERVENE_STATES.index(state))
        self.iv_units.setText(" ".join(map(str, units)))

    def apply_settings(self, s: UnitsSettings) -> None:
        widgets = (self.layer, self.rows, self.direction, self.state)
        for w in widgets:
            w.blockSignals(True)
        self.layer.setValue(s.layer)
        self.rows.setValue(s.rows)
        self.direction.setCurrentText(s.direction)
        self.state.setCurrentIndex(STATES.index(s.state))
        for w in widgets:
            w.blockSignals(False)

    def current_settings(self) -> UnitsSettings:
        return UnitsSettings(layer=self.layer.value(), direction=self.direction.currentText(),
                             state=str(self.state.currentData()), rows=self.rows.value())

    def set_busy(self, busy: bool) -> None:
        for b in (self.rank_button, self.iv_button, self.showcase_button, self.contexts_button,
                  self.pattern_button):
            b.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #b00020;" if error else "")
        self.status.setText(text)

    # ---- drawing ------------------------------------------------------------------------------
    def show_sentence(self, rows: Optional[SentenceRows]) -> None:
        self.gates.clear()
        if rows is None or rows.values.size == 0:
            self.image.clear()
            return
        vals = rows.values                                            # (units, words)
        lim = float(np.abs(vals).max()) or 1.0
        self.image.setImage(vals.T, levels=(-lim, lim))               # x: words, y: units
        self.image.setColorMap(pg.colormap.get("CET-D1"))
        self.image.setRect(0, 0, vals.shape[1], vals.shape[0])
        words = [(i + 0.5, w[:10]) for i, w in enumerate(rows.tokens)]
        self.heat.getAxis("bottom").setTicks([words])
        step = max(1, len(rows.units) // 24)
        self.heat.getAxis("left").setTicks(
            [[(j + 0.5, str(u)) for j, u in enumerate(rows.units) if j % step == 0]])
        self.heat.invertY(True)
        s = rows.settings
        self.heat.setTitle(f"layer {s.layer} {s.direction}, {STATE_NAMES[s.state]}: the "
                           f"{len(rows.units)} most varying units; blue −{lim:.2f} … red "
                           f"+{lim:.2f}", size="9pt")
        x = np.arange(len(rows.tokens)) + 0.5
        self.gates.plot(x, rows.forget, pen=pg.mkPen("#1f77b4", width=2), symbol="o",
                        symbolSize=5, name="forget f")
        self.gates.plot(x, rows.input, pen=pg.mkPen("#d62728", width=2), symbol="s",
                        symbolSize=5, name="input i")
        every = max(1, len(rows.tokens) // 6)
        self.gates.getAxis("bottom").setTicks(
            [[(i + 0.5, str(i + 1)) for i in range(0, len(rows.tokens), every)]])
        self.gates.setLabel("bottom", "word")
        self.gates.setYRange(0, 1)

    def show_ranking(self, rows: List[Dict[str, Any]]) -> None:
        self.table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            cells = [str(row["layer"]), row["direction"], row["state"], f"{row['all']:.3f}",
                     f"{row['majority']:.3f}", " ".join(map(str, row["top"]["mean-diff"])),
                     " ".join(map(str, row["top"]["elastic-net"]))]
            for k in RANK_KS:
                pt = row["curve"].get(str(k))
                cells.append("" if pt is None else f"{pt[0]:.3f} / {pt[1]:.3f}")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()

    def show_remeasure(self, res: Optional[Remeasure]) -> None:
        if res is None:
            self.iv_words.setRowCount(0)
            self.iv_pairs.setRowCount(0)
            self.iv_summary.setText("")
            return
        b, a = res.before, res.after
        rows = []
        for i, word in enumerate(b.words):
            cells = [f"{i + 1} {word}"]
            for d in (0, 1):
                cells += [b.top[d][i], a.top[d][i], f"{b.surprisal[d][i]:.2f}",
                          f"{a.surprisal[d][i]:.2f}"]
            rows.append(cells)
        _fill(self.iv_words, rows)
        prs = []
        names = sorted(res.pairs_before.by_set, key=lambda n: (n != "all", n))
        for name in names:
            before, after = res.pairs_before.by_set[name], res.pairs_after.by_set[name]
            prs.append([name.replace("_", " ")] + [f"{x:.2f} → {y:.2f}"
                                                   for x, y in zip(before, after)])
        _fill(self.iv_pairs, prs)
        mean = [sum(s) / len(s) for s in (*b.surprisal, *a.surprisal)]
        self.iv_summary.setText(
            f"{res.spec.describe()}. Mean surprisal (bits/word) forward {mean[0]:.2f} → "
            f"{mean[2]:.2f}, backward {mean[1]:.2f} → {mean[3]:.2f}.")

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
        _fill(self.showcase, out)
        self.showcase_note.setText(note)
