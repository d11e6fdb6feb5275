"""What several threads may share, and the one lock type the engine needs for it.

The engine's concurrency contract (``docs/guide/engine.md``, "Threads"): a loaded
:class:`~elmo_engine.model.bilm.BiLM` and an :class:`~elmo_engine.embed.embedder.Embedder` may
be called from several threads at once, and each call's result is what it would be alone. No
call writes state that another call reads: the model's scratch buffers are per thread, its
packed weights are made once under a lock, the embedder's caches sit behind a lock, and a move
of the model to another device (the GPU fallback) waits until no pass is running.

:class:`SharedExclusiveLock` is that last rule: any number of forward passes hold it shared; a
change of the model (its device or dtype) holds it alone. There is one per model
(:func:`model_lock`), whoever runs it: two embedders over one model (the app's corpus build
makes its own beside the workspace's) and the step-by-step inspection of the LSTM take the same
lock, so a move by one never happens under another's pass.
"""
from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator


class SharedExclusiveLock:
    """Many holders in :meth:`shared`, or one in :meth:`exclusive` (a readers–writer lock).

    A waiting exclusive holder goes first: new shared holders wait behind it, so a change is
    never starved by a stream of passes. Not re-entrant: a thread holding it shared must not
    ask for it exclusively (it would wait for itself)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0                 # holders in shared mode
        self._exclusive = False          # a holder in exclusive mode
        self._waiting = 0                # threads waiting for exclusive mode

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        with self._cond:
            self._waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


_MODEL_LOCKS: "weakref.WeakKeyDictionary[Any, SharedExclusiveLock]" = weakref.WeakKeyDictionary()
_MODEL_LOCKS_GUARD = threading.Lock()


def model_lock(model: Any) -> SharedExclusiveLock:
    """The one :class:`SharedExclusiveLock` of ``model`` (made on first use, gone with the
    model): every caller that runs it holds it shared for a pass; a move holds it alone."""
    with _MODEL_LOCKS_GUARD:
        lock = _MODEL_LOCKS.get(model)
        if lock is None:
            lock = _MODEL_LOCKS[model] = SharedExclusiveLock()
        return lock
