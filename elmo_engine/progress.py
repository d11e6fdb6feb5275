"""Qt-free progress reporting and cancellation for long engine jobs.

A job receives a :class:`TaskState` (or ``None``). It calls :meth:`TaskState.report` as it goes and
:meth:`TaskState.check` between units of work; ``check`` raises :class:`CancelledError` once
``cancel()`` was called from any thread. The GUI's worker adapts this to Qt signals.
:class:`TransferState` adds what a download shows: bytes done of the total, the speed over the
last seconds and the time left (:class:`TransferReport`).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Callable, Deque, Optional, Tuple

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


def progress_text(done: int, total: int, message: str) -> str:
    """A progress line: ``message (done/total)``, the count once — a message that already
    states it ("embedding corpus (256/1000 sentences)") is left alone."""
    if not total or f"{done}/{total}" in message:
        return message
    return f"{message} ({done}/{total})"


class Rate:
    """Units per second and the time left, for progress messages; ``extra_s``: seconds of work
    that follow this stage (a corpus index's graph build after its embedding), counted in the
    time left so that it covers the whole job."""

    def __init__(self, total: int, done: int = 0, unit: str = "tokens"):
        self.total, self.start_done, self.t0, self.unit = total, done, time.monotonic(), unit
        self.extra_s = 0.0

    def message(self, done: int) -> str:
        dt = max(time.monotonic() - self.t0, 1e-6)
        rate = (done - self.start_done) / dt
        left = (self.total - done) / rate + self.extra_s if rate > 0 else float("nan")
        eta = time.strftime("%H:%M:%S", time.gmtime(left)) if left == left else "?"
        return f"{rate:,.0f} {self.unit}/s, {eta} left"


# ---- transfers (downloads): bytes, speed, time left --------------------------------------------
@dataclass(frozen=True)
class TransferReport:
    """One progress report of a transfer.

    ``done``/``total`` count bytes of the whole job (``total`` is ``None`` while unknown);
    ``speed`` is bytes per second over the last few seconds (``None`` before it can be
    measured); ``seconds_left`` is ``None`` while the speed or the total is unknown.
    """

    done: int
    total: Optional[int]
    speed: Optional[float]
    seconds_left: Optional[float]
    message: str = ""

    def describe(self) -> str:
        """``"12.3 MB of 54.4 MB, 4.1 MB/s, 10 s left"`` (decimal units, as download sizes are
        usually given); ``""`` for a step that counts no bytes."""
        if self.done == 0 and self.total is None:
            return ""
        parts = [format_bytes(self.done) + ("" if self.total is None
                                            else " of " + format_bytes(self.total))]
        if self.speed is not None:
            parts.append(format_bytes(self.speed) + "/s")
        if self.seconds_left is not None:
            parts.append(format_duration(self.seconds_left) + " left")
        return ", ".join(parts)


TransferFn = Callable[[TransferReport], None]


class TransferState(TaskState):
    """A :class:`TaskState` for byte transfers: call :meth:`advance` with each chunk's size.

    It measures the speed over a sliding window of ``window_s`` seconds (bytes that were already
    on disk when a download resumed count in ``done`` but not in the speed) and calls
    ``on_transfer`` with a :class:`TransferReport` at most every ``min_interval_s`` seconds (and
    always at :meth:`start` and :meth:`finish`). ``on_progress(done, total, message)`` of the
    plain :class:`TaskState` is called as well, with ``total`` 0 while it is unknown.
    """

    def __init__(self, on_transfer: Optional[TransferFn] = None,
                 on_progress: Optional[ProgressFn] = None, window_s: float = 5.0,
                 min_interval_s: float = 0.2, clock: Callable[[], float] = time.monotonic):
        super().__init__(on_progress)
        self._on_transfer = on_transfer
        self._window = window_s
        self._interval = min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._samples: Deque[Tuple[float, int]] = deque()
        self._last_report = -float("inf")
        self.done = 0
        self.total: Optional[int] = None
        self.message = ""

    def start(self, total: Optional[int], already: int = 0, message: str = "") -> None:
        """Begin a (part of a) transfer of ``total`` bytes of which ``already`` are on disk."""
        with self._lock:
            self.total, self.done, self.message = total, already, message
            self._samples.clear()
            self._samples.append((self._clock(), already))
        self._emit(force=True)

    def advance(self, n: int) -> None:
        """``n`` more bytes arrived; checks for cancellation first."""
        self.check()
        with self._lock:
            self.done += n
            now = self._clock()
            self._samples.append((now, self.done))
            while len(self._samples) > 2 and now - self._samples[1][0] >= self._window:
                self._samples.popleft()
        self._emit()

    def finish(self) -> None:
        self._emit(force=True)

    def snapshot(self) -> TransferReport:
        with self._lock:
            speed = None
            if len(self._samples) >= 2:
                (t0, d0), (t1, d1) = self._samples[0], self._samples[-1]
                if t1 > t0:
                    speed = (d1 - d0) / (t1 - t0)
            left = None
            if speed and self.total is not None:
                left = max(0.0, (self.total - self.done) / speed)
            return TransferReport(self.done, self.total, speed, left, self.message)

    def _emit(self, force: bool = False) -> None:
        now = self._clock()
        if not force and now - self._last_report < self._interval:
            return
        self._last_report = now
        rep = self.snapshot()
        if self._on_transfer is not None:
            self._on_transfer(rep)
        self.report(rep.done, rep.total or 0, rep.message)


def format_bytes(n: float) -> str:
    """``54373184`` → ``"54.4 MB"`` (decimal units)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000.0
    return f"{n:.1f} GB"


def format_duration(seconds: float) -> str:
    """``75`` → ``"1 min 15 s"``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {(s % 3600) // 60} min"
