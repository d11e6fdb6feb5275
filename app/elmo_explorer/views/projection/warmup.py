"""umap's numba kernels, compiled once per process by a job of the worker's long lane, when
nothing waits for the worker: never on the GUI thread, never before a model is loaded (the
Projection view schedules it once one is, after the jobs the load starts: at start-up it ran
first and the demo model waited 7 s behind it), never between a model load and the embedding it
triggers (the worker is idle for an instant there), never just before a projection (its first
UMAP fit then compiles instead).
"""
from __future__ import annotations

from typing import Callable

from PySide6.QtCore import QObject, QTimer

from elmo_engine.analysis.projection import is_warm, warm_up
from elmo_explorer.state.worker import Lane, Worker

WARM_UP_QUIET_MS = 1500        # the worker stays idle this long before the UMAP compile starts


class UmapWarmUp(QObject):
    """Submits the compile once; ``imminent()`` says that a projection is about to start."""

    def __init__(self, worker: Worker, imminent: Callable[[], bool], parent=None):
        super().__init__(parent)
        self.worker, self.imminent = worker, imminent
        self.submitted = False

    def schedule(self) -> None:
        """Compile now if the worker is idle, else once it has stayed idle for a moment."""
        if self.submitted or is_warm() or self.worker.is_stopped():
            return                         # (a timer may still fire after the window closed)
        if self.worker.is_busy() or self.imminent():
            self.worker.idle.connect(self._when_idle)
            return
        self.submitted = True
        self.worker.submit("Preparing UMAP (one-time compile)", lambda s: warm_up(state=s),
                           lane=Lane.LONG, kind="projection-warmup")

    def _when_idle(self) -> None:
        if self.imminent():
            return
        self.worker.idle.disconnect(self._when_idle)
        QTimer.singleShot(WARM_UP_QUIET_MS, self, self.schedule)
