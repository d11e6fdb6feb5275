"""File dialogs: :func:`ask_save_path` for exports, :func:`open_file_name` and
:func:`existing_folder` for a view's inputs, all starting in the folder last used (the window's
``settings.last_dir``, remembered across launches) and remembering the one chosen; and the image
filters.

Exported figures themselves are drawn by the engine's one figure path
(:mod:`elmo_engine.io.figures.contexts` on :mod:`elmo_engine.io.figures`, matplotlib Agg);
nothing is exported by painting a widget.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional, Sequence, Union

from PySide6.QtWidgets import QFileDialog, QWidget

IMAGE_FILTERS = "PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)"


def _settings(parent: Optional[QWidget]):
    """The main window's :class:`~elmo_explorer.state.settings.AppSettings` (None outside
    one): the first of ``parent`` and its parents that has them (up the parents, not through
    ``window()``: a floating dock is a window of its own)."""
    widget = parent
    while widget is not None and not hasattr(getattr(widget, "settings", None), "last_dir"):
        widget = widget.parentWidget()        # (a view's settings() method is not them)
    return getattr(widget, "settings", None)


def start_dir(parent: Optional[QWidget]) -> str:
    """The folder a dialog starts in: the one last used in this installation ("" : none)."""
    settings = _settings(parent)
    return str(settings.last_dir or "") if settings is not None else ""


def remember_dir(parent: Optional[QWidget], name: str, folder: bool = False) -> None:
    """Remember the folder of ``name`` (a file, or itself with ``folder``) for the next dialog."""
    settings = _settings(parent)
    if settings is not None and name:
        settings.last_dir = str(Path(name) if folder else Path(name).parent)


def open_file_name(parent: Optional[QWidget], title: str, filters: str,
                   directory: str = "") -> str:
    """A file to read ("" when the user cancels), asked from the folder last used."""
    name, _ = QFileDialog.getOpenFileName(parent, title, directory or start_dir(parent), filters)
    remember_dir(parent, name)
    return name


def open_file_names(parent: Optional[QWidget], title: str, filters: str) -> List[str]:
    """Files to read ([] when the user cancels), asked from the folder last used."""
    names, _ = QFileDialog.getOpenFileNames(parent, title, start_dir(parent), filters)
    if names:
        remember_dir(parent, names[0])
    return list(names)


def existing_folder(parent: Optional[QWidget], title: str, directory: str = "") -> str:
    """A folder ("" when the user cancels), asked from the folder last used."""
    name = QFileDialog.getExistingDirectory(parent, title, directory or start_dir(parent))
    remember_dir(parent, name, folder=True)
    return name


def ask_save_path(parent: Optional[QWidget], title: str, filters: Union[str, Sequence[str]],
                  directory: str = "") -> Optional[Path]:
    """Ask for a file to save (from the folder last used); add the selected filter's extension
    when the name has none.

    ``filters`` is a Qt filter string (``"PNG image (*.png);;CSV (*.csv)"``) or a list of them.
    Returns None when the user cancels.
    """
    if not isinstance(filters, str):
        filters = ";;".join(filters)
    name, chosen = QFileDialog.getSaveFileName(parent, title, directory or start_dir(parent),
                                               filters)
    if not name:
        return None
    remember_dir(parent, name)
    path = Path(name)
    if not path.suffix:
        ext = _first_extension(chosen or filters)
        if ext:
            path = path.with_suffix(ext)
    return path


def _first_extension(filter_text: str) -> str:
    start = filter_text.find("*.")
    if start < 0:
        return ""
    end = start + 2
    while end < len(filter_text) and (filter_text[end].isalnum() or filter_text[end] == "."):
        end += 1
    return filter_text[start + 1:end]

