"""Per-layer features, PCA and exact nearest neighbours; the settings and result types.

Pipeline for one layer (or a scalar mix of layers) of a :class:`TokenSet`:

1. gather the ``(N, D)`` features from the per-sentence activations ``(L+1, n, D)``;
2. PCA to ``pca_dims`` (50) dimensions — its first two axes are the instant 2-D fallback;
3. drop exact duplicate rows (the context-free layer 0 gives every occurrence of a word the same
   vector), find the exact cosine k nearest neighbours with NumPy (blocked matrix products), and
   give them to umap-learn as ``precomputed_knn``; map the result back to every point.

Step 3 lives in :mod:`elmo_engine.analysis.projection.umapfit`; the cache in
:mod:`elmo_engine.analysis.projection.projector`.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Optional, Sequence, Tuple

import numpy as np

from elmo_engine.analysis.contexts.compare import layer_stats
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check
from elmo_engine.analysis.projection.tokens import TokenSet

#: UMAP needs at least this many distinct points; below it only PCA is offered
MIN_UMAP_POINTS = 10
KNN_BLOCK = 1024                       # query rows per block of the exact kNN (block × N floats)


@dataclass(frozen=True)
class LayerSpec:
    """One layer (``index``) or a scalar mix of all layers (``weights``, normalised to sum 1).

    The mix is ``Σ_k w_k h_k``; ELMo's γ only scales it, which changes neither the cosine UMAP
    nor the PCA picture, so it is left out. With ``layer_norm`` every layer is first normalised
    by its mean and standard deviation over every token of the projected sentences — the rule
    the Contexts view and ``contexts`` use
    (:func:`elmo_engine.analysis.contexts.compare.layer_stats`, AllenNLP's
    ``ScalarMix(do_layer_norm=True)``), so that layer 0's larger norm does not swamp the others.
    """

    index: Optional[int] = None
    weights: Optional[Tuple[float, ...]] = None
    layer_norm: bool = False

    @classmethod
    def single(cls, index: int) -> "LayerSpec":
        if index < 0:
            raise InputError(f"layer index must be >= 0, got {index}")
        return cls(index=int(index))

    @classmethod
    def mix(cls, weights: Sequence[float], layer_norm: bool = False) -> "LayerSpec":
        from elmo_engine.model.mix import plain_weights

        try:
            w = plain_weights(weights)
        except ValueError as e:
            raise InputError(str(e)) from None
        return cls(weights=tuple(float(x) for x in w), layer_norm=bool(layer_norm))

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
    """UMAP settings. ``random_state=None`` runs multi-threaded but is not reproducible.

    ``n_epochs=None`` keeps umap's rule (500 up to 10,000 points, 200 above); the layout's time
    is proportional to it.
    """

    n_neighbors: int = 15
    min_dist: float = 0.1
    random_state: Optional[int] = 42
    pca_dims: int = 50
    metric: str = "cosine"
    n_epochs: Optional[int] = None

    def __post_init__(self) -> None:
        if not 2 <= self.n_neighbors <= 200:
            raise InputError(f"n_neighbors must be in 2..200, got {self.n_neighbors}")
        if not 0.0 <= self.min_dist <= 1.0:
            raise InputError(f"min_dist must be in 0..1, got {self.min_dist}")
        if self.pca_dims < 2:
            raise InputError(f"pca_dims must be >= 2, got {self.pca_dims}")
        if self.n_epochs is not None and not 10 <= self.n_epochs <= 5000:
            raise InputError(f"n_epochs must be in 10..5000, got {self.n_epochs}")
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


# ---- a map that carries no map (issue 29) --------------------------------------------------
#: a layer whose tokens (more than this many) fall on at most this many points is shown as a
#: note, not as a map: layer 0 is context-free, so all occurrences of one word are one point
FEW_PLACES = 5


def collapsed_note(p: Projection, words: Sequence[str]) -> Optional[str]:
    """The note that replaces the map of ``p`` when its ``N`` tokens (``words``: their
    spellings) fall on :data:`FEW_PLACES` points or fewer, or ``None`` when it is a map.

    ``layer 0: the 450 tokens fall on 2 points, one per spelling (bank 445, Bank 5): the
    character CNN sees only the word, so there is nothing to map.`` (layer 0 is context-free)."""
    coords = np.asarray(p.coords, dtype=np.float64)                     # (N, 2)
    n = len(coords)
    if n <= FEW_PLACES:
        return None
    k = len(np.unique(np.round(coords, 4), axis=0))                     # distinct points
    if k > FEW_PLACES:
        return None
    counts = Counter(words)
    cnn = "the character CNN sees only the word, so there is nothing to map."
    if p.layer.index == 0 and len(counts) == k:
        spelled = ", ".join(f"{w} {c:,}" for w, c in counts.most_common())
        if k == 1:
            return f"{p.layer.name}: all {n:,} tokens ({spelled}) have the same vector: {cnn}"
        return (f"{p.layer.name}: the {n:,} tokens fall on {k} points, one per spelling "
                f"({spelled}): {cnn}")
    if k == 1:
        return f"{p.layer.name}: all {n:,} tokens have the same vector, so there is nothing to map."
    return f"{p.layer.name}: the {n:,} tokens fall on {k} points, so there is nothing to map."


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
    w, offset = None, None
    if layer.weights is not None:
        w = np.asarray(layer.weights, np.float64)
        if layer.layer_norm:
            # Σ w_k (h_k − μ_k) / σ_k = Σ (w_k / σ_k) h_k − Σ w_k μ_k / σ_k
            stats = layer_stats(activations)                             # (L+1, 2)
            offset = np.float32(np.sum(w * stats[:, 0] / stats[:, 1]))
            w = w / stats[:, 1]
        w = w.astype(np.float32)
    for rows in np.split(order, bounds) if len(order) else []:
        s = int(tokens.sentence[rows[0]])
        act = activations[s]
        if act is None:
            raise InputError(f"sentence {s} has no activations yet")
        pos = tokens.position[rows]
        if w is None:
            out[rows] = act[layer.index, pos]                            # (r, D)
        else:
            out[rows] = np.tensordot(w, act[:, pos], axes=1)             # (L+1,) · (L+1, r, D)
    if offset is not None:
        out -= offset
    return out


@dataclass(frozen=True)
class PcaResult:
    """``coords (N, k)``, ``components (k, D)``, ``mean (D,)``, ``explained (k,)`` ratios."""

    coords: np.ndarray
    components: np.ndarray
    mean: np.ndarray
    explained: np.ndarray


def pca(x: np.ndarray, n_components: int) -> PcaResult:
    """Principal components of ``x (N, D)`` (k = min(n_components, N, D)), with scikit-learn.

    Fitted in float64: the ``(D, D)`` covariance is eigen-decomposed when there are more points
    than dimensions (``svd_solver="covariance_eigh"``), else the centred data is decomposed by
    SVD (``"full"``); LAPACK runs single-threaded (see :func:`_one_blas_thread`). Signs follow
    scikit-learn's convention, which makes the result deterministic: the largest-magnitude
    loading of each component is positive. Components beyond the data's rank are set to zero
    (with their coordinates and explained variance), where an SVD would give arbitrary
    directions; so are all of them when every point is the same. Against the NumPy
    eigen-decomposition this replaced, the coordinates agree to float32 rounding (at most 1.5e-9
    of their largest value, measured on 40–20,000 points of 256–1024 dimensions).
    """
    from sklearn.decomposition import PCA

    x = np.asarray(x, dtype=np.float32)
    n, d = x.shape
    if n < 2:
        raise InputError(f"PCA needs at least 2 points, got {n}")
    k = max(1, min(n_components, n, d))
    if not (x != x[0]).any():                    # every point the same: no variance to explain
        return PcaResult(np.zeros((n, k), np.float32), np.zeros((k, d), np.float32),
                         x[0].copy(), np.zeros(k))
    model = PCA(n_components=k, svd_solver="covariance_eigh" if n > d else "full")
    with _one_blas_thread():
        coords = model.fit_transform(x.astype(np.float64))              # (N, k)
    var = model.explained_variance_                                      # (k,)
    live = var > 1e-12 * max(float(var[0]), 1e-300)                      # beyond the rank: 0
    comps = np.where(live[:, None], model.components_, 0.0)             # (k, D)
    coords[:, ~live] = 0.0
    explained = np.where(live, model.explained_variance_ratio_, 0.0)
    return PcaResult(coords.astype(np.float32), comps.astype(np.float32),
                     model.mean_.astype(np.float32), explained.astype(np.float64))


def _as_2d(coords: np.ndarray) -> np.ndarray:
    """``(N, k)`` → ``(N, 2)``; a single component gets a zero second axis."""
    if coords.shape[1] >= 2:
        return np.ascontiguousarray(coords[:, :2])
    return np.hstack([coords, np.zeros_like(coords)])


# ---- neighbours ------------------------------------------------------------------------------
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
    with _one_blas_thread():
        for start in range(0, n, KNN_BLOCK):
            _knn_block(y, sq, start, k, metric, idx, dist, state)
    return idx, dist


def _one_blas_thread():
    """Single-threaded BLAS/LAPACK: on a busy 2-core machine OpenBLAS's threads fight for the
    cores (a 400×400 ``eigh`` took 2–3 s instead of 0.08 s; the kNN ran 2× slower)."""
    from threadpoolctl import threadpool_limits
    return threadpool_limits(1)


def _knn_block(y: np.ndarray, sq: Optional[np.ndarray], start: int, k: int, metric: str,
               idx: np.ndarray, dist: np.ndarray, state: Optional[TaskState]) -> None:
    """Fill rows ``start:start+KNN_BLOCK`` of ``idx``/``dist`` (see :func:`exact_knn`)."""
    check(state)
    n = y.shape[0]
    stop = min(n, start + KNN_BLOCK)
    rows = np.arange(stop - start)
    g = y[start:stop] @ y.T                                              # (b, N)
    if metric == "cosine":
        d = 1.0 - g
    else:
        assert sq is not None                                            # given for euclidean
        d = np.maximum(sq[start:stop, None] + sq[None, :] - 2.0 * g, 0.0)
    d[rows, start + rows] = -1.0                                         # self first
    if k < n:
        part = np.argpartition(d, k - 1, axis=1)[:, :k]                  # (b, k) unordered
    else:
        part = np.tile(np.arange(n), (len(rows), 1))
    pd = np.take_along_axis(d, part, axis=1)
    o = np.argsort(pd, axis=1, kind="stable")
    idx[start:stop] = np.take_along_axis(part, o, axis=1)
    pd = np.take_along_axis(pd, o, axis=1)
    pd[:, 0] = 0.0
    dist[start:stop] = np.sqrt(pd) if metric == "euclidean" else np.clip(pd, 0.0, 2.0)
