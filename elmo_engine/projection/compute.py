"""Per-layer features → PCA → UMAP, cached, with progress and cancel between steps.

Pipeline for one layer (or a scalar mix of layers) of a :class:`TokenSet`:

1. gather the ``(N, D)`` features from the per-sentence activations ``(L+1, n, D)``;
2. PCA to ``pca_dims`` (50) dimensions — its first two axes are the instant 2-D fallback;
3. drop exact duplicate rows (the context-free layer 0 gives every occurrence of a word the same
   vector), find the exact cosine k nearest neighbours with NumPy (blocked matrix products), and
   give them to umap-learn as ``precomputed_knn``; map the result back to every point.

Step 3 means umap never builds its own neighbour index, so it runs the same numba kernels at every
size: one tiny fit (:func:`warm_up`) compiles them once per process, for small and large inputs
alike (umap's own small/large split at 4,096 points, and pynndescent's compile, never happen).
A fit itself cannot be interrupted; cancel is checked between layers and between the steps.
"""
from __future__ import annotations

import threading
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.projection.tokens import TokenSet

#: UMAP needs at least this many distinct points; below it only PCA is offered
MIN_UMAP_POINTS = 10
KNN_BLOCK = 1024                       # query rows per block of the exact kNN (block × N floats)


@dataclass(frozen=True)
class LayerSpec:
    """One layer (``index``) or a scalar mix of all layers (``weights``, normalised to sum 1).

    The mix is ``Σ_k w_k h_k``; ELMo's γ only scales it, which changes neither the cosine UMAP
    nor the PCA picture, so it is left out.
    """

    index: Optional[int] = None
    weights: Optional[Tuple[float, ...]] = None

    @classmethod
    def single(cls, index: int) -> "LayerSpec":
        if index < 0:
            raise InputError(f"layer index must be >= 0, got {index}")
        return cls(index=int(index))

    @classmethod
    def mix(cls, weights: Sequence[float]) -> "LayerSpec":
        w = np.asarray(list(weights), dtype=np.float64)
        if w.size == 0 or not np.all(np.isfinite(w)) or np.any(w < 0) or w.sum() <= 0:
            raise InputError(f"mix weights must be non-negative and not all zero, got {list(weights)}")
        return cls(weights=tuple(float(x) for x in w / w.sum()))

    @property
    def name(self) -> str:
        if self.weights is not None:
            return "mix"
        return f"layer {self.index}"

    @property
    def key(self) -> str:
        """A short id for file names and CSV columns: ``layer0`` … or ``mix``."""
        return "mix" if self.weights is not None else f"layer{self.index}"


@dataclass(frozen=True)
class UmapParams:
    """UMAP settings. ``random_state=None`` runs multi-threaded but is not reproducible."""

    n_neighbors: int = 15
    min_dist: float = 0.1
    random_state: Optional[int] = 42
    pca_dims: int = 50
    metric: str = "cosine"

    def __post_init__(self) -> None:
        if not 2 <= self.n_neighbors <= 200:
            raise InputError(f"n_neighbors must be in 2..200, got {self.n_neighbors}")
        if not 0.0 <= self.min_dist <= 1.0:
            raise InputError(f"min_dist must be in 0..1, got {self.min_dist}")
        if self.pca_dims < 2:
            raise InputError(f"pca_dims must be >= 2, got {self.pca_dims}")
        if self.metric not in ("cosine", "euclidean"):
            raise InputError(f"metric must be 'cosine' or 'euclidean', got {self.metric!r}")


@dataclass(frozen=True)
class Projection:
    """2-D coordinates of every point of a token set for one layer.

    Attributes
    ----------
    layer, method : what was projected and how ("pca" or "umap")
    coords : ``(N, 2)`` float32, read-only
    seconds : time spent computing it (0 for a result taken from the cache's inputs)
    explained : for PCA, the fraction of variance on each axis
    params : for UMAP, the settings used
    """

    layer: LayerSpec
    method: str
    coords: np.ndarray
    seconds: float
    explained: Optional[Tuple[float, float]] = None
    params: Optional[UmapParams] = None


