"""Save dialogs for exports: :func:`ask_save_path` and the image filters.

Exported figures themselves are drawn by the engine's one figure path
(:mod:`elmo_engine.io.figures.contexts` on :mod:`elmo_engine.io.figures`, matplotlib Agg);
nothing is exported by painting a widget.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence, Union

from PySide6.QtWidgets import QFileDialog, QWidget

IMAGE_FILTERS = "PNG image (*.png);;SVG image (*.svg);;PDF document (*.pdf)"


def ask_save_path(parent: Optional[QWidget], title: str, filters: Union[str, Sequence[str]],
                  directory: str = "") -> Optional[Path]:
    """Ask for a file to save; add the selected filter's extension when the name has none.

    ``filters`` is a Qt filter string (``"PNG image (*.png);;CSV (*.csv)"``) or a list of them.
    Returns None when the user cancels.
    """
    if not isinstance(filters, str):
        filters = ";;".join(filters)
    name, chosen = QFileDialog.getSaveFileName(parent, title, directory, filters)
    if not name:
        return None
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

