"""The Layers view's widgets: the corpus and run controls, the three contextuality curves, the
CKA heatmap and the MDL table.

:class:`LayersView` draws what :class:`~elmo_explorer.views.layers.model.LayersModel` holds and
announces the user's requests as signals;
:class:`~elmo_explorer.views.layers.controller.LayersPanel` (the controller) runs the jobs. Colours
come from :mod:`elmo_engine.io.figures` (the exported figures use the same ones).
"""
from __future__ import annotations

import math
from typing import List, Optional

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (QCheckBox, QHBoxLayout, QHeaderView, QLabel, QPushButton,
                               QSpinBox, QSplitter, QTableWidget, QTableWidgetItem, QTabWidget,
                               QVBoxLayout, QWidget)

from elmo_engine.io.figures import BASELINE_COLOR
from elmo_engine.io.figures.layers import DIRECTION_COLORS, MEASURES
from elmo_explorer.views.heatmap import _colour_bar, _heatmap_plot
from elmo_explorer.views.layers.model import LayersSettings

MDL_COLUMNS = ("task", "probe", "codelength (kbits)", "compression", "MDL last-block acc.",
               "probe test acc. (Probes tab)")
#: what the empty MDL table and the empty CKA heatmap need (one line each)
MDL_HINT = ("No MDL result yet: press <b>MDL: demo POS</b> or <b>MDL: demo word sense</b> to "
            "train online-code probes of every layer on that many labelled sentences "
            "(Voita &amp; Titov 2020).")
CKA_HINT = "CKA: press Run, or File → Compare with checkpoint…"
HUB_COLUMNS = ("layer", "skew", "N_k", "hub", "example context")
HUB_HINT = ("No hubness yet: Run computes, per layer, how many tokens have each token among "
            "their k nearest neighbours (N_k) and lists the hubs (Radovanović et al. 2010).")
#: the widest the corpus name may make the Layers view's first row (longer names are elided)
CORPUS_LABEL_PX = 220


