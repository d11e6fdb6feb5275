"""The Get-a-published-model dialog's widgets: they show what they are given and emit nothing
of their own (the controller connects the buttons)."""
from __future__ import annotations

from typing import Optional, Sequence

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (QAbstractItemView, QCheckBox, QDialog, QHBoxLayout, QHeaderView,
                               QLabel, QProgressBar, QPushButton, QTableWidget, QTableWidgetItem,
                               QVBoxLayout, QWidget)

from elmo_explorer.common.elided_label import ElidedLabel
from elmo_explorer.shell.models_dialog.model import COLUMNS, Actions, Row

ERROR_STYLE = "color: #b00020;"


class GetModelView(QDialog):
    """Table of the catalogue, the storage line, the softmax box, progress, status and buttons."""

    def __init__(self, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setWindowTitle("Get a published model")
        self.setObjectName("getModelDialog")
        self.setSizeGripEnabled(True)
        lay = QVBoxLayout(self)

        intro = QLabel("The English biLMs AllenNLP publishes for <i>Deep contextualized word "
                       "representations</i> (Peters et al., 2018). Sizes marked ~ are "
                       "approximate; memory is the weights in float32 (the softmax in "
                       "float16).", self)
        intro.setWordWrap(True)
        lay.addWidget(intro)

        self.table = QTableWidget(0, len(COLUMNS), self)
        self.table.setObjectName("catalogue")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setWordWrap(False)
        self.table.verticalHeader().hide()
        head = self.table.horizontalHeader()
        head.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        head.setSectionResizeMode(COLUMNS.index("Trained on"), QHeaderView.ResizeMode.Stretch)
        self.table.setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        lay.addWidget(self.table, 1)

        self.storage = ElidedLabel(self)       # a deep data folder never widens the dialog
        self.storage.setObjectName("storage")
        self.storage.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.storage)

        self.softmax = QCheckBox("With softmax (for perplexity and predictions; large)", self)
        self.softmax.setObjectName("withSoftmax")
        lay.addWidget(self.softmax)

        self.progress = QProgressBar(self)
        self.progress.setObjectName("progress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.progress.hide()
        lay.addWidget(self.progress)

        self.status = QLabel(self)
        self.status.setObjectName("statusLine")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        lay.addWidget(self.status)

        buttons = QHBoxLayout()
        self.get_button = QPushButton("&Get", self)
        self.open_button = QPushButton("&Open", self)
        self.verify_button = QPushButton("&Verify", self)
        self.remove_button = QPushButton("&Remove…", self)
        self.cancel_button = QPushButton("&Cancel download", self)
        self.close_button = QPushButton("Close", self)
        for b in (self.get_button, self.open_button, self.verify_button, self.remove_button,
                  self.cancel_button, self.close_button):
            b.setAutoDefault(False)
        for b in (self.get_button, self.open_button, self.verify_button, self.remove_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.close_button)
        lay.addLayout(buttons)

    # ---- drawing -----------------------------------------------------------------------------
    def show_rows(self, rows: Sequence[Row], selected: Optional[str]) -> None:
        self.table.blockSignals(True)
        self.table.setRowCount(len(rows))
        for i, row in enumerate(rows):
            for j, text in enumerate(row.cells):
                item = QTableWidgetItem(text)
                item.setToolTip(row.tooltip)
                item.setData(Qt.ItemDataRole.UserRole, row.name)
                if j == COLUMNS.index("Parameters"):
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight
                                          | Qt.AlignmentFlag.AlignVCenter)
                if row.damaged and j == COLUMNS.index("On disk"):
                    item.setForeground(Qt.GlobalColor.darkRed)
                self.table.setItem(i, j, item)
            if row.name == selected:
                self.table.selectRow(i)
        self.table.blockSignals(False)

    def selected_name(self) -> Optional[str]:
        items = self.table.selectedItems()
        return None if not items else items[0].data(Qt.ItemDataRole.UserRole)

    def show_actions(self, a: Actions) -> None:
        self.get_button.setEnabled(a.get)
        self.get_button.setText("&" + a.get_label)
        self.softmax.setEnabled(a.softmax_box)
        self.open_button.setEnabled(a.open)
        self.verify_button.setEnabled(a.verify)
        self.remove_button.setEnabled(a.remove)
        self.cancel_button.setEnabled(a.cancel)
        self.cancel_button.setVisible(a.cancel)
        self.get_button.setDefault(a.default == "get" and a.get)
        self.open_button.setDefault(a.default == "open" and a.open)

    def show_progress(self, fraction: Optional[float], text: str) -> None:
        self.progress.show()
        if fraction is None:
            self.progress.setRange(0, 0)            # busy
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(round(1000 * fraction)))
        self.show_status(text)

    def hide_progress(self) -> None:
        self.progress.hide()

    def show_status(self, text: str, error: bool = False) -> None:
        self.status.setStyleSheet(ERROR_STYLE if error else "")
        self.status.setText(text)

    def is_error_shown(self) -> bool:
        return self.status.styleSheet() == ERROR_STYLE
