"""The app's background work: one job protocol, two lanes.

The GUI thread submits a plain callable ``fn(state)`` and gets a :class:`JobHandle` back. The job
runs on a background thread with a :class:`JobState` (an :class:`elmo_engine.progress.TaskState`
for progress and cancel, plus :meth:`JobState.post` for the job's own partial results). Its
progress, posts, result and error come back to the GUI thread through queued signals and reach
the callbacks of *that* handle only (``on_progress``, ``on_event``, ``on_done``, ``on_failed``);
nothing else crosses threads.

Two lanes, one thread and one FIFO queue each: :attr:`Lane.INTERACTIVE` for what the user waits
on while typing or clicking (embedding edited sentences, similarity, nearest neighbours) and
:attr:`Lane.LONG` for everything else (loading a model, files, probes, UMAP, indexing,
training). An interactive job therefore never waits behind a long one.

Staleness, one rule for every view: a job submitted with a ``kind`` (a request kind such as
``"embed"`` or ``"contexts-compare"``) takes the next number of that kind's generation counter;
a newer request of the kind, or :meth:`Worker.invalidate`, makes every older job of the kind
stale: it is cancelled, and its posts, result or error are dropped, never delivered. Staleness
is decided on the GUI thread only, so "result arrived" never races "superseded".

Job groups, one per view: a view submits through its :class:`JobGroup` (``worker.group("corpus")``),
whose kinds are its own (``"corpus/search"``: two views never supersede each other's jobs) and
whose idleness is derived from its jobs, never kept by hand: :meth:`JobGroup.is_idle` is true
when none of its jobs is queued or running and still to be delivered, and
:attr:`JobGroup.idle_changed` says when that changes. ``on_finished`` runs for every job once it
has ended, delivered or stale.

Front and backstage: the window names the groups of what the user looks at (the shown view and
the workspace) the *front*, and the groups of the views not shown *backstage*
(:meth:`Worker.set_stage`). A backstage job starts only when no front job is queued, running or
still to be delivered, in either lane, so what the user looks at is computed first: at start-up
the hidden views' work on the new model no longer runs ahead of the shown view's, nor in the gap
between one of its jobs and the next that its result starts (a job counts until its callbacks
have returned to the event loop, or until a callback opens a dialog). Other groups (a download,
the worker's own jobs) neither wait nor hold anything back. A group's jobs keep their order among
themselves; a view brought to the front starts its waiting jobs at once. Without a stage (the
tests' panels) the lanes are plain FIFO queues.

What a job may touch while another runs: the engine's objects are safe to share between the
lanes (``docs/guide/engine.md``, "Threads"); a job gets copies of the workspace's data taken
when it is submitted.
"""
from __future__ import annotations

import itertools
import logging
import time
from typing import Any, Callable, Dict, FrozenSet, Iterable, List, Optional

from PySide6.QtCore import QObject, QTimer, Signal, Slot

# the job protocol's types and a view's group of jobs, importable from here as before
from elmo_explorer.state.job_group import JobGroup
from elmo_explorer.state.jobs import JobFn, JobState, Lane
from elmo_explorer.state.lanes import LaneThread, Stage

__all__ = ["JobFn", "JobGroup", "JobHandle", "JobState", "Lane", "Worker"]

log = logging.getLogger(__name__)

PROGRESS_INTERVAL_S = 0.05          # at most ~20 progress signals a second per job


