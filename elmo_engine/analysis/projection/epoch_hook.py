"""Progress and cancel inside umap-learn's epoch loops for fits that take no progress bar
(``AlignedUMAP``, issue 42).

umap-learn runs its layouts as Python loops over epochs wrapped in ``umap.layouts.tqdm``;
``AlignedUMAP`` passes no ``tqdm_kwds`` to them, so the bar of :mod:`.umapfit` cannot be pointed
at a file there. :func:`epoch_hook` wraps that module-level ``tqdm`` once per process: inside a
``with epoch_hook(state, label):`` block, the loops *on that thread* report each tenth epoch to
``state`` and raise :class:`~elmo_engine.errors.CancelledError` at a cancel; every other thread
(the Maps tab's UMAP fits) goes to tqdm untouched.
"""
from __future__ import annotations

import contextlib
import threading
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from elmo_engine.errors import CancelledError
from elmo_engine.progress import TaskState

_hook_lock = threading.Lock()
_hooked: Dict[int, Tuple[TaskState, str]] = {}
_original_tqdm: List[Callable] = []


@contextlib.contextmanager
def epoch_hook(state: Optional[TaskState], label: str) -> Iterator[None]:
    """Within the block, umap's epoch loops on this thread report each tenth epoch to ``state``
    (as ``"<label>: epoch i/n"``) and stop at a cancel; nothing changes when ``state`` is None."""
    if state is None:
        yield
        return
    _install_hook()
    me = threading.get_ident()
    with _hook_lock:
        _hooked[me] = (state, label)
    try:
        yield
    finally:
        with _hook_lock:
            _hooked.pop(me, None)


def _install_hook() -> None:
    import umap.layouts as layouts

    with _hook_lock:
        if _original_tqdm:
            return
        _original_tqdm.append(layouts.tqdm)

        def tqdm(iterable=None, *args, **kwargs):
            with _hook_lock:
                hit = _hooked.get(threading.get_ident())
            if hit is None:
                return _original_tqdm[0](iterable, *args, **kwargs)
            return _reporting(iterable, *hit)
        layouts.tqdm = tqdm


def _reporting(iterable, state: TaskState, label: str):
    items = list(iterable)
    for i, item in enumerate(items):
        if state.cancelled:
            raise CancelledError("cancelled")
        if i % 10 == 0:
            state.report(i, len(items), f"{label}: epoch {i}/{len(items)}")
        yield item
