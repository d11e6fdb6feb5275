"""The Units view's widgets: the controls, the selected sentence's top units over its words (a
heatmap, one row per unit), the mean forget and input gates per word, and the ranking table."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QLabel, QPushButton, QSpinBox, QSplitter,
                               QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget)

from elmo_explorer.views.units.model import (DIRECTIONS, RANK_KS, STATE_NAMES, STATES,
                                             SentenceRows, UnitsSettings)

TABLE_COLUMNS = ["layer", "direction", "state", "all units", "majority", "top units (mean diff)",
                 "top units (elastic net)"] + [f"k={k} top / random" for k in RANK_KS]


class UnitsView(QWidget):
    """Signals: ``settings_changed()``, ``rank_requested()``."""

    settings_changed = Signal()
    rank_requested = Signal()

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
        self.table = QTableWidget(0, len(TABLE_COLUMNS))
        self.table.setHorizontalHeaderLabels(TABLE_COLUMNS)
        self.table.verticalHeader().setVisible(False)
        split.addWidget(top)
        split.addWidget(self.table)
        split.setSizes([420, 260])
        lay.addWidget(split, 1)

        for w in (self.layer, self.rows):
            w.valueChanged.connect(lambda _=0: self.settings_changed.emit())
        for c in (self.direction, self.state):
            c.currentIndexChanged.connect(lambda _=0: self.settings_changed.emit())
        self.rank_button.clicked.connect(self.rank_requested)

    # ---- settings -----------------------------------------------------------------------------
    def set_layers(self, n_layers: int) -> None:
        self.layer.setRange(0, max(0, n_layers - 1))

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
        self.rank_button.setEnabled(not busy)
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
