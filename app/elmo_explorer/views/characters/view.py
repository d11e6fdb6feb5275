"""The Characters view's widgets: the words to look at, and four tabs — the word lab (with the
choice of its known words), the filter atlas, the perturbation sweep and the nonce word in
context (with the corpus index its nearest occurrences come from).

:class:`CharactersView` draws what :class:`~elmo_explorer.views.characters.model.CharactersModel`
holds and announces the user's requests as signals; the controller
(:class:`~elmo_explorer.views.characters.controller.CharactersPanel`) runs the jobs. Text that
can be long (n-grams, neighbours) is wrapped in a text browser or elided in table cells with the
whole text in the tooltip, so nothing is clipped at 1280×800.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import List, Optional

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import (QComboBox, QHBoxLayout, QHeaderView, QLabel, QLineEdit,
                               QPushButton, QSpinBox, QSplitter, QTableWidget, QTableWidgetItem,
                               QTabWidget, QTextBrowser, QVBoxLayout, QWidget)

from elmo_explorer.views.characters.model import (EXAMPLES, INDEX_LABELS, VOCAB_LABELS,
                                                  CharactersModel, IndexSource, VocabSource,
                                                  format_ngrams)

MONO = QFont("monospace")
MONO.setStyleHint(QFont.StyleHint.Monospace)


def cosine_colour(v: float) -> QColor:
    """A light background for a cosine: red-ish near 0, white at 0.5, green-ish near 1."""
    v = max(0.0, min(1.0, float(v)))
    if v < 0.5:
        t = v / 0.5
        return QColor(int(244 + 11 * t), int(165 + 90 * t), int(130 + 125 * t))
    t = (v - 0.5) / 0.5
    return QColor(int(255 - 90 * t), int(255 - 25 * t), int(255 - 90 * t))


def _item(text: str, tip: str = "", mono: bool = False) -> QTableWidgetItem:
    it = QTableWidgetItem(text)
    it.setFlags(it.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tip:
        it.setToolTip(tip)
    if mono:
        it.setFont(MONO)
    return it


def _table(columns: List[str]) -> QTableWidget:
    t = QTableWidget(0, len(columns))
    t.setHorizontalHeaderLabels(columns)
    t.verticalHeader().setVisible(False)
    t.setWordWrap(False)
    t.setTextElideMode(Qt.TextElideMode.ElideRight)
    t.horizontalHeader().setStretchLastSection(True)
    t.verticalHeader().setDefaultSectionSize(22)
    return t


class CharactersView(QWidget):
    """The words row, the status line and the three tabs.

    Signals
    -------
    analyse_requested() : the Analyse button (or Return in the words field)
    sweep_requested() : the Sweep button (or Return in the sentence or word field)
    search_changed() : the atlas's search text or width changed
    nonce_requested() : the Ask button (or Return in the In context tab's fields)
    vocabulary_chosen(str) : a :class:`VocabSource` value picked in the Word lab tab (``"file"``
        each time "A file…" is picked: the controller asks for the file)
    index_chosen(str) : an :class:`IndexSource` value picked in the In context tab (``"folder"``
        each time "Index…" is picked)
    """

    analyse_requested = Signal()
    sweep_requested = Signal()
    search_changed = Signal()
    nonce_requested = Signal()
    vocabulary_chosen = Signal(str)
    index_chosen = Signal(str)

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        top = QHBoxLayout()
        top.addWidget(QLabel("Words:"))
        self.words_edit = QLineEdit()
        self.words_edit.setPlaceholderText("any words: made up, misspelt, digits, other scripts")
        self.words_edit.setToolTip("whitespace-separated; examples: " + " ".join(EXAMPLES))
        self.words_edit.returnPressed.connect(self.analyse_requested)
        top.addWidget(self.words_edit, 1)
        top.addWidget(QLabel("filters"))
        self.filters_box = QSpinBox()
        self.filters_box.setRange(1, 100)
        self.filters_box.setToolTip("filters shown per word (those it fires most)")
        top.addWidget(self.filters_box)
        self.analyse_button = QPushButton("Analyse")
        self.analyse_button.clicked.connect(self.analyse_requested)
        top.addWidget(self.analyse_button)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        top.addWidget(self.cancel_button)
        self.status = QLabel("")
        self.status.setWordWrap(True)
        self.tabs = QTabWidget()
        self.tabs.addTab(self._lab_tab(), "Word lab")
        self.tabs.addTab(self._atlas_tab(), "Filter atlas")
        self.tabs.addTab(self._sweep_tab(), "Perturbations")
        self.tabs.addTab(self._nonce_tab(), "In context")
        lay = QVBoxLayout(self)
        lay.addLayout(top)
        lay.addWidget(self.status)
        lay.addWidget(self.tabs, 1)

    # ---- the tabs ---------------------------------------------------------------------------
    def _lab_tab(self) -> QWidget:
        w = QWidget()
        row = QHBoxLayout()
        row.addWidget(QLabel("Known words:"))
        self.vocab_combo = QComboBox()
        for source, label in VOCAB_LABELS.items():
            self.vocab_combo.addItem(label, source.value)
        self.vocab_combo.setToolTip("the words the nearest known words at layer 0 and the norm "
                                    "percentile are taken from")
        self.vocab_combo.activated.connect(
            lambda i: self.vocabulary_chosen.emit(str(self.vocab_combo.itemData(i))))
        row.addWidget(self.vocab_combo)
        self.vocab_info = QLabel("")
        self.vocab_info.setStyleSheet("color: #555;")
        row.addWidget(self.vocab_info, 1)
        self.lab_text = QTextBrowser()
        self.lab_text.setOpenLinks(False)
        lay = QVBoxLayout(w)
        lay.setContentsMargins(0, 4, 0, 0)
        lay.addLayout(row)
        lay.addWidget(self.lab_text, 1)
        return w

    def _atlas_tab(self) -> QWidget:
        w = QWidget()
        row = QHBoxLayout()
        row.addWidget(QLabel("Search n-gram:"))
        self.search_edit = QLineEdit()
        self.search_edit.setPlaceholderText("-ness (a suffix), un- (a prefix), ing (anywhere)")
        self.search_edit.textChanged.connect(self.search_changed)
        row.addWidget(self.search_edit, 1)
        row.addWidget(QLabel("width"))
        self.width_combo = QComboBox()
        self.width_combo.addItem("all", 0)
        self.width_combo.currentIndexChanged.connect(self.search_changed)
        row.addWidget(self.width_combo)
        self.atlas_summary = QLabel("")
        self.atlas_summary.setWordWrap(True)
        self.atlas_table = _table(["filter", "width", "responds to", "best window",
                                   "strongest n-grams over the vocabulary"])
        lay = QVBoxLayout(w)
        lay.addLayout(row)
        lay.addWidget(self.atlas_summary)
        lay.addWidget(self.atlas_table, 1)
        return w

    def _sweep_tab(self) -> QWidget:
        w = QWidget()
        row = QHBoxLayout()
        row.addWidget(QLabel("Sentence:"))
        self.sentence_edit = QLineEdit()
        self.sentence_edit.returnPressed.connect(self.sweep_requested)
        row.addWidget(self.sentence_edit, 1)
        row.addWidget(QLabel("word"))
        self.word_edit = QLineEdit()
        self.word_edit.setMaximumWidth(160)
        self.word_edit.returnPressed.connect(self.sweep_requested)
        row.addWidget(self.word_edit)
        self.sweep_button = QPushButton("Sweep")
        self.sweep_button.clicked.connect(self.sweep_requested)
        row.addWidget(self.sweep_button)
        self.sweep_summary = QLabel("")
        self.sweep_summary.setWordWrap(True)
        self.mean_table = _table([])
        self.variant_table = _table([])
        for t in (self.mean_table, self.variant_table):      # numbers: no stretched column
            t.horizontalHeader().setStretchLastSection(False)
            t.verticalHeader().setDefaultSectionSize(22)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.mean_table)
        split.addWidget(self.variant_table)
        split.setSizes([330, 200])
        lay = QVBoxLayout(w)
        lay.addLayout(row)
        lay.addWidget(self.sweep_summary)
        lay.addWidget(split, 1)
        return w

    def _nonce_tab(self) -> QWidget:
        w = QWidget()
        row = QHBoxLayout()
        row.addWidget(QLabel("Sentence:"))
        self.nonce_sentence_edit = QLineEdit()
        self.nonce_sentence_edit.returnPressed.connect(self.nonce_requested)
        row.addWidget(self.nonce_sentence_edit, 1)
        row.addWidget(QLabel("word"))
        self.nonce_word_edit = QLineEdit()
        self.nonce_word_edit.setMaximumWidth(160)
        self.nonce_word_edit.returnPressed.connect(self.nonce_requested)
        row.addWidget(self.nonce_word_edit)
        self.nonce_button = QPushButton("Ask")
        self.nonce_button.setToolTip("the word's layer-0 neighbours and the two language "
                                     "models' predictions at its place")
        self.nonce_button.clicked.connect(self.nonce_requested)
        row.addWidget(self.nonce_button)
        row2 = QHBoxLayout()
        row2.addWidget(QLabel("Nearest occurrences in:"))
        self.index_combo = QComboBox()
        for source, label in INDEX_LABELS.items():
            self.index_combo.addItem(label, source.value)
        self.index_combo.setToolTip("a corpus index built with this model (the Corpus view "
                                    "builds one): the word's nearest occurrences per layer")
        self.index_combo.activated.connect(
            lambda i: self.index_chosen.emit(str(self.index_combo.itemData(i))))
        row2.addWidget(self.index_combo)
        self.index_info = QLabel("")
        self.index_info.setStyleSheet("color: #555;")
        row2.addWidget(self.index_info, 1)
        self.nonce_text = QTextBrowser()
        lay = QVBoxLayout(w)
        lay.addLayout(row)
        lay.addLayout(row2)
        lay.addWidget(self.nonce_text, 1)
        return w

    # ---- state ------------------------------------------------------------------------------
    def apply(self, m: CharactersModel) -> None:
        """Put the model's parameters into the fields (no signals)."""
        for widget, text in ((self.words_edit, m.words_text), (self.sentence_edit, m.sentence),
                             (self.word_edit, m.word), (self.search_edit, m.search),
                             (self.nonce_sentence_edit, m.nonce_sentence),
                             (self.nonce_word_edit, m.nonce_word)):
            widget.blockSignals(True)
            widget.setText(text)
            widget.blockSignals(False)
        self.filters_box.setValue(m.filters_shown)
        self.show_choices(m)

    def show_choices(self, m: CharactersModel) -> None:
        """The vocabulary and index choices in their combos (a chosen file or folder by name,
        its path in the tooltip)."""
        for combo, value, item, label, path in (
                (self.vocab_combo, m.vocab_source.value, VocabSource.FILE.value,
                 m.vocabulary_label() if m.vocab_file else VOCAB_LABELS[VocabSource.FILE],
                 m.vocab_file),
                (self.index_combo, m.index_source.value, IndexSource.FOLDER.value,
                 m.index_label() if m.index_folder else INDEX_LABELS[IndexSource.FOLDER],
                 m.index_folder)):
            combo.blockSignals(True)
            k = combo.findData(item)
            combo.setItemText(k, label)
            combo.setItemData(k, path or None, Qt.ItemDataRole.ToolTipRole)
            combo.setCurrentIndex(max(0, combo.findData(value)))
            combo.blockSignals(False)

    def set_model_vocabulary(self, path: Optional[str]) -> None:
        """Whether the loaded checkpoint has a vocab.txt beside it (its item is enabled)."""
        k = self.vocab_combo.findData(VocabSource.MODEL.value)
        item = self.vocab_combo.model().item(k)          # a QStandardItemModel's row
        item.setEnabled(path is not None)
        item.setToolTip(path or "this checkpoint has no vocab.txt beside it")

    def read(self, m: CharactersModel) -> None:
        """The fields into the model."""
        m.words_text = self.words_edit.text()
        m.filters_shown = self.filters_box.value()
        m.sentence = self.sentence_edit.text()
        m.word = self.word_edit.text().strip()
        m.search = self.search_edit.text()
        m.width = int(self.width_combo.currentData() or 0)
        m.nonce_sentence = self.nonce_sentence_edit.text()
        m.nonce_word = self.nonce_word_edit.text().strip()

    def set_busy(self, busy: bool) -> None:
        self.cancel_button.setEnabled(busy)

    def main_button(self):
        """The shown tab's action (View ▸ Run, Ctrl+R): Analyse, Sweep or Ask (the atlas is
        searched as it is typed)."""
        return {0: self.analyse_button, 2: self.sweep_button,
                3: self.nonce_button}.get(self.tabs.currentIndex())

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #b00020;" if error else "")

    # ---- drawing ----------------------------------------------------------------------------
    def draw_lab(self, m: CharactersModel) -> None:
        if not m.lab:
            self.lab_text.setHtml("<p>Type words above and press <b>Analyse</b>.</p>")
            return
        parts = [f"<p style='color:#555'>⟨ ⟩ mark the word's start and end (the ids the model "
                 f"reads); filters ranked by their max-pool value, each with the n-gram that wins "
                 f"it; neighbours: cosine at layer 0 among {m.vocabulary_size:,} known words "
                 f"({html.escape(m.vocabulary)}).</p>"]
        for d in m.lab:
            esc = html.escape
            kept = d.get("kept_bytes")        # (a lab kept in a workspace before it was said)
            cut = "" if not d["truncated"] else \
                " — <b>cut</b>" + ("" if kept is None else f" to the first {kept} bytes")
            pct = d["norm_percentile"]
            norm = f"norm {d['norm']:.2f}" + ("" if pct is None else f" (percentile {pct:.0f})")
            hw = "; ".join([f"highway {h['layer']}: {100 * h['transform_share']:.0f}% "
                            f"transformed, {100 * h['carry_share']:.0f}% carried"
                            for h in d["highway"]] + [norm])     # no highway: the norm alone
            rows = "".join(
                f"<tr><td align=right>{h['filter']}</td><td align=center>{h['width']}</td>"
                f"<td align=right>{h['value']:.3f}</td><td><tt>{esc(h['ngram'])}</tt></td></tr>"
                for h in d["top_filters"][:m.filters_shown])
            near = ", ".join(f"{esc(n['word'])} {n['cosine']:.2f}" for n in d["neighbours"])
            parts.append(
                f"<h3 style='margin-bottom:2px'>{esc(d['word'])} "
                f"<tt style='font-weight:normal'>{esc(d['characters'])}</tt></h3>"
                f"<p style='margin-top:0'>{d['utf8_bytes']} UTF-8 bytes{cut}; ids "
                f"<tt>{' '.join(str(i) for i in d['char_ids'])}</tt><br>{hw}<br>"
                f"<b>nearest at layer 0:</b> {near or '—'}</p>"
                f"<table cellspacing=0 cellpadding=2 border=1 style='border-color:#ccc'>"
                f"<tr><th>filter</th><th>width</th><th>max-pool</th><th>winning n-gram</th></tr>"
                f"{rows}</table>")
        self.lab_text.setHtml("".join(parts))

    def draw_atlas(self, m: CharactersModel) -> None:
        widths = m.widths()
        have = [self.width_combo.itemData(i) for i in range(1, self.width_combo.count())]
        if have != widths:
            self.width_combo.blockSignals(True)
            self.width_combo.clear()
            self.width_combo.addItem("all", 0)
            for w in widths:
                self.width_combo.addItem(str(w), w)
            idx = self.width_combo.findData(m.width)
            self.width_combo.setCurrentIndex(max(0, idx))
            self.width_combo.blockSignals(False)
        counts = m.category_counts()
        if m.atlas:
            total: dict = {}
            for d in counts.values():
                for c, n in d.items():
                    total[c] = total.get(c, 0) + n
            cats = ", ".join(f"{c} {n}" for c, n in sorted(total.items(), key=lambda x: -x[1]))
            self.atlas_summary.setText(f"{len(m.atlas)} filters over {m.atlas_words:,} words "
                                       f"(the reference corpus's word types). By what they "
                                       f"respond to: {cats}.")
        else:
            self.atlas_summary.setText("The atlas is built when a model is loaded.")
        rows = m.atlas_rows()
        t = self.atlas_table
        t.setRowCount(len(rows))
        for r, e in enumerate(rows):
            grams = format_ngrams(e["ngrams"], 8)
            window = e.get("window", "")
            rel = e.get("relative")
            t.setItem(r, 0, _item(str(e["filter"])))
            t.setItem(r, 1, _item(str(e["width"])))
            t.setItem(r, 2, _item(e["category"]))
            t.setItem(r, 3, _item(f"{window} ({rel:.2f})" if rel is not None else "",
                                  "the best window holding the search, its value over the "
                                  "filter's best", mono=True))
            t.setItem(r, 4, _item(grams, "\n".join(f"{g['ngram']}  {g['value']:.3f}  (e.g. "
                                                   f"{g['example']})" for g in e["ngrams"]),
                                  mono=True))
        t.setColumnHidden(3, not m.search.strip())
        t.resizeColumnsToContents()
        t.setColumnWidth(4, max(t.columnWidth(4), 200))

    def draw_sweep(self, m: CharactersModel) -> None:
        rows, cols, values = m.sweep_table()
        t = self.mean_table
        t.clear()
        t.setColumnCount(len(cols) + 1)
        t.setHorizontalHeaderLabels(["mean per type"] + cols)
        t.setRowCount(len(rows))
        for r, (name, vals) in enumerate(zip(rows, values)):
            t.setItem(r, 0, _item(name))
            for c, v in enumerate(vals):
                it = _item(f"{v:.3f}")
                it.setBackground(cosine_colour(v))
                it.setForeground(QColor("#000000"))
                it.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                t.setItem(r, c + 1, it)
        t.resizeColumnsToContents()
        if not m.sweep:
            self.sweep_summary.setText("Type a sentence and a word in it, then Sweep.")
            self.variant_table.setRowCount(0)
            return
        fixed = m.repaired()
        self.sweep_summary.setText(
            f"'{m.sweep['word']}' perturbed in “{m.sweep['sentences'][0]}”: cosine of each "
            f"variant's vector to the original's, per layer and direction. "
            + (f"The top layer stays closer than layer 0 for: {', '.join(fixed)} (context "
               f"repairs them)." if fixed else "No type is repaired by the context here."))
        v = self.variant_table
        v.clear()
        v.setColumnCount(len(cols) + 2)
        v.setHorizontalHeaderLabels(["type", "variant"] + cols)
        var = m.sweep["variants"]
        v.setRowCount(len(var))
        n = len(m.sweep["layers"])
        for r, d in enumerate(var):
            v.setItem(r, 0, _item(d["type"]))
            v.setItem(r, 1, _item(d["text"], d["text"], mono=True))
            c = d["cosine"]
            vals = [c[0][0]] + [c[i][j] for i in range(1, n) for j in (1, 2)]
            for k, x in enumerate(vals):
                it = _item(f"{x:.3f}")
                it.setBackground(cosine_colour(x))
                it.setForeground(QColor("#000000"))
                v.setItem(r, k + 2, it)
        v.resizeColumnsToContents()
        header = v.horizontalHeader()
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Interactive)

    def draw_nonce(self, m: CharactersModel) -> None:
        esc = html.escape
        occurrences = self._occurrences_html(m)
        if m.nonce_problem:
            self.nonce_text.setHtml(f"<p>{esc(m.nonce_problem)}</p>{occurrences}")
            return
        if not m.nonce:
            self.nonce_text.setHtml("<p>Type a sentence with a word (made up or not) and press "
                                    "<b>Ask</b>.</p>")
            return
        d = m.nonce
        where = ("outside the softmax's vocabulary" if not d["in_vocabulary"] else
                 f"rank {d['forward_rank']} forward, {d['backward_rank']} backward")
        cols = m.nonce_columns()
        n = max((len(c) for _, c in cols), default=0)
        head = "".join(f"<th align=left>{esc(t)}</th>" for t, _ in cols)
        body = ""
        for i in range(n):
            cells = "".join(
                f"<td>{esc(c[i][0])} <span style='color:#666'>{c[i][1]:.3f}</span></td>"
                if i < len(c) else "<td></td>" for _, c in cols)
            body += f"<tr>{cells}</tr>"
        self.nonce_text.setHtml(
            f"<p><b>{esc(d['word'])}</b> in “{esc(d['sentence'])}” ({where}). Layer 0 reads "
            f"only the spelling; the two language models read the sentence up to the word from "
            f"either side and say what fits its place — the meaning the biLSTM layers give "
            f"it.</p><table cellspacing=0 cellpadding=3 border=1 style='border-color:#ccc'>"
            f"<tr>{head}</tr>{body}</table>{occurrences}")

    def _occurrences_html(self, m: CharactersModel) -> str:
        """The nonce word's nearest occurrences per layer: keyword-in-context lines, the
        occurrence centred and bold, the cosine first (empty without an index)."""
        if not m.nonce_hits:
            return ""
        esc = html.escape
        parts = [f"<p style='margin-top:10px'><b>Nearest occurrences</b> of "
                 f"<b>{esc(m.nonce_word)}</b>'s vector in {esc(Path(m.nonce_index).name)}, per "
                 f"layer (any word; layer 0 is the spelling alone, the biLSTM layers add the "
                 f"sentence):</p>"]
        for layer, lines in m.nonce_kwic():
            rows = []
            for cos, left, word, right in lines:
                rows.append(f"<span style='color:#666'>{cos:6.3f}</span>  {esc(left)} "
                            f"<b>[{esc(word)}]</b> {esc(right)}")
            parts.append(f"<p style='margin-bottom:0'>layer {layer}</p>"
                         f"<pre style='margin-top:2px'>{'<br>'.join(rows) or '—'}</pre>")
        return "".join(parts)
