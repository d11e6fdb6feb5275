"""*Build index…*: the files (a file dialog), then how they are read (``index``'s
``--pretokenized`` and ``--split-sentences``, :class:`~elmo_explorer.views.reading_dialog.
ReadingDialog`), shown with the folder the index goes to; the last reading is remembered."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Tuple

from PySide6.QtWidgets import QWidget

from elmo_explorer.common.save_dialog import open_file_names

from elmo_explorer.views.reading import CorpusReading
from elmo_explorer.views.reading_dialog import ask_reading

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
    name (the first file's stem and :meth:`CorpusReading.folder_suffix`), shown in the dialog
    as the reading changes (the same files read two ways are two indexes)."""
    names = open_file_names(parent, "Corpus files to index",
                            "Text (*.txt *.gz *.tsv);;All files (*)")
    if not names:
        return None
    files = tuple(Path(f) for f in names)

    def folder_of(reading: CorpusReading) -> Optional[Path]:
        return default_folder(files[0].stem + reading.folder_suffix())

    def where(reading: CorpusReading) -> str:
        folder = folder_of(reading)
        return f"Into {folder} (a stopped build there resumes)." if folder is not None else ""

    reading = ask_reading(parent, qs, READING_KEY, "Build a corpus index", "Index", files,
                          "Build", where)
    return None if reading is None else BuildChoice(files, reading, folder_of(reading))