# ---- features and PCA ---------------------------------------------------------------------
def layer_features(activations: Sequence[np.ndarray], tokens: TokenSet, layer: LayerSpec
                   ) -> np.ndarray:
    """Gather the ``(N, D)`` float32 features of the points of ``tokens`` at ``layer``.

    ``activations[s]`` is the ``(L+1, n_s, D)`` array of ``tokens.sentences[s]``.
    """
    if len(activations) != len(tokens.sentences):
        raise InputError(f"{len(activations)} activation arrays for {len(tokens.sentences)} "
                         "sentences")
    first = next((a for a in activations if a is not None), None)
    if first is None:
        raise InputError("no activations to project")
    n_layers, dim = first.shape[0], first.shape[2]
    if layer.weights is not None and len(layer.weights) != n_layers:
        raise InputError(f"{len(layer.weights)} mix weights for a model with {n_layers} layers")
    if layer.index is not None and layer.index >= n_layers:
        raise InputError(f"layer {layer.index} does not exist (the model has {n_layers})")
    out = np.empty((len(tokens), dim), np.float32)                       # (N, D)
    order = np.argsort(tokens.sentence, kind="stable")
    bounds = np.flatnonzero(np.diff(tokens.sentence[order])) + 1
    w = None if layer.weights is None else np.asarray(layer.weights, np.float32)
    for rows in np.split(order, bounds) if len(order) else []:
        s = int(tokens.sentence[rows[0]])
        act = activations[s]
        if act is None:
            raise InputError(f"sentence {s} has no activations yet")
        pos = tokens.position[rows]
        if layer.weights is None:
            out[rows] = act[layer.index, pos]                            # (r, D)
        else:
            out[rows] = np.tensordot(w, act[:, pos], axes=1)             # (L+1,) · (L+1, r, D)
    return out


@dataclass(frozen=True)
class PcaResult:
    """``coords (N, k)``, ``components (k, D)``, ``mean (D,)``, ``explained (k,)`` ratios."""

    coords: np.ndarray
    components: np.ndarray
    mean: np.ndarray
    explained: np.ndarray


def pca(x: np.ndarray, n_components: int) -> PcaResult:
    """Principal components of ``x (N, D)`` (k = min(n_components, N, D)).

    Eigen-decomposes the smaller of the ``(D, D)`` covariance and the ``(N, N)`` Gram matrix in
    float64 (top k only). Signs are fixed so the largest-magnitude loading of each component is
    positive, which makes the result deterministic.
    """
    x = np.asarray(x, dtype=np.float32)
    n, d = x.shape
    if n < 2:
        raise InputError(f"PCA needs at least 2 points, got {n}")
    k = max(1, min(n_components, n, d))
    mean = x.mean(axis=0, dtype=np.float64)                              # (D,)
    xc = x.astype(np.float64) - mean                                     # (N, D)
    total = float(np.einsum("ij,ij->", xc, xc))
    if n > d:
        var, vecs = _top_eigh(xc.T @ xc, k)                              # (k,), (D, k)
        comps = vecs.T                                                   # (k, D)
    else:
        var, u = _top_eigh(xc @ xc.T, k)                                 # (k,), (N, k)
        live = var > 1e-12 * max(float(var[0]), 1e-300)                  # beyond the rank: 0
        var = np.where(live, var, 0.0)
        comps = (xc.T @ u).T / np.sqrt(np.where(live, var, 1.0))[:, None]  # (k, D)
        comps[~live] = 0.0
    big = np.argmax(np.abs(comps), axis=1)
    comps = comps * np.sign(comps[np.arange(k), big])[:, None]
    coords = (xc @ comps.T).astype(np.float32)                           # (N, k)
    explained = var / total if total > 0 else np.zeros(k)
    return PcaResult(coords, comps.astype(np.float32), mean.astype(np.float32),
                     explained.astype(np.float64))


def _top_eigh(sym: np.ndarray, k: int) -> Tuple[np.ndarray, np.ndarray]:
    """The k largest eigenvalues (descending, clipped at 0) and eigenvectors of a symmetric matrix.

    Runs LAPACK single-threaded: on a busy 2-core machine a multi-threaded ``eigh`` of a 400×400
    matrix took 2–3 s instead of 0.08 s (OpenBLAS threads fighting for the cores).
    """
    import scipy.linalg
    from threadpoolctl import threadpool_limits

    m = sym.shape[0]
    with threadpool_limits(1):
        vals, vecs = scipy.linalg.eigh(sym, subset_by_index=[m - k, m - 1], driver="evr")
    return np.clip(vals[::-1], 0.0, None), vecs[:, ::-1]