class LayersView(QWidget):
    """Controls, curves, heatmap and table.

    Signals
    -------
    run_requested() : the Run button (or Ctrl+R)
    settings_changed() : a setting that changes how results are drawn (raw / adjusted)
    corpus_requested(str) : "choose" (a file dialog) or "reference" (the shipped corpus)
    mdl_requested(str) : run the MDL probe of a demo task ("demo-pos", "demo-wsd")
    """

    run_requested = Signal()
    settings_changed = Signal()
    corpus_requested = Signal(str)
    mdl_requested = Signal(str)

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        top = QHBoxLayout()
        self.corpus_label = QLabel("corpus: reference corpus")
        self.corpus_label.setToolTip("the sentences analysed (one per line)")
        self.choose_button = QPushButton("Corpus…")
        self.choose_button.setToolTip("analyse your own corpus: a UTF-8 file, one sentence a line")
        self.reference_button = QPushButton("Reference corpus")
        self.reference_button.setToolTip("the shipped reference corpus (4,000 sentences)")
        self.pretokenized_box = QCheckBox("pretokenized")
        self.pretokenized_box.setToolTip(
            "split your corpus's lines on spaces only, as layers --pretokenized does: for text "
            "that is already tokenized (WikiText's @-@ stays one word); off: tokenized as typed "
            "text")
        self.sentences_box = QSpinBox()
        self.sentences_box.setRange(10, 10_000_000)
        self.sentences_box.setSingleStep(250)
        self.sentences_box.setSuffix(" sentences")
        self.sentences_box.setToolTip("a seeded random sample of the corpus' sentences")
        self.full_box = QCheckBox("whole corpus")
        self.adjusted_box = QCheckBox("anisotropy-adjusted (− baseline)")
        self.adjusted_box.setToolTip("show measure − baseline (the same measure on random tokens)")
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("compute contextuality and CKA on the worker (Ctrl+R)")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        for w in (self.corpus_label, self.choose_button, self.reference_button,
                  self.pretokenized_box, self.sentences_box, self.full_box, self.run_button,
                  self.cancel_button):
            top.addWidget(w)
        top.addStretch(1)

        self.curve_widget = pg.GraphicsLayoutWidget()
        self.curve_widget.setBackground("w")
        self.curve_plots: List[pg.PlotItem] = []
        for key, name in MEASURES:
            p = self.curve_widget.addPlot(title=f"<span style='color:#000'>{name}</span>")
            p.setLabel("bottom", "layer", color="k")
            p.showGrid(y=True, alpha=0.2)
            for side in ("left", "bottom"):
                p.getAxis(side).setPen("k")
                p.getAxis(side).setTextPen("k")
            p.setMenuEnabled(False)
            self.curve_plots.append(p)
        self.hub_plot = self.curve_widget.addPlot(title=_hub_title(None))
        self.hub_plot.setLabel("bottom", "layer", color="k")
        self.hub_plot.showGrid(y=True, alpha=0.2)
        for side in ("left", "bottom"):
            self.hub_plot.getAxis(side).setPen("k")
            self.hub_plot.getAxis(side).setTextPen("k")
        self.hub_plot.setMenuEnabled(False)

        self.cka_widget = pg.GraphicsLayoutWidget()
        self.cka_widget.setBackground("w")
        self.cka_plot = self.cka_widget.addPlot()
        self.cka_image = _heatmap_plot(self.cka_plot)
        self.cka_bar = _colour_bar((0.0, 1.0), "linear CKA", self.cka_image)
        self.cka_bar.getAxis("right").setWidth(64)     # the tick values and the label side by side
        self.cka_widget.addItem(self.cka_bar)
        self.cka_texts: list = []
        self.cka_matrix: Optional[np.ndarray] = None

        mdl_box = QWidget()
        ml = QVBoxLayout(mdl_box)
        ml.setContentsMargins(0, 0, 0, 0)
        buttons = QHBoxLayout()
        self.mdl_buttons = {}
        for task, text in (("demo-pos", "MDL: demo POS"), ("demo-wsd", "MDL: demo word sense")):
            b = QPushButton(text)
            b.setToolTip(f"online-code MDL probes of every layer on the {text[5:]} task "
                         "(Voita & Titov 2020)")
            b.clicked.connect(lambda _=False, t=task: self.mdl_requested.emit(t))
            buttons.addWidget(b)
            self.mdl_buttons[task] = b
        self.mdl_sentences_box = QSpinBox()
        self.mdl_sentences_box.setRange(20, 1_000_000)
        self.mdl_sentences_box.setSingleStep(100)
        self.mdl_sentences_box.setSuffix(" labelled sentences")
        buttons.addWidget(self.mdl_sentences_box)
        buttons.addStretch(1)
        ml.addLayout(buttons)
        self.mdl_table = QTableWidget(0, len(MDL_COLUMNS))
        self.mdl_table.setHorizontalHeaderLabels(MDL_COLUMNS)
        self.mdl_table.verticalHeader().setVisible(False)
        self.mdl_table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        # an empty table says what fills it (issue 29: it was blank with no hint)
        self.mdl_hint = QLabel(MDL_HINT, wordWrap=True)
        ml.addWidget(self.mdl_hint)
        ml.addWidget(self.mdl_table, 1)

        hub_box = QWidget()
        hl = QVBoxLayout(hub_box)
        hl.setContentsMargins(0, 0, 0, 0)
        self.hub_hint = QLabel(HUB_HINT, wordWrap=True)
        self.hub_table = QTableWidget(0, len(HUB_COLUMNS))
        self.hub_table.setHorizontalHeaderLabels(HUB_COLUMNS)
        self.hub_table.verticalHeader().setVisible(False)
        header = self.hub_table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        hl.addWidget(self.hub_hint)
        hl.addWidget(self.hub_table, 1)
        self.tabs = QTabWidget()
        self.tabs.addTab(mdl_box, "MDL probes")
        self.tabs.addTab(hub_box, "Hubs per layer")

        lower = QSplitter(Qt.Orientation.Horizontal)
        lower.addWidget(self.cka_widget)
        lower.addWidget(self.tabs)
        lower.setSizes([420, 560])
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.curve_widget)
        split.addWidget(lower)
        split.setSizes([330, 420])
        self.legend = QLabel(_legend(False))
        self.legend.setToolTip("lower self-similarity / MEV = more context-specific")
        self.summary = QLabel("")
        self.summary.setWordWrap(True)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        # the legend shares its row with the display option it explains, so that neither row
        # makes the window wider than a 1280-pixel screen
        legend_row = QHBoxLayout()
        legend_row.addWidget(self.legend)
        legend_row.addStretch(1)
        legend_row.addWidget(self.adjusted_box)
        lay.addLayout(top)
        lay.addWidget(self.summary)
        lay.addLayout(legend_row)
        lay.addWidget(split, 1)
        lay.addWidget(self.status)

        self.run_button.clicked.connect(self.run_requested)
        self.choose_button.clicked.connect(lambda: self.corpus_requested.emit("choose"))
        self.reference_button.clicked.connect(lambda: self.corpus_requested.emit("reference"))
        self.adjusted_box.toggled.connect(lambda _=False: self.settings_changed.emit())
        self.full_box.toggled.connect(lambda on: self.sentences_box.setEnabled(not on))

    # ---- settings ---------------------------------------------------------------------------
    def settings(self, corpus: str) -> LayersSettings:
        return LayersSettings(corpus, self.sentences_box.value(), self.full_box.isChecked(),
                              self.adjusted_box.isChecked(), self.mdl_sentences_box.value(),
                              self.pretokenized_box.isChecked())

    def apply_settings(self, s: LayersSettings) -> None:
        """Show ``s`` without announcing it."""
        boxes = (self.sentences_box, self.full_box, self.adjusted_box, self.mdl_sentences_box,
                 self.pretokenized_box)
        for b in boxes:
            b.blockSignals(True)
        try:
            self.sentences_box.setValue(s.sentences)
            self.full_box.setChecked(s.full)
            self.sentences_box.setEnabled(not s.full)
            self.adjusted_box.setChecked(s.adjusted)
            self.mdl_sentences_box.setValue(s.mdl_sentences)
            self.pretokenized_box.setChecked(s.pretokenized)
            self.pretokenized_box.setEnabled(bool(s.corpus))     # the reference corpus: off
        finally:
            for b in boxes:
                b.blockSignals(False)
        name = s.corpus.replace("\\", "/").rsplit("/", 1)[-1] if s.corpus else "reference corpus"
        # a long file name is elided in the middle (the tooltip has the whole path), so that it
        # cannot widen the window
        metrics = self.corpus_label.fontMetrics()
        self.corpus_label.setText(metrics.elidedText("corpus: " + name,
                                                     Qt.TextElideMode.ElideMiddle, CORPUS_LABEL_PX))
        self.corpus_label.setToolTip(s.corpus or "the shipped reference corpus")

    def set_busy(self, busy: bool) -> None:
        self.run_button.setEnabled(not busy)
        for b in self.mdl_buttons.values():
            b.setEnabled(not busy)
        self.cancel_button.setEnabled(busy)

    # ---- drawing ----------------------------------------------------------------------------
    def draw_curves(self, curves_by_measure: List[List[dict]], adjusted: bool) -> None:
        """One list of direction curves per measure (``LayersModel.curves``)."""
        self.legend.setText(_legend(adjusted))
        for plot, curves, (_key, name) in zip(self.curve_plots, curves_by_measure, MEASURES):
            plot.clear()
            for side in ("left", "bottom"):        # no empty axes before a run: the title says
                plot.showAxis(side, bool(curves))  # what fills the plot
            suffix = (" − baseline" if adjusted else "") if curves else ": press Run"
            plot.setTitle(f"<span style='color:#000'>{name}{suffix}</span>")
            for c in curves:
                color = DIRECTION_COLORS[c["direction"]]
                plot.plot(c["layers"], c["values"], pen=pg.mkPen(color, width=2), symbol="o",
                          symbolSize=6, symbolBrush=color, symbolPen=color, name=c["direction"])
                if not adjusted:
                    plot.plot(c["layers"], c["baselines"],
                              pen=pg.mkPen(color, width=1, style=Qt.PenStyle.DashLine),
                              symbol="x", symbolSize=6, symbolPen=color,
                              name=f"{c['direction']}: baseline")
            if adjusted and curves:
                plot.addItem(pg.InfiniteLine(0, angle=0, pen=pg.mkPen(
                    BASELINE_COLOR, style=Qt.PenStyle.DotLine)))
            n = max((max(c["layers"]) for c in curves), default=0) + 1
            plot.getAxis("bottom").setTicks([[(i, str(i)) for i in range(n)]])

    def draw_cka(self, cka: Optional[dict], title: str = "") -> None:
        """An annotated heatmap of ``cka`` (rows × columns, row 0 at the top) on [0, 1]."""
        for t in self.cka_texts:
            self.cka_plot.removeItem(t)
        self.cka_texts = []
        empty = cka is None
        for side in ("left", "bottom"):            # no axes around nothing: the title says why
            self.cka_plot.showAxis(side, not empty)
        self.cka_bar.setVisible(not empty)
        if cka is None:
            self.cka_matrix = None
            self.cka_image.clear()
            self.cka_plot.setTitle(f"<span style='color:#000; font-size:9pt'>{CKA_HINT}</span>")
            return
        m = np.array([[np.nan if v is None else v for v in row] for row in cka["matrix"]], float)
        self.cka_matrix = m
        r, c = m.shape
        f = max(1, math.ceil(240 / max(r, c)))
        self.cka_image.setImage(np.kron(m, np.ones((f, f))).T, levels=(0.0, 1.0),
                                autoLevels=False)
        self.cka_image.setRect(0, 0, c, r)
        self.cka_plot.setRange(xRange=(0, c), yRange=(0, r), padding=0.02)
        font = QFont()
        font.setPointSize(9)
        for (i, j), v in np.ndenumerate(m):
            t = pg.TextItem("—" if not np.isfinite(v) else f"{v:.2f}",
                            color="k" if np.isfinite(v) and v > 0.5 else "w", anchor=(0.5, 0.5))
            t.setFont(font)
            t.setPos(j + 0.5, i + 0.5)
            self.cka_plot.addItem(t)
            self.cka_texts.append(t)
        self.cka_plot.getAxis("left").setTicks([[(i + 0.5, n) for i, n in enumerate(cka["rows"])]])
        self.cka_plot.getAxis("bottom").setTicks(
            [[(j + 0.5, n) for j, n in enumerate(cka["columns"])]])
        compared = cka["columns"] != cka["rows"]
        self.cka_plot.setLabel("left", "model A" if compared else "layer", color="k")
        self.cka_plot.setLabel("bottom", "model B" if compared else "layer", color="k")
        self.cka_plot.setTitle(f"<span style='color:#000'>{title}</span>")

    def fill_mdl(self, rows: List[List[str]]) -> None:
        self.mdl_hint.setVisible(not rows)
        self.mdl_table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.mdl_table.setItem(r, c, item)

    def draw_hubness(self, h: Optional[dict], rows: List[List[str]]) -> None:
        """The skewness of N_k per layer (``h``: the ``hubness`` object of ``layers --json``)
        and the hubs' table (``LayersModel.hub_rows``)."""
        p = self.hub_plot
        p.clear()
        p.setTitle(_hub_title(h))
        for side in ("left", "bottom"):
            p.showAxis(side, h is not None)
        if h is not None:
            xs = [e["layer"] for e in h["layers"]]
            p.plot(xs, [e["skewness"] for e in h["layers"]], pen=pg.mkPen("#253494", width=2),
                   symbol="o", symbolSize=6, symbolBrush="#253494", symbolPen="#253494")
            p.addItem(pg.InfiniteLine(0, angle=0, pen=pg.mkPen(
                BASELINE_COLOR, style=Qt.PenStyle.DotLine)))
            p.getAxis("bottom").setTicks([[(x, str(x)) for x in xs]])
        self.hub_hint.setVisible(not rows)
        self.hub_table.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(row):
                item = QTableWidgetItem(text)
                item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
                if c < 3:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.hub_table.setItem(r, c, item)

    def main_button(self) -> QPushButton:
        """Run (View ▸ Run, Ctrl+R)."""
        return self.run_button

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet("color: #b00020;" if error else "")
        self.status.setText(text)


def _hub_title(h: Optional[dict]) -> str:
    """The hubness plot's title: what it shows, or what fills it."""
    text = f"hubness: skew of N<sub>{h['k']}</sub>" if h is not None else "hubness: press Run"
    return f"<span style='color:#000'>{text}</span>"


def _legend(adjusted: bool) -> str:
    """The curves' key (one line above the plots, where it hides no data)."""
    dirs = "  ".join(f"<span style='color:{c}'>━●━ {d}</span>"
                     for d, c in DIRECTION_COLORS.items())
    if adjusted:
        return dirs + " &nbsp; value − anisotropy baseline; dotted: 0 (no more alike than random tokens)"
    return dirs + " &nbsp; dashed ╌×╌ in the same colour: its anisotropy baseline (random tokens)"
