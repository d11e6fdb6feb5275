"""The corpus a tab of the Units view runs over: its default, or a sentence file or CoNLL-U of
the user's (:mod:`elmo_engine.analysis.units.corpus` reads both, as ``units top`` and
``units pattern`` do), a sentence file tokenized as typed text is or, *Pretokenized*, split on
spaces only (``--pretokenized``); or a corpus index (``units top/pattern --index``)."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Optional

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QHBoxLayout, QLabel, QPushButton, QWidget

from elmo_explorer.views.units.model import CorpusFile


class CorpusChoice(QWidget):
    """``prefix`` then the corpus's name, *Choose file…*, (``indexes``) *Choose index…*,
    *Pretokenized* and *Default*.

    Signals: ``choose_requested()`` (the controller asks for a file),
    ``choose_index_requested()`` (for a corpus index's folder), ``changed(CorpusFile)`` (the
    path, "" for the default, and the switch)."""

    choose_requested = Signal()
    choose_index_requested = Signal()
    changed = Signal(object)

    def __init__(self, prefix: str, default: str, parent: Optional[QWidget] = None,
                 indexes: bool = False):
        super().__init__(parent)
        self.default = default
        self._choice = CorpusFile()
        self.name = QLabel(default)
        self.choose = QPushButton("Choose file…")
        self.choose.setToolTip("a sentence file (one sentence per line, plain or .gz) or "
                               "CoNLL-U (.conllu, .conllu.gz: its UPOS tags are shown)")
        self.choose_index: Optional[QPushButton] = None
        if indexes:
            self.choose_index = QPushButton("Choose index…")
            self.choose_index.setToolTip(
                "a corpus index (built in the Corpus view or by elmo-explorer index): every "
                "sentence it holds, as units top/pattern --index (the states are computed "
                "again, a batch at a time; Cancel stops it)")
        self.pretokenized = QCheckBox("Pretokenized")
        self.pretokenized.setToolTip(
            "split the file's lines on spaces only, as --pretokenized does: for text that is "
            "already tokenized (WikiText's @-@ stays one word); off: tokenized as typed text. "
            "A CoNLL-U file's words are its own")
        self.reset = QPushButton("Default")
        self.reset.setToolTip(f"back to {default}")
        lay = QHBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(QLabel(prefix))
        lay.addWidget(self.name, 1)
        lay.addWidget(self.choose)
        if self.choose_index is not None:
            lay.addWidget(self.choose_index)
            self.choose_index.clicked.connect(self.choose_index_requested)
        lay.addWidget(self.pretokenized)
        lay.addWidget(self.reset)
        self._show()
        self.choose.clicked.connect(self.choose_requested)
        self.reset.clicked.connect(lambda: self.set_path(""))
        self.pretokenized.toggled.connect(
            lambda on: self.set_choice(replace(self._choice, pretokenized=on)))

    def choice(self) -> CorpusFile:
        return self._choice

    def path(self) -> str:
        return self._choice.path

    def set_path(self, path: str, announce: bool = True) -> None:
        """Show the file ``path`` ("" for the default), the switch as it was."""
        self.set_choice(CorpusFile(path, self._choice.pretokenized), announce)

    def set_index(self, path: str, announce: bool = True) -> None:
        """Show the corpus index at ``path`` (the switch is kept for a file chosen later)."""
        self.set_choice(CorpusFile(path, self._choice.pretokenized, index=True), announce)

    def set_choice(self, choice: CorpusFile, announce: bool = True) -> None:
        """Show ``choice``; ``changed`` when ``announce`` and it changed."""
        changed = choice != self._choice
        self._choice = choice
        self._show()
        if changed and announce:
            self.changed.emit(choice)

    def _show(self) -> None:
        c = self._choice
        self.name.setText((f"the index {Path(c.path).name}" if c.is_index else Path(c.path).name)
                          if c.path else self.default)
        self.name.setToolTip(c.path or self.default)
        self.reset.setEnabled(bool(c.path))
        self.pretokenized.blockSignals(True)
        self.pretokenized.setChecked(c.pretokenized)
        self.pretokenized.blockSignals(False)
        # what the reader is told: a sentence file of the user's only (CorpusFile.split_on_spaces)
        self.pretokenized.setEnabled(replace(c, pretokenized=True).split_on_spaces)
