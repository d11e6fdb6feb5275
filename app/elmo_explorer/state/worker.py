"""One background thread that runs every heavy job of the app.

The GUI thread submits plain Python callables; they run one at a time on a single
:class:`QThread` with an :class:`elmo_engine.progress.TaskState` for progress and cancel.
Results and errors come back to the GUI thread through queued signals, where the job's
``on_result`` / ``on_error`` callbacks run. Nothing but signals crosses threads.

Staleness: a job submitted with a ``group`` cancels every older job of that group (queued or
running); an older job's result or error is then dropped, never delivered. Whether a job is stale
is decided on the GUI thread only, so there is no race between "result arrived" and "superseded".
"""
from __future__ import annotations

import itertools
import logging
import os
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Deque, Dict, Optional

from PySide6.QtCore import QObject, QThread, Signal, Slot

from elmo_engine.errors import CancelledError, ElmoError
from elmo_engine.progress import TaskState

log = logging.getLogger(__name__)

JobFn = Callable[[TaskState], Any]
PROGRESS_INTERVAL_S = 0.05          # at most ~20 progress signals a second per job


@dataclass
class _Job:
    id: int
    name: str
    fn: JobFn
    on_result: Optional[Callable[[Any], None]]
    on_error: Optional[Callable[[str], None]]
    group: Optional[str]
    state: TaskState = field(default_factory=TaskState)
    stale: bool = False             # set on the GUI thread only


WORKER_NICE = 5        # the worker yields the CPU to the GUI thread when the machine is busy


def _lower_priority() -> None:
    """Raise this thread's niceness (Linux: per thread) so the GUI thread wins CPU contention."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + WORKER_NICE))
    except OSError:               # not permitted or not supported: run at normal priority
        log.debug("could not lower the worker thread's priority", exc_info=True)


class _Thread(QThread):
    """Pops jobs from the queue and runs them; reports through the owner's private signals."""

    def __init__(self, owner: "Worker"):
        super().__init__()
        self._owner = owner

    def run(self) -> None:  # noqa: D401 - Qt override
        _lower_priority()
        owner = self._owner
        while True:
            job = owner._next_job()
            if job is None:
                return
            owner._run_job(job)


