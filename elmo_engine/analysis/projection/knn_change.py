"""The tokens whose k-nearest neighbourhood changes most between two layers (issue 42).

For each token, its ``k`` nearest neighbours (cosine, exact, the token itself left out) in the
high-dimensional vectors of layer A and of layer B; the change is one minus the Jaccard index of
the two sets, ``1 − |A ∩ B| / |A ∪ B|``: 0 when the token keeps every neighbour, 1 when it keeps
none. This is the neighbourhood comparison of Emblaze (Sivaraman et al., "Emblaze: Illuminating
Machine Learning Representations through Interactive Comparison of Embedding Spaces", IUI 2022),
computed in the vectors, not in a 2-D map. Exact duplicates (layer 0 gives every occurrence of a
word one vector) are tied at distance 0: which of them fill the k places is decided by the
exact search (deterministically, not by meaning), so at layer 0 a frequent word's neighbours are
mostly its own other occurrences — read a change from layer 0 with that in mind.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report
from elmo_engine.analysis.projection.compute import exact_knn
from elmo_engine.analysis.projection.tokens import TokenSet


def neighbour_sets(x: np.ndarray, k: int, state: Optional[TaskState] = None) -> np.ndarray:
    """The ``k`` nearest neighbours of every row of ``x (N, D)`` by cosine, itself left out:
    ``(N, k)`` int32 indices, nearest first."""
    n = x.shape[0]
    if not 1 <= k <= n - 1:
        raise InputError(f"k must be in 1..{n - 1} for {n} tokens, got {k}")
    idx, _dist = exact_knn(x, k + 1, "cosine", state)                    # (N, k+1), self first
    out = np.empty((n, k), np.int32)
    for i in range(n):                        # drop the token itself, wherever a tie put it
        row = idx[i][idx[i] != i]
        out[i] = row[:k]
    return out


def jaccard_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise Jaccard index of two ``(N, k)`` neighbour sets: ``(N,)`` float64."""
    if a.shape[0] != b.shape[0]:
        raise InputError(f"{a.shape[0]} and {b.shape[0]} rows")
    out = np.empty(a.shape[0], np.float64)
    for i in range(a.shape[0]):
        sa, sb = set(a[i].tolist()), set(b[i].tolist())
        union = len(sa | sb)
        out[i] = len(sa & sb) / union if union else 1.0
    return out


@dataclass(frozen=True)
class KnnChange:
    """One token's change of neighbourhood between two layers.

    Attributes
    ----------
    index : the point in the token set
    word, context : its token and the token in its sentence
    jaccard : Jaccard index of its k-NN sets in the two layers (0: no neighbour kept)
    lost, gained : the neighbours' words only in layer A's set, only in layer B's
    """

    index: int
    word: str
    context: str
    jaccard: float
    lost: Tuple[str, ...]
    gained: Tuple[str, ...]


@dataclass(frozen=True)
class KnnChanges:
    """Every token's Jaccard (``(N,)``) between layers ``a`` and ``b`` (names), ``k``, and the
    ``top`` tokens that change most (lowest Jaccard first; ties by index)."""

    a: str
    b: str
    k: int
    jaccard: np.ndarray
    top: Tuple[KnnChange, ...]

    @property
    def mean(self) -> float:
        return float(self.jaccard.mean()) if self.jaccard.size else float("nan")


def knn_changes(xa: np.ndarray, xb: np.ndarray, tokens: TokenSet, k: int = 10, top: int = 50,
                names: Tuple[str, str] = ("A", "B"), state: Optional[TaskState] = None
                ) -> KnnChanges:
    """The change of every token's ``k``-NN set between the vectors ``xa (N, Da)`` and
    ``xb (N, Db)`` of ``tokens``, and the ``top`` tokens that change most."""
    n = len(tokens)
    if xa.shape[0] != n or xb.shape[0] != n:
        raise InputError(f"{xa.shape[0]} and {xb.shape[0]} vectors for {n} tokens")
    report(state, 0, 2, f"{k} nearest neighbours in {names[0]}")
    na = neighbour_sets(xa, k, state)
    check(state)
    report(state, 1, 2, f"{k} nearest neighbours in {names[1]}")
    nb = neighbour_sets(xb, k, state)
    jac = jaccard_rows(na, nb)
    order = np.argsort(jac, kind="stable")[:max(0, top)]
    rows: List[KnnChange] = []
    for i in order.tolist():
        sa, sb = set(na[i].tolist()), set(nb[i].tolist())
        rows.append(KnnChange(i, tokens.words[i], tokens.context(i, 6), float(jac[i]),
                              _words(tokens, [j for j in na[i].tolist() if j not in sb]),
                              _words(tokens, [j for j in nb[i].tolist() if j not in sa])))
    report(state, 2, 2, "neighbourhoods compared")
    return KnnChanges(names[0], names[1], k, jac, tuple(rows))


def _words(tokens: TokenSet, idx: Sequence[int]) -> Tuple[str, ...]:
    return tuple(tokens.words[j] for j in idx)
