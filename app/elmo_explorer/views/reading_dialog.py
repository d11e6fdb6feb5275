"""Asking how a text file of the user's is read (:class:`~.reading.CorpusReading`): the files,
*Pretokenized* and *Split each line into sentences*, and a line that follows the choice (where a
build goes); the last choice of each use is remembered in the app's settings."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional, Sequence

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QLabel, QVBoxLayout,
                               QWidget)

from elmo_explorer.views.reading import CorpusReading
from elmo_explorer.state.settings import stored_settings


class ReadingDialog(QDialog):
    """``title``; "``verb`` FILES."; the two switches; ``note_of(reading)`` below them (or
    nothing); OK is named ``button``."""

    def __init__(self, title: str, verb: str, files: Sequence[Path], reading: CorpusReading,
                 button: str, note_of: Optional[Callable[[CorpusReading], str]] = None,
                 parent: Optional[QWidget] = None):
        super().__init__(parent)
        self.setWindowTitle(title)
        self.setMinimumWidth(520)
        self._note_of = note_of
        names = ", ".join(Path(f).name for f in files[:3]) + (
            f" and {len(files) - 3} more" if len(files) > 3 else "")
        files_label = QLabel(f"{verb} {names}.")
        files_label.setWordWrap(True)
        self.pretokenized = QCheckBox("Pretokenized: split the lines on spaces only")
        self.pretokenized.setToolTip(
            "for text that is already tokenized (WikiText's @-@ stays one word), as "
            "--pretokenized; off: tokenized as typed text")
        self.pretokenized.setChecked(reading.pretokenized)
        self.split = QCheckBox("Split each line into sentences")
        self.split.setToolTip("a line may hold a paragraph: cut after . ! ? before a capital "
                              "(the trainer's splitter), as the commands do by default; off: "
                              "one sentence per line (--no-split-sentences)")
        self.split.setChecked(reading.split_sentences)
        self.note = QLabel()
        self.note.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText(button)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in (files_label, self.pretokenized, self.split, self.note, buttons):
            lay.addWidget(w)
        self.pretokenized.toggled.connect(self._show_note)
        self.split.toggled.connect(self._show_note)
        self._show_note()

    def reading(self) -> CorpusReading:
        return CorpusReading(self.pretokenized.isChecked(), self.split.isChecked())

    def _show_note(self) -> None:
        text = self._note_of(self.reading()) if self._note_of is not None else ""
        self.note.setText(text)
        self.note.setVisible(bool(text))


def ask_reading(parent: QWidget, qs, key: str, title: str, verb: str, files: Sequence[Path],
                button: str, note_of: Optional[Callable[[CorpusReading], str]] = None
                ) -> Optional[CorpusReading]:
    """The reading the user chooses for ``files`` (None: cancelled), the last one under ``key``
    in ``qs`` (the app's QSettings, :func:`window_qsettings`, or None) shown first and the new
    one remembered there."""
    dlg = ReadingDialog(title, verb, files, remembered(qs, key), button, note_of, parent)
    if dlg.exec() != QDialog.DialogCode.Accepted:
        return None
    reading = dlg.reading()
    if qs is not None:
        qs.setValue(key, json.dumps(reading.to_dict()))
    return reading


def window_qsettings(widget: QWidget):
    """The app's QSettings of ``widget``'s window (None outside the main window)."""
    return getattr(getattr(widget.window(), "settings", None), "qs", None)


def remembered(qs, key: str) -> CorpusReading:
    """The reading last chosen under ``key`` in ``qs`` (the app's QSettings, or None)."""
    try:
        return stored_settings(qs, key, CorpusReading.from_dict)
    except (ValueError, TypeError):
        return CorpusReading()
