"""The corpus a tab of the Units view runs over: its default, or a sentence file or CoNLL-U of
the user's (:mod:`elmo_engine.analysis.units.corpus` reads both, as ``units top`` and
``units pattern`` do)."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QPushButton, QWidget


class CorpusChoice(QWidget):
    """``prefix`` then the corpus's name, *Choose file…* and *Default*.

    Signals: ``choose_requested()`` (the controller asks for a file), ``changed(str)`` (the
    path, "" for the default)."""

    choose_requested = Signal()
    changed = Signal(str)

    def __init__(self, prefix: str, default: str, parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.default = default
        self._path = ""
        self.name = QLabel(default)
        self.choose = QPushButton("Choose file…")
        self.choose.setToolTip("a sentence file (one sentence per line, plain or .gz) or "
                               "CoNLL-U (.conllu, .conllu.gz: its UPOS tags are shown)")
        self.reset = QPushButton("Default")
        self.reset.setToolTip(f"back to {default}")
        self.reset.setEnabled(False)
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel(prefix))
        lay.addWidget(self.name, 1)
        lay.addWidget(self.choose)
        lay.addWidget(self.reset)
        self.choose.clicked.connect(self.choose_requested)
        self.reset.clicked.connect(lambda: self.set_path(""))

    def path(self) -> str:
        return self._path

    def set_path(self, path: str, announce: bool = True) -> None:
        """Show ``path`` ("" for the default); ``changed`` when ``announce`` and it changed."""
        changed = path != self._path
        self._path = path
        self.name.setText(Path(path).name if path else self.default)
        self.name.setToolTip(path or self.default)
        self.reset.setEnabled(bool(path))
        if changed and announce:
            self.changed.emit(path)