def _as_2d(coords: np.ndarray) -> np.ndarray:
    """``(N, k)`` → ``(N, 2)``; a single component gets a zero second axis."""
    if coords.shape[1] >= 2:
        return np.ascontiguousarray(coords[:, :2])
    return np.hstack([coords, np.zeros_like(coords)])


# ---- neighbours and UMAP ------------------------------------------------------------------
def exact_knn(x: np.ndarray, k: int, metric: str = "cosine", state: Optional[TaskState] = None
              ) -> Tuple[np.ndarray, np.ndarray]:
    """Exact k nearest neighbours of every row of ``x (N, D)``, the point itself first.

    Returns ``indices (N, k)`` int32 and ``distances (N, k)`` float32, sorted by distance.
    Cosine distance is ``1 - cos`` (a zero vector is at distance 1 from everything).
    """
    n = x.shape[0]
    k = min(k, n)
    x = np.asarray(x, np.float32)
    if metric == "cosine":
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        y = x / np.where(norms > 0, norms, 1.0)                          # (N, D) unit rows
        sq = None
    else:
        y = x
        sq = np.einsum("ij,ij->i", x, x)                                 # (N,)
    idx = np.empty((n, k), np.int32)
    dist = np.empty((n, k), np.float32)
    for start in range(0, n, KNN_BLOCK):
        check(state)
        stop = min(n, start + KNN_BLOCK)
        g = y[start:stop] @ y.T                                          # (b, N)
        if metric == "cosine":
            d = 1.0 - g
        else:
            d = np.maximum(sq[start:stop, None] + sq[None, :] - 2.0 * g, 0.0)
        rows = np.arange(stop - start)
        d[rows, start + rows] = -1.0                                     # self first
        part = np.argpartition(d, k - 1, axis=1)[:, :k] if k < n else np.tile(np.arange(n), (len(rows), 1))
        pd = np.take_along_axis(d, part, axis=1)
        o = np.argsort(pd, axis=1, kind="stable")
        idx[start:stop] = np.take_along_axis(part, o, axis=1)
        pd = np.take_along_axis(pd, o, axis=1)
        pd[:, 0] = 0.0
        dist[start:stop] = np.sqrt(pd) if metric == "euclidean" else np.clip(pd, 0.0, 2.0)
    return idx, dist


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
    emb = _fit(u, idx, dist, k, params)                                  # (M, 2)
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


def _fit(u: np.ndarray, idx: np.ndarray, dist: np.ndarray, k: int, params: UmapParams
         ) -> np.ndarray:
    with warnings.catch_warnings():
        _quiet_third_party()
        import umap  # imported here: ~3-20 s the first time (see warm_up)

    model = umap.UMAP(n_neighbors=k, min_dist=params.min_dist, metric=params.metric,
                      random_state=params.random_state,
                      n_jobs=1 if params.random_state is not None else -1,
                      precomputed_knn=(idx, dist), n_components=2, verbose=False)
    with warnings.catch_warnings():
        _quiet_third_party()
        emb = model.fit_transform(u)
    return np.asarray(emb, dtype=np.float32)


_warm_lock = threading.Lock()
_warmed: Dict[bool, float] = {}


def warm_up(parallel: bool = False) -> float:
    """Import umap and compile its kernels with a tiny fit, once per process.

    The default (seeded, single-threaded) path is what the app uses; ``parallel=True`` also
    compiles the unseeded multi-threaded layout kernels (~9 s more). Returns the seconds spent
    (0.0 when already warm). Thread-safe; call it on the worker, never on the GUI thread.
    """
    with _warm_lock:
        if parallel in _warmed:
            return 0.0
        t0 = time.perf_counter()
        x = np.random.default_rng(0).normal(size=(64, 8)).astype(np.float32)
        umap_2d(x, UmapParams(n_neighbors=8, random_state=None if parallel else 0))
        _warmed[parallel] = time.perf_counter() - t0
        return _warmed[parallel]


def is_warm(parallel: bool = False) -> bool:
    return parallel in _warmed


