"""The Units view's widgets: the controls, the selected sentence's top units over its words (a
heatmap, one row per unit), the mean forget and input gates per word, and the tabs — one
builder each: :class:`~.ranking_tab.RankingTab`, :class:`~.unit_tab.UnitTab`,
:class:`~.intervene_tab.InterveneTab`, :class:`~.pattern_tab.PatternTab` and
:class:`~.pattern_tab.ShowcaseTab`."""
from __future__ import annotations

from typing import Any, Dict, Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QSplitter,
                               QTabWidget, QVBoxLayout, QWidget)

from elmo_explorer.views.units.intervene_tab import InterveneTab
from elmo_explorer.views.units.model import (DIRECTIONS, STATE_NAMES, STATES, SentenceRows,
                                             UnitsSettings)
from elmo_explorer.views.units.pattern_tab import PatternTab, ShowcaseTab
from elmo_explorer.views.units.ranking_tab import RankingTab
from elmo_explorer.views.units.unit_tab import UnitTab


class UnitsView(QWidget):
    """Signals: ``settings_changed()`` (the sentence rows' layer, direction, state or count);
    the tabs' own signals are on the tabs (``ranking_page.rank_requested`` …)."""

    settings_changed = Signal()

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
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        for text, w in (("Layer", self.layer), ("Direction", self.direction),
                        ("State", self.state), ("Units shown", self.rows)):
            row.addWidget(QLabel(text))
            row.addWidget(w)
        row.addStretch(1)
        row.addWidget(self.cancel_button)
        lay.addLayout(row)
        self.status = QLabel("")
        self._prompt = False               # the status line holds a prompt (show_status)
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
        self.tabs = QTabWidget()
        self.ranking_page = RankingTab()
        self.unit_page = UnitTab()
        self.intervene_page = InterveneTab()
        self.pattern_page = PatternTab()
        self.showcase_page = ShowcaseTab()
        for page, name in ((self.ranking_page, "Ranking"), (self.unit_page, "Unit"),
                           (self.intervene_page, "Intervene"), (self.pattern_page, "Pattern"),
                           (self.showcase_page, "Number units")):
            self.tabs.addTab(page, name)
        split.addWidget(top)
        split.addWidget(self.tabs)
        split.setSizes([340, 340])
        lay.addWidget(split, 1)

        for w in (self.layer, self.rows):
            w.valueChanged.connect(lambda _=0: self.settings_changed.emit())
        for c in (self.direction, self.state):
            c.currentIndexChanged.connect(lambda _=0: self.settings_changed.emit())

    # ---- settings -----------------------------------------------------------------------------
    def set_layers(self, n_layers: int) -> None:
        self.layer.setRange(0, max(0, n_layers - 1))
        for page in (self.intervene_page, self.unit_page, self.pattern_page):
            page.set_layers(n_layers)

    def panel_fields(self) -> Dict[str, Any]:
        """The intervention panel's and Unit tab's fields as typed (saved with a workspace)."""
        u = self.unit_page
        return self.intervene_page.fields() | {
            "unit_layer": u.u_layer.value(), "unit_direction": u.u_direction.currentText(),
            "unit_state": str(u.u_state.currentData()), "unit": u.u_unit.value()}

    def apply_panel_fields(self, d: Dict[str, Any]) -> None:
        self.intervene_page.apply_fields(d)
        u = self.unit_page
        if "unit_layer" in d:
            u.u_layer.setValue(d["unit_layer"])
        if "unit_direction" in d:
            u.u_direction.setCurrentText(d["unit_direction"])
        if "unit_state" in d:
            u.u_state.setCurrentIndex(STATES.index(d["unit_state"]))
        if "unit" in d:
            u.u_unit.setValue(d["unit"])

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
        for b in (self.ranking_page.rank_button, self.intervene_page.iv_button,
                  self.showcase_page.showcase_button, self.unit_page.contexts_button,
                  self.pattern_page.pattern_button):
            b.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)

    def main_button(self):
        """The shown tab's action (View ▸ Run, Ctrl+R): Rank units, Find contexts,
        Re-measure, Find pattern or the Number showcase."""
        return {0: self.ranking_page.rank_button, 1: self.unit_page.contexts_button,
                2: self.intervene_page.iv_button, 3: self.pattern_page.pattern_button,
                4: self.showcase_page.showcase_button}.get(self.tabs.currentIndex())

    def show_status(self, text: str, error: bool = False, prompt: bool = False) -> None:
        """Show ``text`` below the tabs (in red for an error). ``prompt``: it only says what
        to do next, and the next step's hint may replace it (:meth:`shows_prompt`)."""
        self.status.setStyleSheet("color: #b00020;" if error else "")
        self.status.setText(text)
        self._prompt = prompt

    def shows_prompt(self) -> bool:
        """Whether the status line is empty or a prompt (not a result, error or note)."""
        return self._prompt or not self.status.text()

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
