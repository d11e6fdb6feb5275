"""Qt-free progress reporting and cancellation for long engine jobs.

A job receives a :class:`TaskState` (or ``None``). It calls :meth:`TaskState.report` as it goes and
:meth:`TaskState.check` between units of work; ``check`` raises :class:`CancelledError` once
``cancel()`` was called from any thread. The GUI's worker adapts this to Qt signals.
"""
from __future__ import annotations

import threading
from typing import Callable, Optional

from elmo_engine.errors import CancelledError

ProgressFn = Callable[[int, int, str], None]


class TaskState:
    """Progress sink plus a thread-safe cancel flag.

    Parameters
    ----------
    on_progress : called as ``on_progress(done, total, message)``; must be cheap and thread-safe.
    """

    def __init__(self, on_progress: Optional[ProgressFn] = None):
        self._cancel = threading.Event()
        self._on_progress = on_progress

    def cancel(self) -> None:
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    def check(self) -> None:
        """Raise :class:`CancelledError` if cancellation was requested."""
        if self._cancel.is_set():
            raise CancelledError("cancelled")

    def report(self, done: int, total: int, message: str = "") -> None:
        if self._on_progress is not None:
            self._on_progress(done, total, message)


def check(state: Optional[TaskState]) -> None:
    if state is not None:
        state.check()


def report(state: Optional[TaskState], done: int, total: int, message: str = "") -> None:
    if state is not None:
        state.report(done, total, message)
