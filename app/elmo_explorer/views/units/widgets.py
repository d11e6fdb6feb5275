"""Small table helpers shared by the Units view's tabs."""
from __future__ import annotations

from typing import List

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem


def fill(table: QTableWidget, rows: List[List[str]]) -> None:
    """Put ``rows`` of text into ``table`` (read-only cells), columns sized to their contents."""
    table.setRowCount(len(rows))
    for r, cells in enumerate(rows):
        for c, text in enumerate(cells):
            item = QTableWidgetItem(text)
            item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
            table.setItem(r, c, item)
    table.resizeColumnsToContents()


def table(columns: List[str]) -> QTableWidget:
    """A read-only table with ``columns``, no row numbers, rows one line high."""
    t = QTableWidget(0, len(columns))
    t.setHorizontalHeaderLabels(columns)
    t.verticalHeader().setVisible(False)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 6)
    t.horizontalHeader().setStretchLastSection(True)
    return t


def align(t: QTableWidget, column: int, flag: Qt.AlignmentFlag) -> None:
    """Align every cell of ``column``."""
    for r in range(t.rowCount()):
        item = t.item(r, column)
        if item is not None:
            item.setTextAlignment(flag | Qt.AlignmentFlag.AlignVCenter)