class Worker(QObject):
    """Runs jobs on one background thread.

    Signals
    -------
    job_started(int, str) : job id, name — the job began running
    job_progress(int, int, int, str) : id, done, total, message (throttled)
    job_finished(int) : the job ended without error (also when it was cancelled)
    job_failed(int, str) : the job raised; the message is for the user
    job_cancelled(int) : the job stopped because it was cancelled (before ``job_finished``)
    unhandled_error(str, str) : job name, message — a job without ``on_error`` failed
    idle() : no job is queued or running any more
    busy_changed(bool)
    """

    job_started = Signal(int, str)
    job_progress = Signal(int, int, int, str)
    job_finished = Signal(int)
    job_failed = Signal(int, str)
    job_cancelled = Signal(int)
    unhandled_error = Signal(str, str)
    idle = Signal()
    busy_changed = Signal(bool)

    # private, emitted from the worker thread, delivered queued on the GUI thread
    _started = Signal(int)
    _progress = Signal(int, int, int, str)
    _done = Signal(int, object)          # id, ("ok", value) | ("cancelled", None) | ("error", (msg, tb))

    def __init__(self, parent: Optional[QObject] = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._queue: Deque[_Job] = deque()
        self._jobs: Dict[int, _Job] = {}          # submitted, not yet reported done (GUI thread)
        self._running: Optional[_Job] = None      # guarded by _cond
        self._stopping = False
        self._started.connect(self._on_started)
        self._done.connect(self._on_done)
        self._progress.connect(self._on_progress)
        # (the GIL switch interval the app needs is set at start-up: elmo_explorer.shell.startup)
        self._thread = _Thread(self)
        self._thread.setObjectName("elmo-worker")
        self._thread.start()

    # ---- GUI-thread API --------------------------------------------------------------------
    def submit(self, name: str, fn: JobFn, on_result: Optional[Callable[[Any], None]] = None,
               on_error: Optional[Callable[[str], None]] = None, group: Optional[str] = None) -> int:
        """Queue ``fn(state)`` to run on the worker thread; return the job id.

        Parameters
        ----------
        name : shown in the status bar
        fn : runs on the worker thread; may call ``state.report`` and ``state.check``
        on_result, on_error : run on the GUI thread with the return value / a message
        group : a newer job of the same group makes every older one stale (cancelled, dropped)
        """
        if self._stopping:
            raise RuntimeError("the worker was shut down")
        job_id = next(self._ids)
        job = _Job(job_id, name, fn, on_result, on_error, group)
        job.state = TaskState(self._progress_fn(job_id))
        was_busy = bool(self._jobs)
        if group is not None:
            for other in self._jobs.values():
                if other.group == group and not other.stale:
                    self._make_stale(other)
        self._jobs[job_id] = job
        with self._cond:
            self._queue.append(job)
            self._cond.notify()
        if not was_busy:
            self.busy_changed.emit(True)
        return job_id

    def cancel(self, job_id: int) -> bool:
        """Cancel one job (its result is dropped). Return False if it is unknown or done."""
        job = self._jobs.get(job_id)
        if job is None or job.stale:
            return False
        self._make_stale(job)
        return True

    def cancel_group(self, group: str) -> None:
        for job in list(self._jobs.values()):
            if job.group == group and not job.stale:
                self._make_stale(job)

    def cancel_all(self) -> None:
        """Cancel every queued and running job; none of their results will be delivered."""
        for job in list(self._jobs.values()):
            if not job.stale:
                self._make_stale(job)

    def is_stopped(self) -> bool:
        """True once :meth:`shutdown` was called (no more jobs are accepted)."""
        return self._stopping

    def is_busy(self) -> bool:
        return bool(self._jobs)

    def pending(self) -> int:
        """Jobs submitted and not yet reported done (queued + running)."""
        return len(self._jobs)

    def current_job(self) -> Optional[tuple]:
        """``(id, name)`` of the running job, or None."""
        with self._cond:
            job = self._running
        return None if job is None else (job.id, job.name)

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Cancel everything, stop the thread and wait for it. Return True if it stopped."""
        if self._stopping:
            return not self._thread.isRunning()
        self.cancel_all()
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        stopped = self._thread.wait(int(timeout_s * 1000))
        if not stopped:
            log.error("the worker thread did not stop within %.0f s", timeout_s)
        return stopped

    # ---- internals (GUI thread) ---------------------------------------------------------------
    def _make_stale(self, job: _Job) -> None:
        job.stale = True
        job.state.cancel()

    @Slot(int)
    def _on_started(self, job_id: int) -> None:
        job = self._jobs.get(job_id)
        if job is not None and not job.stale:
            self.job_started.emit(job_id, job.name)

    @Slot(int, int, int, str)
    def _on_progress(self, job_id: int, done: int, total: int, message: str) -> None:
        job = self._jobs.get(job_id)
        if job is not None and not job.stale:
            self.job_progress.emit(job_id, done, total, message)

    @Slot(int, object)
    def _on_done(self, job_id: int, outcome: tuple) -> None:
        job = self._jobs.pop(job_id, None)
        if job is None:
            return
        kind, value = outcome
        callback, arg = None, None
        if job.stale or kind == "cancelled":
            self.job_cancelled.emit(job_id)
            self.job_finished.emit(job_id)
        elif kind == "ok":
            self.job_finished.emit(job_id)
            callback, arg = job.on_result, value
        else:
            message, _tb = value
            self.job_failed.emit(job_id, message)
            callback, arg = job.on_error, message
        # the busy state is settled before the callback runs: a callback may open a modal dialog
        if not self._jobs:
            self.busy_changed.emit(False)
            self.idle.emit()
        if callback is not None:
            self._call(job, callback, arg)
        elif kind == "error" and not job.stale:
            self.unhandled_error.emit(job.name, arg)

    def _call(self, job: _Job, callback: Callable, arg: Any) -> None:
        try:
            callback(arg)
        except Exception as e:  # a broken callback must not take the app down
            log.exception("callback of job %r failed", job.name)
            self.unhandled_error.emit(job.name, f"{type(e).__name__}: {e}")

    def _progress_fn(self, job_id: int) -> Callable[[int, int, str], None]:
        last = [0.0]

        def progress(done: int, total: int, message: str = "") -> None:
            now = time.monotonic()
            if done < total and now - last[0] < PROGRESS_INTERVAL_S:
                return
            last[0] = now
            self._progress.emit(job_id, int(done), int(total), str(message))

        return progress

    # ---- internals (worker thread) ----------------------------------------------------------
    def _next_job(self) -> Optional[_Job]:
        with self._cond:
            self._running = None
            while not self._queue and not self._stopping:
                self._cond.wait()
            if self._stopping:
                dropped = list(self._queue)
                self._queue.clear()
            else:
                job = self._queue.popleft()
                self._running = job
                return job
        for job in dropped:          # report queued jobs as cancelled so nothing waits forever
            self._done.emit(job.id, ("cancelled", None))
        return None

    def _run_job(self, job: _Job) -> None:
        if job.state.cancelled:
            self._done.emit(job.id, ("cancelled", None))
            return
        self._started.emit(job.id)
        try:
            value = job.fn(job.state)
        except CancelledError:
            outcome = ("cancelled", None)
        except ElmoError as e:
            log.warning("job %r failed: %s", job.name, e)
            outcome = ("error", (str(e), traceback.format_exc()))
        except Exception as e:
            tb = traceback.format_exc()
            log.error("job %r failed with an unexpected error\n%s", job.name, tb)
            outcome = ("error", (f"{job.name} failed: {type(e).__name__}: {e}", tb))
        else:
            outcome = ("ok", value)
        if job.state.cancelled and outcome[0] == "ok":
            outcome = ("cancelled", None)
        self._done.emit(job.id, outcome)
