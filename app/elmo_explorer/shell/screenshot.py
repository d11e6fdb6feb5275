"""``--screenshot``: wait (on signals) until the chosen view is ready and every job it started
has finished, save a PNG, quit.

Ready means: the model is loaded, every sentence is embedded, the view says ``is_ready()``, and
the worker has no job queued or running (a view that starts work — the probes' first demo run,
UMAP plot by plot — is pictured only once that work is done). The picture is taken after
:data:`SETTLE_MS` of quiet; a job started in that time puts it off until the worker is idle
again.
"""
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
        ws.worker.busy_changed.connect(self._check)
        ws.worker.job_started.connect(self._on_job_started)
        self._jobs_started = 0
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
        return (ws.model_info is not None and ws.all_embedded() and bool(self.panel.is_ready())
                and not ws.worker.is_busy())

    def _on_job_started(self, *_args) -> None:
        self._jobs_started += 1

    def _check(self, *_args) -> None:
        if not self._done and self._ready():
            seen = self._jobs_started
            QTimer.singleShot(SETTLE_MS, lambda: self._shoot(seen))

    def _shoot(self, jobs_seen: Optional[int] = None) -> None:
        if self._done or not self._ready():
            return
        if jobs_seen is not None and jobs_seen != self._jobs_started:
            return                  # a job ran meanwhile: its end (worker idle) checks again
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
