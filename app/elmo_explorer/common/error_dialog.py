"""The one error dialog: a problem shown to the user (and logged), with long path-like words
broken so that the dialog stays readable."""
from __future__ import annotations

import logging
from typing import Optional

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox, QWidget

from elmo_engine.files import shown

log = logging.getLogger(__name__)


def show_error(parent: Optional[QWidget], title: str, message: str) -> None:
    """Show an error dialog (and log it). A file name's bytes that are not UTF-8 and
    bidirectional controls are shown escaped (``\\xff``, ``\\u202e``): Qt drops the first,
    naming another file, and the second reverses the name (:func:`elmo_engine.files.shown`)."""
    message = shown(message)
    log.warning("%s: %s", title, message)
    box = QMessageBox(QMessageBox.Icon.Critical, title, _wrap(message),
                      QMessageBox.StandardButton.Ok, parent)
    box.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
    box.exec()


def _wrap(message: str, width: int = 100) -> str:
    """Insert break opportunities in very long path-like words so the dialog stays readable."""
    out = []
    for word in message.split(" "):
        if len(word) > width:
            word = "\u200b".join(word[i:i + width] for i in range(0, len(word), width))
        out.append(word)
    return " ".join(out)
