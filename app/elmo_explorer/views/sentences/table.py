"""The token table model: one sentence's tokens, their character-id counts and layer norms."""
from __future__ import annotations

import csv
import io
from typing import List, Optional, Sequence

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

from elmo_engine.atomic import atomic_write_text


def char_id_count(token: str, max_chars: int = 50) -> int:
    """Character ids the model reads for ``token``: its UTF-8 bytes (at most max-2) + 2 markers."""
    return min(len(token.encode("utf-8", errors="ignore")), max_chars - 2) + 2


def write_token_table_csv(path, tokens: Sequence[Sequence[str]], acts: Sequence, n_layers: int,
                          max_chars: int, state) -> None:
    """Every sentence's tokens, char-id counts and layer norms as CSV (atomically); ``state``
    reports progress and is checked for cancel every 500 sentences."""
    buf = io.StringIO()
    out = csv.writer(buf, lineterminator="\n")
    out.writerow(["sentence", "token_index", "token", "char_ids"]
                 + [f"norm_L{k}" for k in range(n_layers)])
    for i, (toks, act) in enumerate(zip(tokens, acts)):
        if i % 500 == 0:
            state.check()
            state.report(i, len(tokens), "exporting the token table")
        norms = None if act is None else np.linalg.norm(act, axis=2).T
        for j, t in enumerate(toks):
            vals = [""] * n_layers if norms is None else [f"{v:.6g}" for v in norms[j]]
            out.writerow([i + 1, j + 1, t, char_id_count(t, max_chars)] + vals)
    atomic_write_text(path, buf.getvalue())


class TokenTableModel(QAbstractTableModel):
    """Rows: the tokens of one sentence. Columns: token, char ids, ‖layer k‖ for each layer."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self._tokens: List[str] = []
        self._tokens_src: Optional[List[str]] = None
        self._norms: Optional[np.ndarray] = None        # (n, L+1) or None while pending
        self._n_layers = 0
        self._max_chars = 50

    def set_sentence(self, tokens: List[str], norms: Optional[np.ndarray], n_layers: int,
                     max_chars: int) -> None:
        if (tokens is self._tokens_src and norms is self._norms and n_layers == self._n_layers
                and max_chars == self._max_chars):
            return                                   # same sentence, same data: keep the view
        self._tokens_src = tokens
        self.beginResetModel()
        self._tokens = list(tokens)
        self._norms = norms
        self._n_layers = n_layers
        self._max_chars = max_chars
        self.endResetModel()

    def token_count(self) -> int:
        return len(self._tokens)

    def tokens(self) -> List[str]:
        return self._tokens

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._tokens)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else 2 + self._n_layers

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row, col = index.row(), index.column()
        token = self._tokens[row]
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return token
            if col == 1:
                return str(char_id_count(token, self._max_chars))
            if self._norms is None:
                return "…"
            return f"{self._norms[row, col - 2]:.3f}"
        if role == Qt.ItemDataRole.TextAlignmentRole and col > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and col <= 1:
            n = len(token.encode("utf-8", errors="ignore"))
            cut = " (cut to fit)" if n > self._max_chars - 2 else ""
            return f"{token!r}: {len(token)} characters, {n} UTF-8 bytes{cut}"
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Vertical:
            return str(section + 1) if role == Qt.ItemDataRole.DisplayRole else None
        if role == Qt.ItemDataRole.DisplayRole:
            if section == 0:
                return "Token"
            if section == 1:
                return "Char ids"
            return f"‖L{section - 2}‖"
        if role == Qt.ItemDataRole.ToolTipRole:
            if section == 1:
                return "character ids the model reads: UTF-8 bytes (at most max−2) + begin/end of word"
            if section >= 2:
                k = section - 2
                what = "token layer (char-CNN)" if k == 0 else f"biLSTM layer {k}"
                return f"Euclidean norm of the {what} vector"
        return None
