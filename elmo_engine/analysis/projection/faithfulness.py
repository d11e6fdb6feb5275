"""How faithful a 2-D map is to the vectors it was made from: trustworthiness, continuity and
the share of each point's k nearest neighbours that the map keeps.

Trustworthiness (Venna & Kaski 2001) penalises the points that are among a point's k nearest
neighbours *on the map* but not in the vectors (neighbours the map invents), each by how far
down the vectors' ranking it really is; continuity is the same with the roles swapped (true
neighbours the map tears apart, by their rank on the map). Both are 1 for a perfect map; for
``n`` points and ``k`` neighbours (``k < n / 2``)::

    T(k) = 1 − 2 / (n k (2n − 3k − 1)) · Σ_i Σ_{j ∈ U_k(i)} (r(i, j) − k)

where ``U_k(i)`` are the map's neighbours of ``i`` that are not the vectors' and ``r(i, j)``
is the rank of ``j`` among ``i``'s neighbours in the vectors (1 = nearest). This equals
``sklearn.manifold.trustworthiness(X, Y, n_neighbors=k, metric=...)`` (a test checks it), but
is computed a block of rows at a time (at most 256, fewer for large ``n · k``), so memory
grows with ``n``, not ``n²``. Ties are broken by point index (a stable sort); scikit-learn's
order among exactly equal distances is unspecified, so the two can differ only on ties.

"kNN kept" is, per point, ``|N_k^vectors(i) ∩ N_k^map(i)| / k`` (Lee & Verleysen 2009's
neighbourhood preservation), and its mean over the points.

Above :data:`FAITHFULNESS_MAX_POINTS` points a seeded uniform sample is measured (the
neighbours are then those within the sample); :meth:`Faithfulness.caption` says so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check

if TYPE_CHECKING:
    from elmo_engine.analysis.projection.compute import Projection
    from elmo_engine.analysis.projection.tokens import TokenSet

#: the neighbourhood size of every map's caption
FAITHFULNESS_K = 10
#: above this many points a seeded sample of this many is measured (the cost is ~n² · D)
FAITHFULNESS_MAX_POINTS = 5000
#: the sample's seed
FAITHFULNESS_SEED = 0
BLOCK = 256                     # rows of the (block, n) distance matrices, at most …
BLOCK_CELLS = 1 << 24           # … and block × k × n at most this (the rank comparisons)


@dataclass(frozen=True)
class Faithfulness:
    """How faithful one map is.

    Attributes
    ----------
    trustworthiness, continuity : T(k) and C(k) in [0, 1] (1: no neighbour invented / torn)
    knn_kept : the mean share of a point's ``k`` nearest neighbours in the vectors that are
        also among its ``k`` nearest on the map
    per_point : ``(n_total,)`` float32: that share per point, NaN for the points outside the
        measured sample
    k : the neighbourhood size used (the one asked for, lowered below ``n / 2`` for few points)
    n, n_total : points measured and points on the map
    seed : the sample's seed when ``n < n_total``, else None
    metric : the vectors' distance ("cosine" or "euclidean"); the map's is Euclidean
    """

    trustworthiness: float
    continuity: float
    knn_kept: float
    per_point: np.ndarray
    k: int
    n: int
    n_total: int
    seed: Optional[int]
    metric: str

    def caption(self) -> str:
        """``T=0.93 C=0.95 kNN kept 41 % (k=10, n=2,000)``; a sample says so
        (``n=5,000 of 20,000, seed 0``)."""
        n = f"n={self.n:,}" + (f" of {self.n_total:,}, seed {self.seed}"
                               if self.n < self.n_total else "")
        return (f"T={self.trustworthiness:.2f} C={self.continuity:.2f} "
                f"kNN kept {100 * self.knn_kept:.0f} % (k={self.k}, {n})")

    def caption_lines(self) -> Tuple[str, str]:
        """:meth:`caption` in two lines for a narrow figure panel: the numbers, then k and n."""
        numbers, _, rest = self.caption().partition(" (")
        return numbers, "(" + rest

    def to_dict(self) -> dict:
        """The numbers as JSON values (not the per-point shares)."""
        return {"trustworthiness": self.trustworthiness, "continuity": self.continuity,
                "knn_kept": self.knn_kept, "k": self.k, "n": self.n, "n_total": self.n_total,
                "sample_seed": self.seed, "metric": self.metric}


def _prepared(x: np.ndarray, metric: str) -> np.ndarray:
    """Rows ready for blocked distances: unit rows for cosine (a zero row stays zero)."""
    if metric == "cosine":
        norms = np.linalg.norm(x, axis=1, keepdims=True)
        return x / np.where(norms > 0, norms, 1.0)
    return x


def _distances(y: np.ndarray, sq: np.ndarray, rows: slice, metric: str) -> np.ndarray:
    """``(b, n)`` distances from ``y[rows]`` to every row of ``y`` (ranked only, so squared
    Euclidean is enough; cosine is ``1 − cos``)."""
    g = y[rows] @ y.T                                                    # (b, n)
    if metric == "cosine":
        return 1.0 - g
    return sq[rows, None] + sq[None, :] - 2.0 * g


def _nearest(d: np.ndarray, start: int, k: int) -> np.ndarray:
    """``(b, n)`` bool: the ``k`` nearest columns of each row of the distances ``d (b, n)``,
    the row's own point excluded and ties broken by column index (as a stable sort would).
    ``d``'s self entries are set to +inf in place."""
    b, n = d.shape
    d[np.arange(b), start + np.arange(b)] = np.inf                       # never its own neighbour
    kth = np.partition(d, k - 1, axis=1)[:, k - 1:k]                     # (b, 1) k-th distance
    less = d < kth
    tied = d == kth
    room = k - less.sum(axis=1, keepdims=True)                           # (b, 1) ties to take
    return less | (tied & (np.cumsum(tied, axis=1) <= room))


