"""The Corpus view's widgets: they draw what they are given and emit signals (no jobs here).

Without an open index the view is one line of hint with Build and Open buttons; with one, a
query bar, three concordance tables side by side (one per layer, keyword in context, the word
highlighted), and below them as tabs the map (one plot per layer; Shift+drag selects), the
senses table and the map selection's concordance lines.
"""
from __future__ import annotations

import html
from typing import Dict, List, Optional, Sequence, Tuple

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (QAbstractItemView, QComboBox, QGroupBox, QHBoxLayout,
                               QHeaderView, QLabel, QLineEdit, QProgressBar, QPushButton,
                               QSizePolicy, QSpinBox, QSplitter, QStyledItemDelegate, QStackedWidget, QTableWidget,
                               QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget)

from elmo_engine.index.hits import kwic_line
from elmo_explorer.views.corpus.mapplot import MapPlot
from elmo_explorer.views.corpus.model import SENSES_NOTE
from elmo_explorer.views.corpus.model import (ConcordanceLine, CorpusOptions, DEFAULT_LAYERS,
                                              MapScope, MapSelection, Query)
from elmo_explorer.views.palette import FOUND_COLOUR

HIGHLIGHT = FOUND_COLOUR       # the Projection view's "found" colour
SELECTION_HINT = "Shift+drag a box on the map to list the occurrences inside it."
HINT = ("No corpus index is open: build one from the bundled reference corpus, or open an "
        "index folder.")
#: characters of context each side of the word in a typical sentence (the Senses table)
TYPICAL_WIDTH = 30
CLUSTER_COLUMNS = (("layer", "Layer"), ("cluster", "Sense"), ("size", "Occurrences"),
                   ("share", "Share"), ("silhouette", "Silhouette"),
                   ("context_words", "Distinctive context words"),
                   ("typical", "Most typical sentence"))


def layer_name(layer: int) -> str:
    """A table's title: layer 0 is the char-CNN token layer, layer k the k-th biLSTM layer
    (a deeper model's index has more than the published models' two)."""
    return "layer 0 (char-CNN token layer)" if layer == 0 else f"layer {layer} (biLSTM {layer})"


class _ElideLeft(QStyledItemDelegate):
    """The left context loses its far (left) end when the column is narrow."""

    def initStyleOption(self, option, index):
        super().initStyleOption(option, index)
        option.textElideMode = Qt.TextElideMode.ElideLeft


class ConcordanceTable(QTableWidget):
    """Keyword-in-context lines of one layer: cosine | left context | word | right context
    (``first="sentence"``: the sentence id instead of the cosine, for a map selection)."""

    def __init__(self, parent=None, first: str = "cos"):
        super().__init__(0, 4, parent)
        self.first = first
        self.setHorizontalHeaderLabels([first, "left", "word", "right"])
        self.verticalHeader().hide()
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setWordWrap(False)
        self.setShowGrid(False)
        h = self.horizontalHeader()
        h.setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        h.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        h.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.verticalHeader().setDefaultSectionSize(18)
        self.setTextElideMode(Qt.TextElideMode.ElideRight)     # the right context: its far end
        self.setItemDelegateForColumn(1, _ElideLeft(self))
        self.lines: List[ConcordanceLine] = []

    def set_lines(self, lines: Sequence[ConcordanceLine], texts: Dict[int, str]) -> None:
        self.lines = list(lines)
        self.setRowCount(len(lines))
        bold = QFont(self.font())
        bold.setBold(True)
        for r, line in enumerate(lines):
            head = f"{line.cosine:.3f}" if self.first == "cos" else str(line.sentence_id)
            cells = [QTableWidgetItem(head), QTableWidgetItem(line.left),
                     QTableWidgetItem(line.word), QTableWidgetItem(line.right)]
            cells[0].setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            cells[1].setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
            cells[2].setFont(bold)
            cells[2].setBackground(QBrush(QColor(HIGHLIGHT)))
            tip = (f"sentence {line.sentence_id}, token {line.position}: "
                   f"{html.escape(line.left)} <b>{html.escape(line.word)}</b> "
                   f"{html.escape(line.right)}")
            for c, item in enumerate(cells):
                item.setToolTip(tip)
                self.setItem(r, c, item)
        self.resizeColumnToContents(0)