# ---- the cached projector -------------------------------------------------------------------
class Projector:
    """Computes and caches projections of token sets.

    Results are keyed by (model checksum, token-set digest, layer, method, parameters); a hit
    returns the very same :class:`Projection` object. Safe to call from one worker thread while
    another thread reads :meth:`cached`.

    Parameters
    ----------
    max_entries : projections (and PCA reductions) kept, least recently used dropped first
    """

    def __init__(self, max_entries: int = 64):
        self.max_entries = int(max_entries)
        self._cache: "OrderedDict[tuple, Any]" = OrderedDict()
        self._lock = threading.Lock()
        self.stats = {"hits": 0, "misses": 0}

    def _get(self, key: tuple) -> Any:
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
            return hit

    def _put(self, key: tuple, value: Any) -> None:
        with self._lock:
            self._cache[key] = value
            self._cache.move_to_end(key)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)

    def cached(self, tokens: TokenSet, layer: LayerSpec, method: str,
               params: Optional[UmapParams] = None, checksum: str = "") -> Optional[Projection]:
        """The cached projection, or None (does not count as a hit or miss)."""
        return self._get((checksum, tokens.digest, layer, method, params if method == "umap" else None))

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def _reduced(self, activations, tokens: TokenSet, layer: LayerSpec, dims: int,
                 checksum: str) -> PcaResult:
        key = (checksum, tokens.digest, layer, "pca-reduce", dims)
        hit = self._get(key)
        if hit is None:
            hit = pca(layer_features(activations, tokens, layer), dims)
            self._put(key, hit)
        return hit

    def pca(self, activations: Sequence[np.ndarray], tokens: TokenSet, layer: LayerSpec,
            checksum: str = "", dims: int = 50) -> Projection:
        """The PCA 2-D projection (the first two of ``dims`` components), cached."""
        key = (checksum, tokens.digest, layer, "pca", None)
        hit = self._get(key)
        if hit is not None:
            self.stats["hits"] += 1
            return hit
        self.stats["misses"] += 1
        t0 = time.perf_counter()
        red = self._reduced(activations, tokens, layer, dims, checksum)
        coords = _as_2d(red.coords)
        coords.setflags(write=False)
        ex = tuple(float(e) for e in red.explained[:2]) + (0.0,) * max(0, 2 - red.explained.size)
        proj = Projection(layer, "pca", coords, time.perf_counter() - t0, explained=ex[:2])
        self._put(key, proj)
        return proj

    def umap(self, activations: Sequence[np.ndarray], tokens: TokenSet, layer: LayerSpec,
             params: UmapParams = UmapParams(), checksum: str = "",
             state: Optional[TaskState] = None) -> Projection:
        """The UMAP 2-D projection (PCA to ``params.pca_dims`` first), cached."""
        key = (checksum, tokens.digest, layer, "umap", params)
        hit = self._get(key)
        if hit is not None:
            self.stats["hits"] += 1
            return hit
        self.stats["misses"] += 1
        t0 = time.perf_counter()
        red = self._reduced(activations, tokens, layer, params.pca_dims, checksum)
        check(state)
        coords = umap_2d(red.coords, params, state)
        coords.setflags(write=False)
        proj = Projection(layer, "umap", coords, time.perf_counter() - t0, params=params)
        self._put(key, proj)
        return proj

    def run(self, activations: Sequence[np.ndarray], tokens: TokenSet,
            layers: Sequence[LayerSpec], method: str = "umap",
            params: UmapParams = UmapParams(), checksum: str = "",
            state: Optional[TaskState] = None) -> List[Projection]:
        """Project every layer in turn; progress counts layers, cancel is checked between them."""
        if method not in ("pca", "umap"):
            raise InputError(f"unknown projection method {method!r} (use 'pca' or 'umap')")
        out: List[Projection] = []
        for i, layer in enumerate(layers):
            report(state, i, len(layers), f"{method.upper()} of {layer.name} "
                                          f"({len(tokens):,} tokens)")
            check(state)
            if method == "pca":
                out.append(self.pca(activations, tokens, layer, checksum, params.pca_dims))
            else:
                out.append(self.umap(activations, tokens, layer, params, checksum, state))
        report(state, len(layers), len(layers), f"{method.upper()} done")
        return out
