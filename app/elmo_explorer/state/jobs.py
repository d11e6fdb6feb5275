"""The job protocol's types: which lane a job waits in, and what a job receives.

A job is a plain callable ``fn(state)`` (:data:`JobFn`) run on a lane's thread by
:class:`~elmo_explorer.state.worker.Worker`; ``state`` is a :class:`JobState`, the engine's
:class:`~elmo_engine.progress.TaskState` (progress and cancel) plus :meth:`JobState.post` for
partial results. No Qt here.
"""
from __future__ import annotations

import enum
from typing import Any, Callable

from elmo_engine.progress import TaskState


class Lane(enum.Enum):
    """Which queue a job waits in (one thread each)."""

    INTERACTIVE = "interactive"     # typed sentences, similarity, neighbours: short, user-facing
    LONG = "long"                   # model loading, files, probes, UMAP, indexing, training


class JobState(TaskState):
    """What a job receives: progress and cancel (:class:`TaskState`) plus :meth:`post`."""

    def __init__(self, on_progress, on_post: Callable[[Any], None]):
        super().__init__(on_progress)
        self._on_post = on_post

    def post(self, payload: Any) -> None:
        """Send a partial result to the handle's ``on_event`` (GUI thread; dropped when stale)."""
        self._on_post(payload)


JobFn = Callable[[JobState], Any]
