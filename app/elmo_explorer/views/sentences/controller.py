"""The sentence editor and the token table.

One sentence per line; blank lines are skipped. A short pause in typing (400 ms) sends the lines to
the workspace, which tokenizes and embeds only lines it has not seen (on the worker). The token
table shows the sentence under the cursor (or the selected token's sentence): each token, the
number of character ids the model uses for it, and the norm of its vector at every layer.
Clicking a token selects it for every view.
"""
from __future__ import annotations

from typing import List, Optional

import numpy as np
from PySide6.QtCore import QModelIndex, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QFont, QFontDatabase, QPalette, QTextCursor, QTextFormat
from PySide6.QtWidgets import (QAbstractItemView, QHeaderView, QLabel, QPlainTextEdit, QSplitter,
                               QTableView, QTextEdit, QVBoxLayout, QWidget)

from elmo_explorer.views.sentences.table import TokenTableModel, write_token_table_csv
from elmo_explorer.state.workspace import TokenRef, Workspace

EDIT_PAUSE_MS = 400
FILL_CHARS = 50_000          # characters put into the editor per event-loop turn


class SentencesPanel(QWidget):
    """Editor (one sentence per line) above the token table of the current sentence."""

    title = "Sentences"
    ready = Signal()
    current_sentence_changed = Signal(int)

    def __init__(self, workspace: Workspace, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.workspace = workspace
        self._line_of: List[int] = []            # sentence index → editor block number
        self._current = -1                       # sentence shown in the table
        self._norm_cache: dict = {}
        self._syncing = False
        self._committing = False
        self._ready_sent = False
        self._fill_lines: Optional[List[str]] = None
        self._fill_pos = 0
        self._fill_commit = False

        self.editor = QPlainTextEdit(self)
        self.editor.setObjectName("sentenceEditor")
        self.editor.setPlaceholderText("Type sentences here, one per line…")
        self.editor.setLineWrapMode(QPlainTextEdit.LineWrapMode.WidgetWidth)
        self.editor.setTabChangesFocus(True)
        self.header = QLabel(self)
        self.header.setObjectName("tokenTableHeader")
        self.header.setWordWrap(True)
        self.model = TokenTableModel(self)
        self.table = QTableView(self)
        self.table.setObjectName("tokenTable")
        self.table.setModel(self.model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setAlternatingRowColors(True)
        self.table.verticalHeader().setDefaultSectionSize(22)
        # no ResizeToContents: it asks the model about every row (seconds for a 5,000-token line)
        self.table.verticalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Fixed)
        self.table.setMinimumWidth(280)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.model.modelReset.connect(self._size_columns)
        fixed = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        fixed.setStyleHint(QFont.StyleHint.Monospace)
        self.table.setFont(fixed)

        lower = QWidget(self)
        lower_layout = QVBoxLayout(lower)
        lower_layout.setContentsMargins(0, 0, 0, 0)
        lower_layout.addWidget(self.header)
        lower_layout.addWidget(self.table)
        split = QSplitter(Qt.Orientation.Vertical, self)
        split.addWidget(self.editor)
        split.addWidget(lower)
        split.setStretchFactor(0, 2)
        split.setStretchFactor(1, 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(split)

        self._timer = QTimer(self)
        self._timer.setSingleShot(True)
        self._timer.setInterval(EDIT_PAUSE_MS)
        self._timer.timeout.connect(self.commit)
        self._fill_timer = QTimer(self)
        self._fill_timer.setInterval(0)
        self._fill_timer.timeout.connect(self._fill_step)
        self.editor.textChanged.connect(self._on_text_changed)
        self.editor.cursorPositionChanged.connect(self._on_cursor)
        self.table.clicked.connect(self._on_table_clicked)
        self.table.selectionModel().currentRowChanged.connect(self._on_row_changed)

        self.export_csv_action = QAction("Token table (CSV)…", self)
        self.export_csv_action.triggered.connect(self._export_csv)

        ws = workspace
        ws.sentences_changed.connect(self._on_sentences_changed)
        ws.tokens_changed.connect(self._refresh)
        ws.activations_changed.connect(self._on_activations)
        ws.model_changed.connect(self._on_model_changed)
        ws.selection_changed.connect(self._on_selection)
        self._refresh()

    def _size_columns(self) -> None:
        """Token column as wide as its longest token (60–200 px), the numbers just wide enough."""
        header = self.table.horizontalHeader()
        if header.count() == 0:
            return
        fm = self.table.fontMetrics()
        longest = max((fm.horizontalAdvance(t) for t in self.model.tokens()[:2000]), default=0)
        widths = [min(200, max(60, longest + 16)), fm.horizontalAdvance("Char ids") + 14]
        widths += [fm.horizontalAdvance("000.000") + 12] * (header.count() - 2)
        for col, width in enumerate(widths):
            header.setSectionResizeMode(col, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(col, width)

    def sizeHint(self) -> QSize:
        return QSize(420, 640)

    # ---- contract ---------------------------------------------------------------------------
    def is_ready(self) -> bool:
        return (self.workspace.all_embedded() and self._fill_lines is None
                and not self._timer.isActive())

    def export_actions(self) -> List[QAction]:
        return [self.export_csv_action]

    # ---- editor → workspace ---------------------------------------------------------------
    def set_text(self, text: str) -> None:
        """Replace the editor text and send its sentences at once (no typing pause)."""
        self._fill(text.split("\n"), commit=True)

    def show_sentences(self, sentences: List[str]) -> None:
        """Send ``sentences`` to the workspace now; the editor then shows them (in pieces)."""
        self._timer.stop()
        self.workspace.set_sentences(sentences)

    def is_filling(self) -> bool:
        """True while a big text is still being put into the editor."""
        return self._fill_lines is not None

    def _fill(self, lines: List[str], commit: bool) -> None:
        """Put ``lines`` into the editor; big texts go in pieces so the window stays live."""
        self._timer.stop()
        self._fill_timer.stop()
        self._fill_lines, self._fill_pos, self._fill_commit = lines, 0, commit
        self._syncing = True
        try:
            self.editor.setPlainText(self._next_piece())
        finally:
            self._syncing = False
        if self._fill_pos < len(lines):
            self.editor.setReadOnly(True)
            self._fill_timer.start()
        else:
            self._fill_done()

    def _next_piece(self) -> str:
        lines, start = self._fill_lines, self._fill_pos
        end, size = start, 0
        while end < len(lines) and (end == start or size + len(lines[end]) <= FILL_CHARS):
            size += len(lines[end]) + 1
            end += 1
        self._fill_pos = end
        return "\n".join(lines[start:end])

    def _fill_step(self) -> None:
        if self._fill_lines is None:
            self._fill_timer.stop()
            return
        self._syncing = True
        try:
            self.editor.appendPlainText(self._next_piece())
        finally:
            self._syncing = False
        n = len(self._fill_lines)
        self.header.setText(f"Loading the text into the editor: {self._fill_pos:,}/{n:,} lines…")
        if self._fill_pos >= n:
            self._fill_timer.stop()
            self._fill_done()

    def _fill_done(self) -> None:
        commit = self._fill_commit
        self._fill_lines = None
        self.editor.setReadOnly(False)
        if commit:
            self.commit()
        else:
            self._refresh()

    def text(self) -> str:
        return self.editor.toPlainText()

    def _on_text_changed(self) -> None:
        if not self._syncing and self._fill_lines is None:
            self._timer.start()

    def commit(self) -> None:
        """Send the editor's non-blank lines to the workspace (now)."""
        self._timer.stop()
        if self._fill_lines is not None:
            return                               # still loading: committed when complete
        lines = self.editor.toPlainText().split("\n")
        self._line_of = [i for i, line in enumerate(lines) if line.strip()]
        sentences = [lines[i] for i in self._line_of]
        if sentences != self.workspace.sentences:
            self._committing = True
            try:
                self.workspace.set_sentences(sentences)
            finally:
                self._committing = False
        else:
            self._on_cursor()

    def pending_edit(self) -> bool:
        """True while an edit waits for the typing pause."""
        return self._timer.isActive()

    # ---- workspace → widgets ---------------------------------------------------------------
    def _on_sentences_changed(self) -> None:
        self._ready_sent = False
        self._norm_cache.clear()
        if not self._committing:
            # set from elsewhere (File → Open sentences, a saved workspace): show it
            self._line_of = list(range(len(self.workspace.sentences)))
            self._fill(list(self.workspace.sentences), commit=False)
        self._current = -1
        self._on_cursor()

    def _on_model_changed(self) -> None:
        self._ready_sent = False
        self._norm_cache.clear()
        self._refresh()

    def _on_activations(self) -> None:
        self._refresh()
        if not self._ready_sent and self.is_ready():
            self._ready_sent = True
            self.ready.emit()

    def _on_cursor(self) -> None:
        if self._syncing:
            return
        block = self.editor.textCursor().blockNumber()
        sentence = self._sentence_at_line(block)
        if sentence >= 0 and sentence != self._current:
            self._show(sentence)

    def _sentence_at_line(self, block: int) -> int:
        import bisect

        k = bisect.bisect_left(self._line_of, block)
        if k < len(self._line_of) and self._line_of[k] == block:
            return k if k < len(self.workspace.sentences) else -1
        return -1

    def _show(self, sentence: int) -> None:
        self._current = sentence
        self.current_sentence_changed.emit(sentence)
        self._refresh()

    def _highlight_line(self) -> None:
        """Shade the editor line of the sentence shown in the token table."""
        s = self._current
        if s < 0 or s >= len(self._line_of) or self._fill_lines is not None:
            self.editor.setExtraSelections([])
            return
        block = self.editor.document().findBlockByNumber(self._line_of[s])
        if not block.isValid():
            self.editor.setExtraSelections([])
            return
        sel = QTextEdit.ExtraSelection()
        sel.format.setBackground(self.palette().color(QPalette.ColorRole.Highlight).lighter(185))
        sel.format.setProperty(QTextFormat.Property.FullWidthSelection, True)
        cursor = QTextCursor(block)
        cursor.movePosition(QTextCursor.MoveOperation.EndOfBlock, QTextCursor.MoveMode.KeepAnchor)
        sel.cursor = cursor                           # the whole line, also when wrapped
        self.editor.setExtraSelections([sel])

    def _norms(self, sentence: int) -> Optional[np.ndarray]:
        act = self.workspace.activations[sentence]
        if act is None:
            return None
        norms = self._norm_cache.get(sentence)
        if norms is None or norms.shape[0] != act.shape[1]:
            norms = np.linalg.norm(act, axis=2).T                 # (L+1, n, 2P) → (n, L+1)
            self._norm_cache[sentence] = norms
        return norms

    def _refresh(self) -> None:
        ws = self.workspace
        n = len(ws.sentences)
        if self._current < 0 or self._current >= n:
            self._current = 0 if n else -1
        max_chars = ws.model_info.options.max_characters_per_token if ws.model_info else 50
        if self._current < 0:
            self.model.set_sentence([], None, ws.n_layers, max_chars)
            self.header.setText("No sentences: type one per line above.")
            return
        s = self._current
        self._highlight_line()
        tokens = ws.tokens[s]
        norms = self._norms(s)
        previous_row = self.table.currentIndex().row()
        self.model.set_sentence(tokens, norms, ws.n_layers, max_chars)
        state = ""
        if ws.embedder is None:
            state = " — no model loaded"
        elif norms is None:
            state = " — embedding…"
        line = self._line_of[s] + 1 if s < len(self._line_of) else s + 1
        self.header.setText(f"Sentence {s + 1} of {n} (line {line}) — {len(tokens):,} tokens"
                            f"{state}")
        sel = ws.selection
        row = sel.token if sel is not None and sel.sentence == s else previous_row
        if 0 <= row < len(tokens):
            self._select_row(row)

    def _select_row(self, row: int) -> None:
        self._syncing = True
        try:
            self.table.selectRow(row)
        finally:
            self._syncing = False

    # ---- table → selection -----------------------------------------------------------------
    def _on_table_clicked(self, index: QModelIndex) -> None:
        if index.isValid() and self._current >= 0:
            self.workspace.select(TokenRef(self._current, index.row()))

    def _on_row_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if not self._syncing and current.isValid() and self._current >= 0:
            self.workspace.select(TokenRef(self._current, current.row()))

    def _on_selection(self, ref) -> None:
        if ref is None:
            return
        if ref.sentence != self._current:
            self._current = ref.sentence
            self._move_cursor_to_sentence(ref.sentence)
            self._refresh()
        elif self.table.currentIndex().row() != ref.token:
            self._select_row(ref.token)
        self.table.scrollTo(self.model.index(ref.token, 0))

    def _move_cursor_to_sentence(self, sentence: int) -> None:
        if sentence >= len(self._line_of):
            return
        block = self.editor.document().findBlockByNumber(self._line_of[sentence])
        if not block.isValid():
            return
        cursor = QTextCursor(block)
        self._syncing = True
        try:
            self.editor.setTextCursor(cursor)
            self.editor.ensureCursorVisible()
        finally:
            self._syncing = False

    # ---- export ------------------------------------------------------------------------------
    def _export_csv(self) -> None:
        from elmo_explorer.common.save_dialog import ask_save_path

        path = ask_save_path(self, "Export token table", "CSV (*.csv)")
        if path is not None:
            self.export_csv(path)

    def export_csv(self, path) -> int:
        """Write every sentence's tokens, char ids and layer norms to ``path`` (on the worker)."""
        ws = self.workspace
        tokens = [list(t) for t in ws.tokens]
        acts = list(ws.activations)
        n_layers = ws.n_layers
        max_chars = ws.model_info.options.max_characters_per_token if ws.model_info else 50

        def job(state):
            write_token_table_csv(path, tokens, acts, n_layers, max_chars, state)
            return str(path)

        return ws.jobs.submit("Exporting token table", job,
                                on_done=lambda p: ws.message.emit(f"Saved {p}"))
