"""A view's jobs, submitted, cancelled and waited on together (one group per view).

Made by :meth:`~elmo_explorer.state.worker.Worker.group`; see the worker's module docstring for
the job protocol. A group's kinds are its own (``"corpus/search"``), so two views never
supersede each other's jobs, and its idleness is derived from its jobs, never kept by hand.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, Optional

from PySide6.QtCore import QObject, Signal

from elmo_explorer.state.jobs import JobFn, Lane

if TYPE_CHECKING:
    from elmo_explorer.state.worker import JobHandle, Worker


class JobGroup(QObject):
    """A view's jobs: submitted, cancelled and waited on together.

    Made by :meth:`Worker.group`. Kinds are the group's own (``"NAME/KIND"`` for the worker), so
    a view's requests supersede only its own. Idleness is derived from the jobs themselves.

    Signals
    -------
    idle_changed(bool) : True when the group's last active job ended or went stale, False when
        a job was submitted to an idle group
    """

    idle_changed = Signal(bool)

    def __init__(self, worker: "Worker", name: str, title: str):
        super().__init__(worker)
        self.worker, self.name, self.title = worker, name, title
        self._idle = True
        #: what the view does when one of its jobs is cancelled from outside it (Esc, the
        #: status bar's Cancel) and the job names no ``on_cancelled`` of its own: say so, so
        #: that its last progress line does not stay as if the job still ran
        self.on_cancelled: Optional[Callable[[], None]] = None

    def _kind(self, kind: Optional[str]) -> Optional[str]:
        return None if kind is None else f"{self.name}/{kind}"

    def submit(self, name: str, fn: JobFn, *, lane: Lane = Lane.LONG, kind: Optional[str] = None,
               **callbacks: Any) -> JobHandle:
        """:meth:`Worker.submit` within this group (``kind`` is the group's own; the group's
        :attr:`on_cancelled` unless the job names its own)."""
        if self.on_cancelled is not None:
            callbacks.setdefault("on_cancelled", self.on_cancelled)
        return self.worker.submit(name, fn, lane=lane, kind=self._kind(kind), group=self.name,
                                  **callbacks)

    def invalidate(self, kind: str) -> int:
        """Make every job of this group's ``kind`` stale (see :meth:`Worker.invalidate`)."""
        return self.worker.invalidate(self._kind(kind))  # type: ignore[arg-type]

    def generation(self, kind: str) -> int:
        return self.worker.generation(self._kind(kind))  # type: ignore[arg-type]

    def jobs(self) -> List[JobHandle]:
        """The group's jobs that are queued or running and still to be delivered."""
        return self.worker.jobs_of(self.name)

    def is_idle(self) -> bool:
        return not self.jobs()

    def is_running(self, kind: str) -> bool:
        """Whether a job of this group's ``kind`` is queued or running and not stale."""
        full = self._kind(kind)
        return any(h.kind == full for h in self.jobs())

    def cancel(self, kind: str) -> bool:
        """Cancel the group's active jobs of ``kind``; whether there was one."""
        full = self._kind(kind)
        return any([h.cancel() for h in self.jobs() if h.kind == full])

    def cancel_all(self) -> None:
        """Drop every job of the group (their results are dropped, quietly: the view itself
        asks, e.g. on a new model, so no ``on_cancelled`` says "Cancelled")."""
        for h in self.jobs():                  # the others have ended or are stale already
            h.cancel(quiet=True)

    def refresh(self) -> None:
        """Emit :attr:`idle_changed` when the group's idleness changed (the worker calls this
        when one of its jobs was submitted, ended or went stale)."""
        idle = self.is_idle()
        if idle != self._idle:
            self._idle = idle
            self.idle_changed.emit(idle)
