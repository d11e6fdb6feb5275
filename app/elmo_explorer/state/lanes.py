"""The worker's two lane threads and what decides which of their queued jobs starts next.

A :class:`LaneThread` is one lane (:class:`~elmo_explorer.state.jobs.Lane`): a queue and the
thread that empties it, reporting through the callables the :class:`~elmo_explorer.state.
worker.Worker` gives it. The :class:`Stage` is what both lanes share: the front and backstage
job groups and each group's jobs still to be delivered, under one condition that both wait on
(the rule: the worker's module docstring, "Front and backstage").
"""
from __future__ import annotations

import logging
import os
import threading
import traceback
from collections import deque
from typing import TYPE_CHECKING, Callable, Deque, Dict, FrozenSet, Optional

from PySide6.QtCore import QThread

from elmo_engine import runtime
from elmo_engine.errors import CancelledError, ElmoError
from elmo_explorer.state.jobs import JobFn, Lane

if TYPE_CHECKING:
    from elmo_explorer.state.worker import JobHandle

log = logging.getLogger(__name__)

WORKER_NICE = 5        # the worker threads yield the CPU to the GUI thread when the machine is busy


def lower_priority() -> None:
    """Raise this thread's niceness (Linux: per thread) so the GUI thread wins CPU contention."""
    if not hasattr(os, "setpriority") or not hasattr(threading, "get_native_id"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + WORKER_NICE))
    except OSError:               # not permitted or not supported: run at normal priority
        log.debug("could not lower the worker thread's priority", exc_info=True)


class Stage:
    """What the lanes share to decide what may start: the front and backstage groups and the
    jobs of each group still to be delivered, under one condition that both lanes wait on."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.front: FrozenSet[str] = frozenset()
        self.backstage: FrozenSet[str] = frozenset()
        self._pending: Dict[Optional[str], int] = {}     # group → jobs submitted, not delivered

    def submitted(self, group: Optional[str]) -> None:
        with self.cond:
            self._pending[group] = self._pending.get(group, 0) + 1

    def delivered(self, group: Optional[str]) -> None:
        with self.cond:
            left = self._pending.get(group, 0) - 1
            if left > 0:
                self._pending[group] = left
            else:
                self._pending.pop(group, None)
            self.cond.notify_all()

    def set(self, front: FrozenSet[str], backstage: FrozenSet[str]) -> None:
        with self.cond:
            self.front, self.backstage = front, backstage
            self.cond.notify_all()

    def poke(self) -> None:
        """Let the lanes look at their queues again (a queued job was cancelled)."""
        with self.cond:
            self.cond.notify_all()

    def front_busy(self) -> bool:
        """A job of a front group is still to be delivered (the caller holds ``cond``)."""
        return any(g in self.front for g in self._pending)


class LaneThread(QThread):
    """One lane: a FIFO queue and the thread that empties it. Reports through callables only
    (the worker's signals, emitted from this thread and delivered queued on the GUI thread)."""

    def __init__(self, lane: Lane, started: Callable[[int], None],
                 done: Callable[[int, tuple], None], stage: Stage):
        super().__init__()
        self.setObjectName(f"elmo-worker-{lane.value}")
        self._started, self._done, self._stage = started, done, stage
        self._cond = stage.cond                          # shared by the lanes
        self._queue: Deque[tuple] = deque()          # (handle, fn)
        self._running: Optional[JobHandle] = None    # guarded by _cond
        self._stopping = False

    def put(self, handle: JobHandle, fn: JobFn) -> None:
        with self._cond:
            self._queue.append((handle, fn))
            self._cond.notify_all()                      # (both lanes wait on it)

    def running(self) -> Optional[JobHandle]:
        with self._cond:
            return self._running

    def stop(self) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()

    def run(self) -> None:  # Qt override
        lower_priority()
        adopted = False
        while True:
            item = self._next()
            if item is None:
                return
            if not adopted:                 # (before the first job: torch is loaded by then)
                runtime.adopt_thread_count()
                adopted = True
            self._run_job(*item)

    def _next(self) -> Optional[tuple]:
        with self._cond:
            self._running = None
            while not self._stopping:
                item = self._take()
                if item is not None:
                    self._running = item[0]
                    return item
                self._cond.wait()
            dropped = list(self._queue)
            self._queue.clear()
        for handle, _fn in dropped:    # report queued jobs as cancelled so nothing waits forever
            self._done(handle.id, ("cancelled", None))
        return None

    def _take(self) -> Optional[tuple]:
        """The first queued job whose group is not backstage; else the first job, once no job
        of the front is left to deliver; else None (the caller holds ``_cond``)."""
        back = self._stage.backstage
        if back:
            for i, item in enumerate(self._queue):
                if item[0].group not in back or item[0].state.cancelled:   # (cancelled: ends at once)
                    del self._queue[i]
                    return item
            if self._stage.front_busy():
                return None
        return self._queue.popleft() if self._queue else None

    def _run_job(self, handle: JobHandle, fn: JobFn) -> None:
        state = handle.state
        if state.cancelled:
            self._done(handle.id, ("cancelled", None))
            return
        self._started(handle.id)
        try:
            value = fn(state)
        except CancelledError:
            outcome: tuple = ("cancelled", None)
        except ElmoError as e:
            log.warning("job %r failed: %s", handle.name, e)
            outcome = ("error", (str(e), traceback.format_exc()))
        except Exception as e:
            tb = traceback.format_exc()
            log.error("job %r failed with an unexpected error\n%s", handle.name, tb)
            outcome = ("error", (f"{handle.name} failed: {type(e).__name__}: {e}", tb))
        else:
            outcome = ("ok", value)
        if state.cancelled and outcome[0] == "ok":
            outcome = ("cancelled", None)
        self._done(handle.id, outcome)


__all__ = ["LaneThread", "Stage", "lower_priority"]