class CorpusView(QWidget):
    """Signals: ``build_requested`` (the reference corpus), ``build_files_requested`` (ask for
    files), ``open_requested``, ``cancel_requested``,
    ``word_requested(str)``, ``options_changed``, ``line_activated(int layer, int row)``,
    ``map_point_clicked(int layer, int index)``, ``map_selection(int layer, object indices,
    object rect)`` (a box drawn on one layer's map: the points inside it and the box)."""

    build_requested = Signal()
    build_files_requested = Signal()
    open_requested = Signal()
    cancel_requested = Signal()
    word_requested = Signal(str)
    options_changed = Signal()
    line_activated = Signal(int, int)
    map_point_clicked = Signal(int, int)
    map_selection = Signal(int, object, object)

    def __init__(self, parent=None):
        super().__init__(parent)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        # ---- the bar: index, build/open, progress, cancel --------------------------------------
        bar = QHBoxLayout()
        self.index_label = QLabel("no index")
        self.index_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.index_label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open_button = QPushButton("Open index…")
        self.build_button = QPushButton("Build index…")
        self.build_button.setToolTip("Index corpus files of your own (UTF-8 text, plain or .gz)")
        self.progress = QProgressBar()
        self.progress.setMaximumWidth(160)
        self.progress.hide()
        self.status = QLabel("")
        self.status.setMaximumWidth(420)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.hide()
        bar.addWidget(self.index_label, 1)
        for w in (self.status, self.progress, self.cancel_button, self.open_button,
                  self.build_button):
            bar.addWidget(w)
        lay.addLayout(bar)
        # ---- hint page / main page --------------------------------------------------------------
        self.pages = QStackedWidget()
        lay.addWidget(self.pages, 1)
        hint_page = QWidget()
        hl = QHBoxLayout(hint_page)
        self.hint = QLabel(HINT)
        self.hint.setWordWrap(True)                 # one line at the window's usual widths
        self.hint.setMinimumWidth(300)
        self.hint_build = QPushButton("Build")
        self.hint_open = QPushButton("Open…")
        hl.addWidget(self.hint, 1)                  # the label takes the width: one line
        hl.addWidget(self.hint_build)
        hl.addWidget(self.hint_open)
        hint_page.setMaximumHeight(60)
        hint_wrap = QWidget()
        hwl = QVBoxLayout(hint_wrap)
        hwl.addWidget(hint_page)
        hwl.addStretch(1)
        self.pages.addWidget(hint_wrap)
        self.pages.addWidget(self._main_page())
        for b, sig in ((self.open_button, self.open_requested), (self.hint_open, self.open_requested),
                       (self.build_button, self.build_files_requested),
                       (self.hint_build, self.build_requested),
                       (self.cancel_button, self.cancel_requested)):
            b.clicked.connect(sig)

    def main_button(self):
        """Build the index (View ▸ Run, Ctrl+R); with an index open, queries run as the
        selection changes."""
        return self.build_button

    def _main_page(self) -> QWidget:
        page = QWidget()
        lay = QVBoxLayout(page)
        lay.setContentsMargins(0, 0, 0, 0)
        q = QHBoxLayout()
        self.word_edit = QLineEdit()
        self.word_edit.setPlaceholderText("a word, or select a token in any view")
        self.word_edit.setMaximumWidth(220)
        self.word_edit.returnPressed.connect(
            lambda: self.word_edit.text().strip() and self.word_requested.emit(
                self.word_edit.text().strip()))
        self.k_box = QSpinBox()
        self.k_box.setRange(1, 200)
        self.k_box.setPrefix("k = ")
        self.scope = QComboBox()
        self.scope.addItem("same word", True)
        self.scope.addItem("any word", False)
        self.map_scope = QComboBox()
        self.map_scope.addItem("map: the word's occurrences", MapScope.WORD)
        self.map_scope.addItem("map: every token", MapScope.ALL)
        self.query_label = QLabel("")
        self.query_label.setTextFormat(Qt.TextFormat.RichText)
        # a long sentence must not widen the window: the label takes the width that is left
        self.query_label.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Preferred)
        self.query_label.setMinimumWidth(40)
        for w in (QLabel("Word:"), self.word_edit, self.k_box, self.scope, self.map_scope):
            q.addWidget(w)
        q.addWidget(self.query_label, 1)
        lay.addLayout(q)
        for sig in (self.k_box.valueChanged, self.scope.currentIndexChanged,
                    self.map_scope.currentIndexChanged):
            sig.connect(lambda *_: self.options_changed.emit())
        split = QSplitter(Qt.Orientation.Vertical)
        top = QWidget()
        tl = QHBoxLayout(top)
        tl.setContentsMargins(0, 0, 0, 0)
        self.tables: Dict[int, ConcordanceTable] = {}
        self.table_boxes: Dict[int, QGroupBox] = {}
        self.maps: Dict[int, MapPlot] = {}
        self._table_row = tl
        split.addWidget(top)
        self.tabs = QTabWidget()
        map_page = QWidget()
        ml = QVBoxLayout(map_page)
        ml.setContentsMargins(0, 0, 0, 0)
        plots = QHBoxLayout()
        self._map_row = plots
        for layer in DEFAULT_LAYERS:
            self._add_layer(layer)
        ml.addLayout(plots, 1)
        self.map_note = QLabel("")
        self.map_note.setWordWrap(True)
        ml.addWidget(self.map_note)
        self.tabs.addTab(map_page, "Map")
        senses_page = QWidget()
        sp = QVBoxLayout(senses_page)
        sp.setContentsMargins(0, 0, 0, 0)
        self.senses_note = QLabel(SENSES_NOTE)
        self.senses_note.setWordWrap(True)
        sp.addWidget(self.senses_note)
        self.clusters = QTableWidget(0, len(CLUSTER_COLUMNS))
        self.clusters.setHorizontalHeaderLabels([t for _k, t in CLUSTER_COLUMNS])
        self.clusters.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.clusters.verticalHeader().hide()
        self.clusters.horizontalHeader().setStretchLastSection(True)
        self.clusters.setWordWrap(False)
        sp.addWidget(self.clusters, 1)
        self.tabs.addTab(senses_page, "Senses")
        sel_page = QWidget()
        sl = QVBoxLayout(sel_page)
        sl.setContentsMargins(0, 0, 0, 0)
        self.selection_note = QLabel(SELECTION_HINT)
        self.selection_note.setWordWrap(True)
        self.selection_table = ConcordanceTable(first="sentence")
        self.selection_table.cellDoubleClicked.connect(
            lambda r, _c: self.line_activated.emit(-1, r))
        sl.addWidget(self.selection_note)
        sl.addWidget(self.selection_table, 1)
        self.tabs.addTab(sel_page, "Selection")
        split.addWidget(self.tabs)
        split.setStretchFactor(0, 1)
        split.setStretchFactor(1, 1)
        split.setSizes([300, 340])                  # ~12 concordance lines at 1280 × 800
        lay.addWidget(split, 1)
        return page

    def _add_layer(self, layer: int) -> None:
        """A layer's concordance table and map, after the others (an index of a model of
        other depth holds other layers than the published models' 0, 1 and 2)."""
        box = QGroupBox(layer_name(layer))
        bl = QVBoxLayout(box)
        bl.setContentsMargins(2, 2, 2, 2)
        t = ConcordanceTable()
        t.setMinimumWidth(120)
        t.cellDoubleClicked.connect(lambda r, _c, lay=layer: self.line_activated.emit(lay, r))
        bl.addWidget(t)
        self._table_row.addWidget(box)
        self.tables[layer], self.table_boxes[layer] = t, box
        m = MapPlot(layer_name(layer))
        m.setMinimumWidth(120)
        m.point_clicked.connect(lambda i, lay=layer: self.map_point_clicked.emit(lay, i))
        m.selection_made.connect(
            lambda idx, rect, lay=layer: self.map_selection.emit(lay, idx, rect))
        self._map_row.addWidget(m)
        self.maps[layer] = m

    # ---- state --------------------------------------------------------------------------------
    def show_index(self, summary: Optional[str], layers: Sequence[int] = DEFAULT_LAYERS) -> None:
        """The main page for an open index (its one-line summary), else the hint; a table and
        a map for each of its layers."""
        self.index_label.setText(summary or "no index")
        self.pages.setCurrentIndex(1 if summary else 0)
        for layer in sorted(layers):
            if layer not in self.tables:
                self._add_layer(layer)
        for layer, box in self.table_boxes.items():
            box.setVisible(layer in layers)
            self.maps[layer].setVisible(layer in layers)

    def set_busy(self, busy: bool, message: str = "") -> None:
        self.progress.setVisible(busy)
        self.cancel_button.setVisible(busy)
        self.build_button.setEnabled(not busy)
        self.hint_build.setEnabled(not busy)
        self.open_button.setEnabled(not busy)
        self.status.setStyleSheet("")
        self.status.setText(message)
        if busy:
            self.progress.setRange(0, 0)

    def show_error(self, message: str) -> None:
        self.status.setStyleSheet("color: #c0392b")
        self.status.setText(message)
        self.status.setToolTip(message)

    def set_progress(self, done: int, total: int, message: str) -> None:
        if total > 0:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(1000 * min(done, total) / total))
        self.status.setText(message)

    def options(self) -> Tuple[int, bool, str]:
        return self.k_box.value(), bool(self.scope.currentData()), self.map_scope.currentData()

    def apply_options(self, o: CorpusOptions) -> None:
        for w in (self.k_box, self.scope, self.map_scope):
            w.blockSignals(True)
        self.k_box.setValue(o.k)
        self.scope.setCurrentIndex(0 if o.same_word else 1)
        self.map_scope.setCurrentIndex(0 if o.map_scope == MapScope.WORD else 1)
        for w in (self.k_box, self.scope, self.map_scope):
            w.blockSignals(False)

    def show_query(self, q: Optional[Query]) -> None:
        if q is None:
            self.query_label.setText("")
            return
        toks = [html.escape(t) for t in q.tokens]
        toks[q.position] = (f"<b style='background:{HIGHLIGHT}'>{toks[q.position]}</b>")
        text = " ".join(toks)
        self.query_label.setText(text)
        self.query_label.setToolTip(text)
        self.word_edit.setText(q.word)

    def show_lines(self, lines: Dict[int, List[ConcordanceLine]]) -> None:
        for layer, table in self.tables.items():
            table.set_lines(lines.get(layer, []), {})

    def show_clusters(self, rows: List[dict], note: str = SENSES_NOTE) -> None:
        """The clusters' rows; a typical sentence as a keyword-in-context line centred on the
        word (the ``[word]`` mark never cut), the whole sentences in its tooltip."""
        self.senses_note.setText(note)
        self.clusters.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, (key, _title) in enumerate(CLUSTER_COLUMNS):
                v = row.get(key)
                if key == "typical" and v and row.get("typical_position", -1) >= 0:
                    v = kwic_line(str(v).split(" "), int(row["typical_position"]), TYPICAL_WIDTH)
                item = QTableWidgetItem("" if v is None else str(v))
                if key == "typical" and row.get("typical"):
                    more = row.get("more_typical", "")
                    item.setToolTip(row["typical"] + ("\n" + more.replace(" | ", "\n")
                                                      if more else ""))
                self.clusters.setItem(r, c, item)
        self.clusters.resizeColumnsToContents()

    def show_selection(self, sel: Optional[MapSelection]) -> None:
        """The map selection's concordance lines (None: nothing selected) and its count."""
        if sel is None:
            self.selection_note.setText(SELECTION_HINT)
            self.selection_table.set_lines([], {})
            self.tabs.setTabText(2, "Selection")
            return
        listed = len(sel.lines)
        self.selection_note.setText(
            f"{sel.n:,} occurrences selected on the layer {sel.layer} map (ringed in every "
            "layer)" + ("" if listed == sel.n else
                        f"; the first {listed:,} in corpus order listed" if listed else
                        "; reading their sentences…"))
        self.selection_table.set_lines(sel.lines, {})
        self.tabs.setTabText(2, f"Selection ({sel.n:,})")
