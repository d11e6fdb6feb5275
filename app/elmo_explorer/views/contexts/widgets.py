"""Widgets of the contexts panel: the occurrence list, the mix weights, the neighbour table.

They only render what the panel gives them and report what the user did (signals); no
computation happens here.
"""
from __future__ import annotations

import html
from typing import Dict, List, Optional, Sequence, Tuple

from PySide6.QtCore import QSize, Qt, Signal
from PySide6.QtGui import QAbstractTextDocumentLayout, QPalette, QTextDocument
from PySide6.QtWidgets import (QAbstractItemView, QDoubleSpinBox, QHBoxLayout, QHeaderView,
                               QLabel, QStyle, QStyledItemDelegate, QStyleOptionViewItem,
                               QTableWidget, QTableWidgetItem, QTextBrowser, QVBoxLayout,
                               QWidget)

from elmo_engine.analysis.contexts.neighbours import highlight_html

Occ = Tuple[int, int]


def vbox(*items, stretch: int) -> QWidget:
    """A margin-less column of widgets/layouts; item ``stretch`` takes the spare room."""
    box = QWidget()
    lay = QVBoxLayout(box)
    lay.setContentsMargins(0, 0, 0, 0)
    for i, item in enumerate(items):
        if isinstance(item, QWidget):
            lay.addWidget(item, 1 if i == stretch else 0)
        else:
            lay.addLayout(item)
    return box


class HtmlDelegate(QStyledItemDelegate):
    """Draw a cell's text as rich text (for a bold token inside its sentence)."""

    def _doc(self, option: QStyleOptionViewItem) -> QTextDocument:
        doc = QTextDocument()
        doc.setDocumentMargin(2)
        doc.setDefaultFont(option.font)
        doc.setHtml(option.text)
        return doc

    def paint(self, painter, option, index) -> None:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        doc = self._doc(opt)
        opt.text = ""
        style = opt.widget.style() if opt.widget is not None else None
        if style is not None:
            style.drawControl(QStyle.ControlElement.CE_ItemViewItem, opt, painter, opt.widget)
        ctx = QAbstractTextDocumentLayout.PaintContext()
        role = (QPalette.ColorRole.HighlightedText if opt.state & QStyle.StateFlag.State_Selected
                else QPalette.ColorRole.Text)
        ctx.palette.setColor(QPalette.ColorRole.Text, opt.palette.color(role))
        painter.save()
        painter.translate(opt.rect.topLeft())
        clip = opt.rect.translated(-opt.rect.topLeft())
        painter.setClipRect(clip)
        ctx.clip = clip.toRectF() if hasattr(clip, "toRectF") else clip
        doc.documentLayout().draw(painter, ctx)
        painter.restore()

    def sizeHint(self, option, index) -> QSize:
        opt = QStyleOptionViewItem(option)
        self.initStyleOption(opt, index)
        doc = self._doc(opt)
        return QSize(int(doc.idealWidth()), int(doc.size().height()))


