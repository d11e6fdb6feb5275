"""What the screenshot scripts share: the app's main window with some views, started on the
bundled model and the demo sentences at 1280×800, and a wait that keeps the event loop running
until a condition holds (scripts/screenshot_units.py, scripts/screenshot_usefulness.py).
"""
from __future__ import annotations

import sys
import tempfile
import time
from typing import Callable, Sequence, Tuple

from PySide6.QtWidgets import QApplication


def started_window(views: Sequence[str]) -> Tuple[QApplication, object]:
    """A QApplication and a shown main window of ``views`` (fresh settings), started on the
    bundled model and the demo sentences."""
    app = QApplication(sys.argv[:1])
    from elmo_explorer.shell.main_window import MainWindow
    from elmo_explorer.state.settings import AppSettings

    w = MainWindow(AppSettings(tempfile.mkdtemp()), views=tuple(views))
    w.resize(1280, 800)
    w.show()
    w.start(None, None, None)
    return app, w


def wait(app: QApplication, cond: Callable[[], bool], seconds: float = 300) -> None:
    """Process events until ``cond()`` holds (then a few more, so that it is drawn); exits
    with "timed out" after ``seconds``."""
    end = time.time() + seconds
    while time.time() < end:
        app.processEvents()
        if cond():
            for _ in range(20):
                app.processEvents()
            return
        time.sleep(0.02)
    raise SystemExit("timed out")
