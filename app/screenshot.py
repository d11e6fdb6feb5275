"""``--screenshot``: wait (on signals) until the chosen view is ready, save a PNG, quit."""
from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Optional

from PySide6.QtCore import QBuffer, QIODevice, QObject, QTimer
from PySide6.QtWidgets import QApplication

from elmo_engine.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

SETTLE_MS = 150          # one more round of layout/paint events before grabbing


class Screenshot(QObject):
    """Grab ``window`` into ``path`` once the model, the sentences and the view are ready.

    ``exit_code``: 0 saved, 1 the model or a job failed, 2 timed out.
    """

    def __init__(self, window, path, view: Optional[str], timeout_s: float):
        super().__init__(window)
        self.window = window
        self.path = Path(path)
        self.panel = window.view_widget(view) if view else window.sentences
        self.exit_code = 2
        self._done = False
        ws = window.workspace
        window.show_error = self._on_error
        ws.model_changed.connect(self._check)
        ws.activations_changed.connect(self._check)
        ws.worker.idle.connect(self._check)
        ready = getattr(self.panel, "ready", None)
        if ready is not None:
            ready.connect(self._check)
        self._timeout = QTimer(self)
        self._timeout.setSingleShot(True)
        self._timeout.timeout.connect(self._on_timeout)
        self._timeout.start(int(timeout_s * 1000))
        QTimer.singleShot(0, self._check_started)

    def _check_started(self) -> None:
        ws = self.window.workspace
        if ws.model_info is None and not ws.is_loading():
            self._finish(1, "no model to load: pass --checkpoint PATH (the demo model is not installed)")

    def _ready(self) -> bool:
        ws = self.window.workspace
        return ws.model_info is not None and ws.all_embedded() and bool(self.panel.is_ready())

    def _check(self, *_args) -> None:
        if not self._done and self._ready():
            QTimer.singleShot(SETTLE_MS, self._shoot)

    def _shoot(self) -> None:
        if self._done or not self._ready():
            return
        image = self.window.grab().toImage()
        buf = QBuffer()
        buf.open(QIODevice.OpenModeFlag.WriteOnly)
        if image.isNull() or not image.save(buf, "PNG"):
            self._finish(1, "could not render the window")
            return
        atomic_write_bytes(self.path, bytes(buf.data()))
        print(f"saved {self.path} ({image.width()}x{image.height()})")
        self._finish(0)

    def _on_error(self, title: str, message: str) -> None:
        self._finish(1, f"{title}: {message}")

    def _on_timeout(self) -> None:
        self._finish(2, "timed out waiting for the view to be ready")

    def _finish(self, code: int, message: str = "") -> None:
        if self._done:
            return
        self._done = True
        self.exit_code = code
        if message:
            log.error("screenshot: %s", message)
            print(f"elmo-explorer: {message}", file=sys.stderr)
        self._timeout.stop()
        QApplication.instance().exit(code)
