"""*Build index…*: the files (a file dialog), then how they are read (``index``'s
``--pretokenized`` and ``--split-sentences``), shown with the folder the index goes to; the last
reading is remembered."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Sequence, Tuple

from PySide6.QtWidgets import (QCheckBox, QDialog, QDialogButtonBox, QFileDialog, QLabel,
                               QVBoxLayout, QWidget)

from elmo_explorer.views.corpus.jobs import CorpusReading


class BuildDialog(QDialog):
    """The files, *Pretokenized*, *Split lines into sentences*, and where the index goes
    (which follows the reading: the same files read two ways are two indexes)."""

    def __init__(self, files: Sequence[Path], reading: CorpusReading, folder_of,
                 parent: Optional[QWidget] = None):
        """``folder_of``: the index folder for a reading (the controller's default folder)."""
        super().__init__(parent)
        self.setWindowTitle("Build a corpus index")
        self.setMinimumWidth(520)
        self._folder_of = folder_of
        names = ", ".join(Path(f).name for f in files[:3]) + (
            f" and {len(files) - 3} more" if len(files) > 3 else "")
        files_label = QLabel(f"Index {names}.")
        files_label.setWordWrap(True)
        self.pretokenized = QCheckBox("Pretokenized: split the lines on spaces only")
        self.pretokenized.setToolTip(
            "for text that is already tokenized (WikiText's @-@ stays one word), as "
            "index --pretokenized; off: tokenized as typed text")
        self.pretokenized.setChecked(reading.pretokenized)
        self.split = QCheckBox("Split each line into sentences")
        self.split.setToolTip("a line may hold a paragraph: cut after . ! ? before a capital "
                              "(the trainer's splitter), as index does by default; off: one "
                              "sentence per line (--no-split-sentences)")
        self.split.setChecked(reading.split_sentences)
        self.where = QLabel()
        self.where.setWordWrap(True)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok
                                   | QDialogButtonBox.StandardButton.Cancel)
        buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Build")
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        for w in (files_label, self.pretokenized, self.split, self.where, buttons):
            lay.addWidget(w)
        self.pretokenized.toggled.connect(self._show_folder)
        self.split.toggled.connect(self._show_folder)
        self._show_folder()

    def reading(self) -> CorpusReading:
        return CorpusReading(self.pretokenized.isChecked(), self.split.isChecked())

    def _show_folder(self) -> None:
        folder = self._folder_of(self.reading())
        self.where.setText(f"Into {folder} (a stopped build there resumes)."
                           if folder is not None else "")
        self.where.setToolTip(str(folder or ""))


#: how the last build read its files (JSON of :meth:`CorpusReading.to_dict`)
READING_KEY = "corpus/build_reading"


@dataclass(frozen=True)
class BuildChoice:
    files: Tuple[Path, ...]
    reading: CorpusReading
    folder: Optional[Path]


def ask_build(parent: QWidget, qs, default_folder: Callable[[str], Optional[Path]]
              ) -> Optional[BuildChoice]:
    """The files to index and how to read them (None: cancelled). ``qs``: the app's QSettings
    (or None), where the reading is remembered; ``default_folder(stem)``: the index folder of a
    name (the first file's stem and :meth:`CorpusReading.folder_suffix`)."""
    names, _ = QFileDialog.getOpenFileNames(
        parent, "Corpus files to index", "", "Text (*.txt *.gz *.tsv);;All files (*)")
    if not names:
        return None
    files = tuple(Path(f) for f in names)

    def folder_of(reading: CorpusReading) -> Optional[Path]:
        return default_folder(files[0].stem + reading.folder_suffix())

    try:
        last = json.loads(qs.value(READING_KEY, "", type=str) or "{}") if qs is not None else {}
    except (ValueError, TypeError):
        last = {}
    dlg = BuildDialog(files, CorpusReading.from_dict(last), folder_of, parent)
    if dlg.exec() != QDialog.DialogCode.Accepted:
        return None
    reading = dlg.reading()
    if qs is not None:
        qs.setValue(READING_KEY, json.dumps(reading.to_dict()))
    return BuildChoice(files, reading, folder_of(reading))
