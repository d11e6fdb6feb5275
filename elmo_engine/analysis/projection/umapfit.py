"""UMAP of PCA-reduced features with exact precomputed neighbours; compile once per process.

Exact duplicate rows (the context-free layer 0 gives every occurrence of a word the same vector)
are fitted once. The exact cosine k nearest neighbours come from NumPy (:func:`exact_knn`) and are
given to umap-learn as ``precomputed_knn``, so umap never builds its own index and runs the same
numba kernels at every size: one tiny fit (:func:`warm_up`) compiles them once per process, for
small and large inputs alike (umap's small/large split at 4,096 points, and pynndescent's
compile, never happen). Progress is reported per epoch and cancel stops the fit between epochs.
"""
from __future__ import annotations

import re
import threading
import time
import warnings
from typing import Dict, Optional

import numpy as np

from elmo_engine.errors import CancelledError, InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.analysis.projection.compute import MIN_UMAP_POINTS, UmapParams, exact_knn


def umap_2d(x: np.ndarray, params: UmapParams, state: Optional[TaskState] = None) -> np.ndarray:
    """UMAP of ``x (N, d)`` to ``(N, 2)`` float32 with exact precomputed neighbours.

    Exact duplicate rows are fitted once and share their coordinates. Raises InputError when there
    are fewer than :data:`MIN_UMAP_POINTS` distinct points.
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    uniq, first, inverse = np.unique(x, axis=0, return_index=True, return_inverse=True)
    inverse = inverse.reshape(-1)
    if uniq.shape[0] < MIN_UMAP_POINTS:
        raise InputError(f"UMAP needs at least {MIN_UMAP_POINTS} distinct tokens, got "
                         f"{uniq.shape[0]}")
    order = np.argsort(first)                    # keep the first-seen order of the rows
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    u = x[np.sort(first)]                                                # (M, d) distinct rows
    k = min(params.n_neighbors, u.shape[0] - 1)
    idx, dist = exact_knn(u, k, params.metric, state)
    check(state)
    emb = _fit(u, idx, dist, k, params, state)                           # (M, 2)
    _warmed.setdefault(params.random_state is None, 0.0)   # the kernels are compiled now
    return np.ascontiguousarray(emb[rank[inverse]], dtype=np.float32)    # (N, 2)


def _quiet_third_party() -> None:
    """Inside ``warnings.catch_warnings()``: ignore what umap and its stack warn about.

    umap warns on import (no TensorFlow, so no ParametricUMAP) and on every fit with
    precomputed neighbours (transform() unavailable without an NNDescent index); neither applies
    to a one-off 2-D embedding.
    """
    for mod in (r"umap(\..*)?", r"pynndescent(\..*)?", r"numba(\..*)?", r"sklearn(\..*)?"):
        warnings.filterwarnings("ignore", module=mod)


class _EpochProgress:
    """A file for umap's tqdm epoch bar: turns its writes into progress reports and cancels.

    umap runs the layout as a Python loop over epochs wrapped in tqdm; raising
    :class:`CancelledError` from the bar's ``write`` stops the fit between two epochs. It is
    raised once; later writes (tqdm closing the bar) are ignored. tqdm's ``refresh`` holds its
    global write lock around ``write`` without try/finally, so whoever catches the error must
    call :meth:`release_lock` (see :func:`_fit`).
    """

    def __init__(self, state: Optional[TaskState]):
        self.state = state
        self.raised = False

    def write(self, text: str) -> None:
        if self.state is None or self.raised:
            return
        nums = [int(t) for t in re.findall(r"\d+", text)]
        if len(nums) >= 2:
            self.state.report(nums[-2], nums[-1], f"UMAP epoch {nums[-2]}/{nums[-1]}")
        if self.state.cancelled:
            self.raised = True
            raise CancelledError("cancelled")

    def flush(self) -> None:
        pass

    def release_lock(self) -> None:
        """Release the tqdm lock that ``refresh`` acquired before our ``write`` raised."""
        if self.raised:
            from tqdm.auto import tqdm          # the class umap.layouts uses
            tqdm.get_lock().release()


def _fit(u: np.ndarray, idx: np.ndarray, dist: np.ndarray, k: int, params: UmapParams,
         state: Optional[TaskState] = None) -> np.ndarray:
    with warnings.catch_warnings():
        _quiet_third_party()
        import numba
        import umap  # imported here: ~3-20 s the first time (see warm_up)

    progress = _EpochProgress(state)
    bar = {"disable": state is None, "file": progress, "mininterval": 0.25,
           "bar_format": "{n}/{total}", "ascii": True}
    model = umap.UMAP(n_neighbors=k, min_dist=params.min_dist, metric=params.metric,
                      random_state=params.random_state, n_epochs=params.n_epochs,
                      n_jobs=1 if params.random_state is not None else -1,
                      precomputed_knn=(idx, dist), n_components=2, verbose=False,
                      tqdm_kwds=bar)
    threads = numba.get_num_threads()
    try:
        with warnings.catch_warnings():
            _quiet_third_party()
            emb = model.fit_transform(u)
    except CancelledError:
        progress.release_lock()
        raise
    finally:
        numba.set_num_threads(threads)       # umap restores it only when the fit completes
    return np.asarray(emb, dtype=np.float32)


_warm_lock = threading.Lock()
_warmed: Dict[bool, float] = {}


def warm_up(parallel: bool = False, state: Optional[TaskState] = None) -> float:
    """Import umap and compile its kernels with a tiny fit, once per process.

    The default (seeded, single-threaded) path is what the app uses; ``parallel=True`` compiles
    the unseeded multi-threaded layout kernels instead (~9 s). Returns the seconds spent (0.0
    when already warm). Two steps that cannot be interrupted themselves — the import (3–21 s)
    and the compiling fit (12–30 s on a busy 2-core machine) — with a cancel check between them.
    Thread-safe; call it on the worker, never on the GUI thread.
    """
    with _warm_lock:
        if parallel in _warmed:
            return 0.0
        t0 = time.perf_counter()
        check(state)
        report(state, 0, 2, "UMAP: loading umap-learn")
        with warnings.catch_warnings():
            _quiet_third_party()
            import umap  # noqa: F401
        check(state)
        report(state, 1, 2, "UMAP: compiling its kernels (once per session)")
        x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
        umap_2d(x, UmapParams(n_neighbors=8, random_state=None if parallel else 0))
        _warmed[parallel] = time.perf_counter() - t0
        return _warmed[parallel]


def is_warm(parallel: bool = False) -> bool:
    return parallel in _warmed