class OccurrenceTable(QTableWidget):
    """The occurrences of the word: number, editable group, sentence with the word in bold.

    Signals
    -------
    groups_edited() : the user changed a group label
    occurrence_clicked(int, int) : sentence, token of the row the user selected
    """

    groups_edited = Signal()
    occurrence_clicked = Signal(int, int)

    COL_NUM, COL_GROUP, COL_TEXT = range(3)

    def __init__(self, parent=None):
        super().__init__(0, 3, parent)
        self.setHorizontalHeaderLabels(["#", "group", "sentence"])
        self.verticalHeader().setVisible(False)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked
                             | QAbstractItemView.EditTrigger.EditKeyPressed
                             | QAbstractItemView.EditTrigger.AnyKeyPressed)
        self.setItemDelegateForColumn(self.COL_TEXT, HtmlDelegate(self))
        head = self.horizontalHeader()
        head.setSectionResizeMode(self.COL_NUM, QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(self.COL_GROUP, QHeaderView.ResizeMode.Interactive)
        head.setStretchLastSection(True)
        self.setColumnWidth(self.COL_GROUP, 70)
        self.setWordWrap(False)
        self.occurrences: List[Occ] = []
        self._filling = False
        self.itemChanged.connect(self._on_item_changed)
        self.itemSelectionChanged.connect(self._on_selection)

    def set_occurrences(self, occurrences: Sequence[Occ], tokens: Sequence[Sequence[str]],
                        groups: Dict[Occ, str]) -> None:
        self._filling = True
        try:
            self.occurrences = [tuple(o) for o in occurrences]
            self.setRowCount(len(self.occurrences))
            for r, (s, t) in enumerate(self.occurrences):
                num = QTableWidgetItem(str(r + 1))
                num.setFlags(num.flags() & ~Qt.ItemFlag.ItemIsEditable)
                num.setToolTip(f"sentence {s + 1}, token {t + 1}")
                grp = QTableWidgetItem(groups.get((s, t), ""))
                grp.setToolTip("type a group (e.g. a sense) to compare within vs between groups")
                text = QTableWidgetItem(highlight_html(tokens[s], t))
                text.setFlags(text.flags() & ~Qt.ItemFlag.ItemIsEditable)
                text.setToolTip(" ".join(tokens[s]))
                self.setItem(r, self.COL_NUM, num)
                self.setItem(r, self.COL_GROUP, grp)
                self.setItem(r, self.COL_TEXT, text)
            self.resizeRowsToContents()
        finally:
            self._filling = False

    def groups(self) -> Dict[Occ, str]:
        out = {}
        for r, occ in enumerate(self.occurrences):
            item = self.item(r, self.COL_GROUP)
            label = item.text().strip() if item is not None else ""
            if label:
                out[occ] = label
        return out

    def set_group(self, row: int, label: str) -> None:
        """Set a group label as if the user had typed it."""
        self.item(row, self.COL_GROUP).setText(label)

    def select_occurrence(self, occ: Optional[Occ]) -> None:
        rows = [r for r, o in enumerate(self.occurrences) if o == occ]
        self.blockSignals(True)
        try:
            if rows:
                self.selectRow(rows[0])
            else:
                self.clearSelection()
        finally:
            self.blockSignals(False)

    def _on_item_changed(self, item: QTableWidgetItem) -> None:
        if not self._filling and item.column() == self.COL_GROUP:
            self.groups_edited.emit()

    def _on_selection(self) -> None:
        rows = sorted({i.row() for i in self.selectedIndexes()})
        if rows and rows[0] < len(self.occurrences):
            self.occurrence_clicked.emit(*self.occurrences[rows[0]])

    def selected_rows(self) -> List[int]:
        return sorted({i.row() for i in self.selectedIndexes()})


class MixWeights(QWidget):
    """One spin box per layer holding the weights the mix uses: they always sum to 1 (changing
    one rescales the others); ``changed`` fires with the weights."""

    changed = Signal(object)

    def __init__(self, parent=None):
        super().__init__(parent)
        self._lay = QHBoxLayout(self)
        self._lay.setContentsMargins(0, 0, 0, 0)
        self._lay.addWidget(QLabel("mix weights:"))
        self.boxes: List[QDoubleSpinBox] = []

    def set_layers(self, n_layers: int) -> None:
        if n_layers == len(self.boxes):
            return
        for box in self.boxes:
            self._lay.removeWidget(box)
            box.deleteLater()
        self.boxes = []
        for k in range(n_layers):
            box = QDoubleSpinBox()
            box.setRange(0.0, 1.0)
            box.setSingleStep(0.05)
            box.setDecimals(2)
            box.setValue(round(1.0 / n_layers, 2))
            box.setPrefix(f"L{k}: ")
            box.setToolTip(f"weight of layer {k} in the mix; the weights sum to 1 (changing one "
                           "rescales the others)")
            box.valueChanged.connect(lambda v, k=k: self._edited(k, v))
            self._lay.addWidget(box)
            self.boxes.append(box)

    def weights(self) -> List[float]:
        return [b.value() for b in self.boxes]

    def _edited(self, k: int, value: float) -> None:
        others = [i for i in range(len(self.boxes)) if i != k]
        rest = max(0.0, 1.0 - value)
        total = sum(self.boxes[i].value() for i in others)
        new = [self.boxes[i].value() * rest / total if total > 0 else rest / max(len(others), 1)
               for i in others]
        for i, w in zip(others, new):
            self.boxes[i].blockSignals(True)
            self.boxes[i].setValue(w)
            self.boxes[i].blockSignals(False)
        self.changed.emit(self.weights())

    def set_weights(self, weights: Sequence[float]) -> None:
        """Show ``weights`` normalised to sum 1 (all zero: equal weights)."""
        w = [max(0.0, float(x)) for x in weights]
        total = sum(w)
        w = [x / total for x in w] if total > 0 else [1.0 / max(len(w), 1)] * len(w)
        for box, x in zip(self.boxes, w):
            box.blockSignals(True)
            box.setValue(x)
            box.blockSignals(False)
        self.changed.emit(self.weights())


def neighbours_html(title: str, words: Sequence[Tuple[str, float]],
                    layers: Sequence[Tuple[str, Sequence[Tuple[float, Sequence[str], int]]]],
                    note: str = "") -> str:
    """The neighbour table as HTML: layer 0 as nearest known words, each contextual layer as
    ranked neighbours in their sentences (the token in bold)."""
    parts = [f"<p><b>{html.escape(title)}</b></p>"]
    if note:
        parts.append(f"<p><i>{html.escape(note)}</i></p>")
    if words:
        items = ", ".join(f"{html.escape(w)} <span style='color:#666'>({s:.3f})</span>"
                          for w, s in words)
        parts.append(f"<p><b>layer 0</b> (character CNN, nearest known words): {items}</p>")
    for name, rows in layers:
        parts.append(f"<p><b>{html.escape(name)}</b></p><table cellspacing='0' cellpadding='2'>")
        for rank, (score, toks, t) in enumerate(rows, start=1):
            parts.append(f"<tr><td align='right'>{rank}.</td><td>{score:.3f}</td>"
                         f"<td>{highlight_html(toks, t)}</td></tr>")
        parts.append("</table>")
    return "".join(parts)


class NeighboursView(QTextBrowser):
    """Read-only rich-text view of the nearest-neighbour table."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setOpenLinks(False)
        self.setPlaceholderText("Select an occurrence to see its nearest neighbours.")