class JobHandle:
    """One submitted job, as the GUI thread sees it.

    Attributes
    ----------
    id, name, lane, kind : as submitted (``kind`` None: never superseded, only cancelled)
    group : the :class:`JobGroup`'s name it was submitted through (None: the worker's own)
    generation : the kind's generation number this job was submitted under
    on_progress(done, total, message), on_event(payload), on_done(result), on_failed(message) :
        this job's callbacks, run on the GUI thread; none runs once the job is stale
    on_cancelled() : runs when the job ended because it was cancelled (its Cancel, Esc, the
        status bar's Cancel), not when a newer request superseded it: the view says so and
        undoes what it set up for the result
    on_finished() : runs last when the job ended (done, failed, cancelled or superseded), for
        every job that was submitted
    """

    def __init__(self, worker: "Worker", job_id: int, name: str, lane: Lane, kind: Optional[str],
                 generation: int, group: Optional[str] = None):
        self.id, self.name, self.lane, self.kind, self.generation = job_id, name, lane, kind, generation
        self.group = group
        self.on_progress: Optional[Callable[[int, int, str], None]] = None
        self.on_event: Optional[Callable[[Any], None]] = None
        self.on_done: Optional[Callable[[Any], None]] = None
        self.on_failed: Optional[Callable[[str], None]] = None
        self.on_cancelled: Optional[Callable[[], None]] = None
        self.on_finished: Optional[Callable[[], None]] = None
        self._worker = worker
        self._cancelled = False
        self._quiet = False             # dropped by its view (a new model): nothing to say
        self.finished = False           # its outcome came back (whether delivered or dropped)
        self.state: JobState = JobState(worker._progress_fn(job_id),
                                        lambda payload: worker._post.emit(job_id, payload))

    @property
    def superseded(self) -> bool:
        """A newer request of its kind was made (or the kind was invalidated)."""
        return self.kind is not None and self._worker.generation(self.kind) != self.generation

    @property
    def cancelled(self) -> bool:
        """Cancelled by the user (not superseded by a newer request of its kind, nor dropped
        by its view, :meth:`cancel` with ``quiet``)."""
        return self._cancelled and not self._quiet and not self.superseded

    @property
    def stale(self) -> bool:
        """Cancelled or superseded: no result, post or error of it will be delivered."""
        return self._cancelled or self.superseded

    @property
    def active(self) -> bool:
        """Queued or running, and not stale: its result will still be delivered."""
        return not self.finished and not self.stale

    def cancel(self, quiet: bool = False) -> bool:
        """Cancel the job (its result is dropped; ``quiet``: as a supersede, without its
        ``on_cancelled``). False when it already ended or was stale."""
        if self.finished or self.stale:
            return False
        self._cancelled, self._quiet = True, quiet
        self.state.cancel()
        self._worker._changed(self.group)
        return True

    def __repr__(self) -> str:
        return f"<JobHandle {self.id} {self.name!r} {self.lane.value} kind={self.kind}>"