def _rank_of(d: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``(b, m)`` rank (1 = nearest) of the columns ``cols (b, m)`` in each row of ``d (b, n)``
    (self entries +inf), ties broken by column index."""
    vals = np.take_along_axis(d, cols, axis=1)[:, :, None]              # (b, m, 1)
    before = np.arange(d.shape[1])[None, None, :] < cols[:, :, None]    # (b, m, n)
    dd = d[:, None, :]
    return 1 + (dd < vals).sum(axis=2) + ((dd == vals) & before).sum(axis=2)


def _penalty(d: np.ndarray, mine: np.ndarray, theirs: np.ndarray, k: int) -> int:
    """Σ (r − k) over the columns in ``theirs`` but not in ``mine``, ``r`` their rank in
    ``d``: every row has exactly ``k`` of ``theirs``, so they are gathered as ``(b, k)``."""
    cols = np.nonzero(theirs)[1].reshape(len(d), k)                      # (b, k), row order
    missing = ~np.take_along_axis(mine, cols, axis=1)                    # (b, k)
    if not missing.any():
        return 0
    return int((_rank_of(d, cols) - k)[missing].sum())


def neighbourhood_ranks(x: np.ndarray, y: np.ndarray, k: int, metric: str = "cosine",
                        state: Optional[TaskState] = None):
    """The sums behind T and C and the per-point kept share of ``x (n, D)`` mapped to
    ``y (n, 2)``: ``(t_sum, c_sum, kept (n,))`` (see the module docstring)."""
    n = x.shape[0]
    xp = _prepared(np.asarray(x), metric)
    yp = np.asarray(y, np.float64)
    sqx = np.einsum("ij,ij->i", xp, xp)                                   # (n,)
    sqy = np.einsum("ij,ij->i", yp, yp)
    t_sum = c_sum = 0
    kept = np.empty(n, np.float64)
    block = int(min(BLOCK, max(8, BLOCK_CELLS // (k * n))))
    for start in range(0, n, block):
        check(state)
        rows = slice(start, min(n, start + block))
        dx = _distances(xp, sqx, rows, metric)                           # (b, n)
        dy = _distances(yp, sqy, rows, "euclidean")
        in_x, in_y = _nearest(dx, start, k), _nearest(dy, start, k)
        t_sum += _penalty(dx, in_x, in_y, k)      # the map's neighbours, ranked in the vectors
        c_sum += _penalty(dy, in_y, in_x, k)      # the vectors' neighbours, ranked on the map
        kept[rows] = (in_x & in_y).sum(axis=1) / k
    return t_sum, c_sum, kept


def _score(total: int, n: int, k: int) -> float:
    return float(1.0 - total * (2.0 / (n * k * (2.0 * n - 3.0 * k - 1.0))))


def trustworthiness(x: np.ndarray, y: np.ndarray, k: int = FAITHFULNESS_K,
                    metric: str = "euclidean") -> float:
    """T(k) of ``y (n, 2)`` as a map of ``x (n, D)`` (Venna & Kaski 2001), as
    ``sklearn.manifold.trustworthiness(x, y, n_neighbors=k, metric=metric)``; needs
    ``k < n / 2``."""
    n = _check(x, y, k)
    return _score(neighbourhood_ranks(x, y, k, metric)[0], n, k)


def continuity(x: np.ndarray, y: np.ndarray, k: int = FAITHFULNESS_K,
               metric: str = "euclidean") -> float:
    """C(k): trustworthiness with the roles of the vectors ``x`` and the map ``y`` swapped
    (a true neighbour the map tears apart is penalised by its rank on the map)."""
    n = _check(x, y, k)
    return _score(neighbourhood_ranks(x, y, k, metric)[1], n, k)


def _check(x: np.ndarray, y: np.ndarray, k: int) -> int:
    n = x.shape[0]
    if y.shape[0] != n:
        raise InputError(f"{n} vectors but {y.shape[0]} map points")
    if not 1 <= k < n / 2:
        raise InputError(f"k ({k}) must be at least 1 and less than n / 2 ({n / 2:g})")
    return n


def faithfulness(x: np.ndarray, y: np.ndarray, k: int = FAITHFULNESS_K, metric: str = "cosine",
                 max_points: int = FAITHFULNESS_MAX_POINTS, seed: int = FAITHFULNESS_SEED,
                 state: Optional[TaskState] = None) -> Optional[Faithfulness]:
    """T(k), C(k) and the kNN kept of the map ``y (N, 2)`` of the vectors ``x (N, D)``.

    Above ``max_points`` a seeded uniform sample of ``max_points`` is measured. ``k`` is
    lowered to ``ceil(n / 2) − 1`` for few points; None below 5 points (nothing to measure).
    Cost: about ``n² · D`` multiply-adds and ``2 n² log n`` for the rankings, a ``(256, n)``
    block at a time.
    """
    x = np.asarray(x)
    y = np.asarray(y)
    n_total = x.shape[0]
    if y.shape != (n_total, 2):
        raise InputError(f"a map of shape {y.shape} for {n_total} vectors")
    if metric not in ("cosine", "euclidean"):
        raise InputError(f"metric must be 'cosine' or 'euclidean', got {metric!r}")
    if n_total < 5:
        return None
    keep = np.arange(n_total)
    sampled = n_total > max_points
    if sampled:
        keep = np.sort(np.random.default_rng(seed).choice(n_total, max_points, replace=False))
    n = len(keep)
    k_used = max(1, min(int(k), (n + 1) // 2 - 1))
    t_sum, c_sum, kept = neighbourhood_ranks(x[keep], y[keep], k_used, metric, state)
    per_point = np.full(n_total, np.nan, np.float32)
    per_point[keep] = kept
    per_point.setflags(write=False)
    return Faithfulness(_score(t_sum, n, k_used), _score(c_sum, n, k_used), float(kept.mean()),
                        per_point, k_used, n, n_total, seed if sampled else None, metric)


def map_faithfulness(activations: Sequence[np.ndarray], tokens: "TokenSet", projection: "Projection",
                     k: int = FAITHFULNESS_K, metric: str = "cosine",
                     max_points: int = FAITHFULNESS_MAX_POINTS, seed: int = FAITHFULNESS_SEED,
                     state: Optional[TaskState] = None) -> Optional[Faithfulness]:
    """:func:`faithfulness` of one drawn map: ``projection.coords`` against the layer's own
    ``(N, D)`` vectors (:func:`~elmo_engine.analysis.projection.compute.layer_features`, not the
    PCA reduction UMAP was fitted on), ``metric`` in the vectors (the UMAP's, cosine by
    default). What the Projection view's captions and ``project`` print."""
    from elmo_engine.analysis.projection.compute import layer_features

    x = layer_features(activations, tokens, projection.layer)            # (N, D)
    return faithfulness(x, projection.coords, k, metric, max_points, seed, state)


__all__ = ["FAITHFULNESS_K", "FAITHFULNESS_MAX_POINTS", "FAITHFULNESS_SEED", "Faithfulness",
           "continuity", "faithfulness", "map_faithfulness", "neighbourhood_ranks", "trustworthiness"]
