"""The Units view's Ranking tab: where the labels come from (the demo POS task, or a CoNLL-U /
TSV file of the user's with the label to read), the ranking table, and the selected row's top-k
curve (a probe on the top-k units of each method against k random units, mean ± sd over the
seeds; Dalvi et al. 2019)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Dict, List, Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QHBoxLayout, QLabel, QPushButton,
                               QSplitter, QVBoxLayout, QWidget)

from elmo_engine.analysis.units.corpus import holds_conllu
from elmo_explorer.views.units.model import (RANK_KS, RANK_TOKENS, RankSource, curve_point)
from elmo_explorer.views.units.widgets import fill, table

TABLE_COLUMNS = ["layer", "direction", "state", "all units", "majority", "top units (mean diff)",
                 "top units (elastic net)"] + [f"k={k} top / random" for k in RANK_KS]
#: the labels a CoNLL-U file offers (any feats:NAME can be typed)
CONLLU_LABELS = ("upos", "xpos", "deprel", "feats:Number", "feats:Tense", "feats:Person",
                 "feats:VerbForm", "feats:Case")
#: pens of the curve: the two methods' top k, the random draws
PENS = {"mean-diff": ("#0072B2", Qt.PenStyle.SolidLine, "top k, mean diff"),
        "elastic-net": ("#E69F00", Qt.PenStyle.DashLine, "top k, elastic net")}


class RankingTab(QWidget):
    """Signals: ``rank_requested()``, ``file_requested()`` (choose a labelled file),
    ``row_selected(int)``."""

    rank_requested = Signal()
    file_requested = Signal()
    row_selected = Signal(int)

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self._rankings: List[Dict[str, Any]] = []
        self._path = ""
        lay = QVBoxLayout(self)
        row = QHBoxLayout()
        self.source = QComboBox()
        self.source.addItems(["demo POS task (UPOS)", "a file of mine…"])
        self.source.setToolTip("the labels the units are ranked for: the demo POS task, or a "
                               "CoNLL-U or token<TAB>label TSV file (as the Probes view reads)")
        self.label = QComboBox()
        self.label.setEditable(True)
        self.label.addItems(list(CONLLU_LABELS))
        self.label.setToolTip("with a CoNLL-U file: upos, xpos, deprel or feats:NAME (one UD "
                              "feature of FEATS; words without it are not targets)")
        self.file_button = QPushButton("Choose file…")
        self.file_note = QLabel("")
        self.rank_button = QPushButton("Rank units")
        self.rank_button.setToolTip(
            f"rank the cells and outputs of every layer and direction for the labels (their "
            f"first {RANK_TOKENS:,} words), with the top-k vs random-k curve")
        for w in (QLabel("Labels"), self.source, self.label, self.file_button):
            row.addWidget(w)
        row.addWidget(self.file_note, 1)
        row.addWidget(self.rank_button)
        lay.addLayout(row)
        split = QSplitter(Qt.Orientation.Horizontal)
        self.table = table(TABLE_COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setToolTip("select a row: its curve on the right, its top units (class-mean "
                              "difference) to the intervention panel")
        self.curve = pg.PlotWidget(background="w")
        self.curve.setMouseEnabled(False, False)
        self.curve.setMinimumWidth(220)
        self.curve_legend = self.curve.addLegend(offset=(5, 5), labelTextSize="8pt")
        self.curve.setTitle("top-k curve", size="9pt")
        split.addWidget(self.table)
        split.addWidget(self.curve)
        split.setSizes([520, 480])
        lay.addWidget(split, 1)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.rank_button.clicked.connect(self.rank_requested)
        self.file_button.clicked.connect(self.file_requested)
        self.source.currentIndexChanged.connect(self._on_source)
        self._on_source()

    # ---- the labels ---------------------------------------------------------------------------
    def _on_source(self) -> None:
        file = self.source.currentIndex() == 1
        self.file_button.setEnabled(file)
        conllu = bool(self._path) and holds_conllu(Path(self._path))   # by name or content
        self.label.setEnabled(file and conllu)
        if file and not self._path:
            self.file_note.setText("choose a CoNLL-U or TSV file")
        elif file:
            self.file_note.setText(self._path.replace("\\", "/").rsplit("/", 1)[-1])
        else:
            self.file_note.setText("")
        self.file_note.setToolTip(self._path)

    def set_source(self, src: RankSource) -> None:
        self._path = src.path
        self.source.setCurrentIndex(1 if src.path else 0)
        self.label.setCurrentText(src.label)
        self._on_source()

    def rank_source(self) -> RankSource:
        """The labels chosen (a file chosen but not yet named: InputError)."""
        if self.source.currentIndex() == 0:
            return RankSource()
        if not self._path:
            from elmo_engine.errors import InputError

            raise InputError("choose a CoNLL-U or TSV file of labelled words first")
        return RankSource(self._path, self.label.currentText().strip() or "upos")

    # ---- the table and the curve --------------------------------------------------------------
    def _on_selection(self) -> None:
        rows = self.table.selectionModel().selectedRows()
        if rows:
            r = rows[0].row()
            if 0 <= r < len(self._rankings):
                self.show_curve(self._rankings[r])
            self.row_selected.emit(r)

    def show_ranking(self, rankings: List[Dict[str, Any]]) -> None:
        self._rankings = list(rankings)
        rows = []
        for r in rankings:
            cells = [str(r["layer"]), r["direction"], r["state"], f"{r['accuracy_all']:.3f}",
                     f"{r['majority']:.3f}",
                     " ".join(map(str, r["top_units"].get("mean-diff", [])[:5])),
                     " ".join(map(str, r["top_units"].get("elastic-net", [])[:5]))]
            for k in RANK_KS:
                p = curve_point(r, k)
                cells.append("" if p is None else f"{p['top']:.3f} / {p['random_mean']:.3f}")
            rows.append(cells)
        fill(self.table, rows)
        self.show_curve(rankings[0] if rankings else None)

    def show_curve(self, r: Optional[Dict[str, Any]]) -> None:
        """One ranking's curve: k on a log₂ axis, the random draws' mean ± sd as a band."""
        self.curve.clear()
        self.curve_legend.clear()
        if r is None or not r["curve"]:
            self.curve.setTitle("top-k curve", size="9pt")
            return
        from elmo_engine.io.figures.units import curve_series

        series = curve_series(r)
        ticks = []
        for method, s in series.items():
            x = np.log2(s["k"])
            color, style, name = PENS.get(method, ("#009E73", Qt.PenStyle.SolidLine, method))
            self.curve.plot(x, s["top"], pen=pg.mkPen(color, width=2, style=style), symbol="o",
                            symbolSize=5, symbolBrush=color, name=name)
            ticks = [(float(v), str(int(k))) for v, k in zip(x, s["k"])]
        s = series.get("mean-diff") or next(iter(series.values()))
        x = np.log2(s["k"])
        mean, sd = np.asarray(s["random_mean"]), np.asarray(s["random_sd"])
        lo = pg.PlotDataItem(x, mean - sd, pen=pg.mkPen(None))
        hi = pg.PlotDataItem(x, mean + sd, pen=pg.mkPen(None))
        self.curve.addItem(pg.FillBetweenItem(lo, hi, brush=pg.mkBrush(120, 120, 120, 60)))
        self.curve.plot(x, mean, pen=pg.mkPen("#777777", width=2, style=Qt.PenStyle.DotLine),
                        symbol="s", symbolSize=5, symbolBrush="#777777",
                        name="k random, ± sd")
        for value, color in ((r["accuracy_all"], "#009E73"), (r["majority"], "#999999")):
            if isinstance(value, float) and math.isfinite(value):
                self.curve.addItem(pg.InfiniteLine(value, angle=0, pen=pg.mkPen(
                    color, width=1, style=Qt.PenStyle.DashLine)))
        self.curve.getAxis("bottom").setTicks([ticks])
        self.curve.setXRange(float(x.min()) - 0.3, float(x.max()) + 0.3, padding=0)
        self.curve.setLabel("bottom", "k (units)")
        self.curve.setYRange(0, 1)
        self.curve.setLabel("left", "held-out accuracy")
        self.curve.setTitle(f"layer {r['layer']} {r['direction']} {r['state']}", size="9pt")
        self.curve.setToolTip(f"a probe on the top-k units of each method against k random "
                              f"units (mean ± sd over the seeds); dashed: all units "
                              f"{r['accuracy_all']:.3f} (green), majority {r['majority']:.3f}")