class Worker(QObject):
    """Runs jobs on two background threads, one per :class:`Lane`.

    Views use :meth:`submit` and the returned handle only. The signals below are the app-wide
    picture for the status bar and the screenshot tool (every job, both lanes):

    Signals
    -------
    job_started(int, str) : job id, name — the job began running
    job_progress(int, int, int, str) : id, done, total, message (throttled)
    job_finished(int) : the job ended without error (also when it was cancelled)
    job_failed(int, str) : the job raised; the message is for the user
    job_cancelled(int) : the job stopped because it was cancelled (before ``job_finished``)
    unhandled_error(str, str) : job name, message — a job without ``on_failed`` failed
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

    # private, emitted from the lane threads, delivered queued on the GUI thread
    _started = Signal(int)
    _progress = Signal(int, int, int, str)
    _post = Signal(int, object)
    _done = Signal(int, object)          # id, ("ok", value) | ("cancelled", None) | ("error", (msg, tb))

    def __init__(self, parent: Optional[QObject] = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._jobs: Dict[int, JobHandle] = {}       # submitted, not yet reported done (GUI thread)
        self._generations: Dict[str, int] = {}      # request kind → its newest generation
        self._groups: Dict[str, JobGroup] = {}      # view name → its job group
        self._stage = Stage()
        self._stopping = False
        self._started.connect(self._on_started)
        self._done.connect(self._on_done)
        self._progress.connect(self._on_progress)
        self._post.connect(self._on_post)
        # (the GIL switch interval the app needs is set at start-up: elmo_explorer.shell.startup)
        self._lanes = {lane: LaneThread(lane, self._started.emit, self._done.emit,
                                         self._stage) for lane in Lane}
        for thread in self._lanes.values():
            thread.start()

    # ---- GUI-thread API --------------------------------------------------------------------
    def group(self, name: str, title: Optional[str] = None) -> JobGroup:
        """The job group of view ``name`` (made on first use; ``title`` is what the status bar
        calls the view, the name by default)."""
        held = self._groups.get(name)
        if held is None:
            held = self._groups[name] = JobGroup(self, name, title or name)
        return held

    def group_title(self, name: Optional[str]) -> str:
        """What the status bar calls group ``name`` ("" for the worker's own jobs)."""
        held = self._groups.get(name) if name is not None else None
        return held.title if held is not None else ""

    def set_stage(self, front: Iterable[str], backstage: Iterable[str]) -> None:
        """The jobs of the ``backstage`` groups start only when no job of a ``front`` group is
        queued, running or still to be delivered, in either lane (see the module docstring).
        The window calls it on every change of tab: the front is the shown view's group and the
        workspace's, the backstage the other views' groups."""
        self._stage.set(frozenset(front), frozenset(backstage))

    def backstage(self) -> FrozenSet[str]:
        return self._stage.backstage

    def front(self) -> FrozenSet[str]:
        return self._stage.front

    def submit(self, name: str, fn: JobFn, *, lane: Lane = Lane.LONG, kind: Optional[str] = None,
               group: Optional[str] = None,
               on_done: Optional[Callable[[Any], None]] = None,
               on_failed: Optional[Callable[[str], None]] = None,
               on_progress: Optional[Callable[[int, int, str], None]] = None,
               on_event: Optional[Callable[[Any], None]] = None,
               on_cancelled: Optional[Callable[[], None]] = None,
               on_finished: Optional[Callable[[], None]] = None) -> JobHandle:
        """Queue ``fn(state)`` on ``lane``; return its handle.

        Parameters
        ----------
        name : shown in the status bar
        fn : runs on the lane's thread with a :class:`JobState`; may call ``state.report``,
            ``state.check`` and ``state.post``. Give it copies (the embedder, the arrays) taken
            now, never read the workspace from it.
        lane : :attr:`Lane.INTERACTIVE` for what the user waits on while typing, else LONG
        kind : the request kind; a newer job of the kind makes every older one stale
        group : the :class:`JobGroup` it belongs to (views submit through their group)
        on_done, on_failed, on_progress, on_event, on_cancelled, on_finished : this job's
            callbacks (GUI
            thread, see :class:`JobHandle`); a job that fails without ``on_failed`` is reported
            through ``unhandled_error``
        """
        if self._stopping:
            raise RuntimeError("the worker was shut down")
        if lane not in self._lanes:
            raise ValueError(f"no lane {lane!r}")
        self._stage.submitted(group)          # first: the invalidation below wakes the lanes
        generation = 0
        if kind is not None:
            generation = self.invalidate(kind)
        handle = JobHandle(self, next(self._ids), name, lane, kind, generation, group)
        handle.on_done, handle.on_failed = on_done, on_failed
        handle.on_progress, handle.on_event = on_progress, on_event
        handle.on_cancelled, handle.on_finished = on_cancelled, on_finished
        was_busy = bool(self._jobs)
        self._jobs[handle.id] = handle
        self._lanes[lane].put(handle, fn)
        if not was_busy:
            self.busy_changed.emit(True)
        self._changed(group)
        return handle

    def invalidate(self, kind: str) -> int:
        """Make every job of ``kind`` stale (cancelled, results dropped); return the kind's new
        generation. A view calls it when its inputs change without a new job to submit."""
        generation = self._generations.get(kind, 0) + 1
        self._generations[kind] = generation
        touched = set()
        for handle in self._jobs.values():
            if handle.kind == kind and handle.generation != generation:
                handle.state.cancel()
                touched.add(handle.group)
        for group in touched:
            self._changed(group)
        return generation

    def generation(self, kind: str) -> int:
        """The newest generation of ``kind`` (0: never requested)."""
        return self._generations.get(kind, 0)

    def cancel_all(self) -> None:
        """Cancel every queued and running job; none of their results will be delivered."""
        for handle in list(self._jobs.values()):
            handle.cancel()

    def is_stopped(self) -> bool:
        """True once :meth:`shutdown` was called (no more jobs are accepted)."""
        return self._stopping

    def is_busy(self) -> bool:
        return bool(self._jobs)

    def threads_running(self) -> bool:
        """Whether a lane's thread still runs (False once :meth:`shutdown` has stopped them)."""
        return any(t.isRunning() for t in self._lanes.values())

    def pending(self) -> int:
        """Jobs submitted and not yet reported done (queued + running, both lanes)."""
        return len(self._jobs)

    def running_jobs(self) -> List[JobHandle]:
        """The jobs running now (at most one per lane)."""
        return [h for h in (t.running() for t in self._lanes.values()) if h is not None]

    def current_job(self) -> Optional[tuple]:
        """``(id, name)`` of a running job (the long lane's first), or None."""
        running = sorted(self.running_jobs(), key=lambda h: h.lane != Lane.LONG)
        return None if not running else (running[0].id, running[0].name)

    def shutdown(self, timeout_s: float = 10.0) -> bool:
        """Cancel everything, stop the threads and wait for them. Return True if they stopped."""
        if self._stopping:
            return not self.threads_running()
        self.cancel_all()
        self._stopping = True
        for thread in self._lanes.values():
            thread.stop()
        deadline = time.monotonic() + timeout_s
        stopped = all(t.wait(max(0, int((deadline - time.monotonic()) * 1000)))
                      for t in self._lanes.values())
        if not stopped:
            log.error("a worker thread did not stop within %.0f s", timeout_s)
        return stopped

    def job(self, job_id: int) -> Optional[JobHandle]:
        """The handle of a job not yet reported done, or None."""
        return self._jobs.get(job_id)

    def jobs_of(self, group: str) -> List[JobHandle]:
        """The jobs of ``group`` still to be delivered (queued or running, not stale)."""
        return [h for h in self._jobs.values() if h.group == group and h.active]

    def pending_by_group(self) -> Dict[str, List[JobHandle]]:
        """The jobs still to be delivered, by the title of their view ("" for the worker's)."""
        out: Dict[str, List[JobHandle]] = {}
        for h in self._jobs.values():
            if h.active:
                out.setdefault(self.group_title(h.group), []).append(h)
        return out

    # ---- internals (GUI thread) ---------------------------------------------------------------
    def _changed(self, group: Optional[str]) -> None:
        """A job of ``group`` was submitted, ended, or went stale: its idleness may change (and
        a cancelled job waiting backstage may now end)."""
        self._stage.poke()
        held = self._groups.get(group) if group is not None else None
        if held is not None:
            held.refresh()

    def _live(self, job_id: int) -> Optional[JobHandle]:
        handle = self._jobs.get(job_id)
        return None if handle is None or handle.stale else handle

    @Slot(int)
    def _on_started(self, job_id: int) -> None:
        handle = self._live(job_id)
        if handle is not None:
            self.job_started.emit(job_id, handle.name)

    @Slot(int, int, int, str)
    def _on_progress(self, job_id: int, done: int, total: int, message: str) -> None:
        handle = self._live(job_id)
        if handle is not None:
            self.job_progress.emit(job_id, done, total, message)
            if handle.on_progress is not None:
                self._call(handle, handle.on_progress, done, total, message)

    @Slot(int, object)
    def _on_post(self, job_id: int, payload: Any) -> None:
        handle = self._live(job_id)
        if handle is not None and handle.on_event is not None:
            self._call(handle, handle.on_event, payload)

    @Slot(int, object)
    def _on_done(self, job_id: int, outcome: tuple) -> None:
        handle = self._jobs.pop(job_id, None)
        if handle is None:
            return
        handle.finished = True
        # the job stops holding the backstage back once the event loop runs again: after its
        # callbacks (the jobs they submit already count, so none slips in between), or inside
        # a dialog one of them opens (the hidden views then go on meanwhile)
        QTimer.singleShot(0, self, lambda g=handle.group: self._stage.delivered(g))
        kind, value = outcome
        callback, arg = None, None
        stale = handle.stale
        if stale or kind == "cancelled":
            self.job_cancelled.emit(job_id)
            self.job_finished.emit(job_id)
        elif kind == "ok":
            self.job_finished.emit(job_id)
            callback, arg = handle.on_done, value
        else:
            message, _tb = value
            self.job_failed.emit(job_id, message)
            callback, arg = handle.on_failed, message
        # the busy state is settled before the callback runs: a callback may open a modal dialog
        if not self._jobs:
            self.busy_changed.emit(False)
            self.idle.emit()
        if callback is not None:
            self._call(handle, callback, arg)
        elif kind == "error" and not stale:
            self.unhandled_error.emit(handle.name, arg)
        # the group's idleness is already true for whoever asks (the job is no longer pending);
        # its signal follows the result's callback, so that "idle" means "drawn"
        self._changed(handle.group)
        if handle.cancelled and handle.on_cancelled is not None:
            self._call(handle, handle.on_cancelled)
        if handle.on_finished is not None:
            self._call(handle, handle.on_finished)

    def _call(self, handle: JobHandle, callback: Callable, *args: Any) -> None:
        try:
            callback(*args)
        except Exception as e:  # a broken callback must not take the app down
            log.exception("callback of job %r failed", handle.name)
            self.unhandled_error.emit(handle.name, f"{type(e).__name__}: {e}")

    def _progress_fn(self, job_id: int) -> Callable[[int, int, str], None]:
        last = [0.0]

        def progress(done: int, total: int, message: str = "") -> None:
            now = time.monotonic()
            if done < total and now - last[0] < PROGRESS_INTERVAL_S:
                return
            last[0] = now
            self._progress.emit(job_id, int(done), int(total), str(message))

        return progress
