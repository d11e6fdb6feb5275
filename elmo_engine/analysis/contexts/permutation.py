"""Is within-group similarity higher than between-group similarity by chance? A permutation test.

The statistic is ``within − between``: the mean cosine over pairs ``i ≠ j`` in the same group
minus the mean over pairs in different groups (:func:`elmo_engine.analysis.contexts.compare.
group_similarity`), computed on one similarity matrix per view (layer 0 … L, mix). Under the null
hypothesis the group labels are exchangeable, so every relabelling of the labelled occurrences
that keeps the group sizes is as likely as the observed one. The one-sided p-value is the share
of relabellings whose statistic is at least the observed one:

* **exact** when the number of distinct relabellings ``n! / (n_1! n_2! …)`` is at most
  :data:`EXACT_LIMIT` (e.g. 252 for 5 + 5 "bank" sentences, 34,650 for 4 + 4 + 4 "play"):
  every relabelling is enumerated, the observed one included, ``p = #{T ≥ T_obs} / #relabellings``;
* otherwise **Monte Carlo** with :data:`N_RANDOM` random relabellings (seed :data:`SEED`, so the
  same input gives the same p), ``p = (1 + #{T ≥ T_obs}) / (1 + N_RANDOM)``.

Occurrences without a group take no part. The same relabellings are used for every view.
Because the group sizes are fixed, the numbers of within and between pairs are constant, and
``T`` is an increasing function of the sum of within-group cosines, which is what is computed
(one matrix product per view and batch of relabellings).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import List, Sequence

import numpy as np

EXACT_LIMIT = 50_000
N_RANDOM = 9_999
SEED = 0
_BATCH = 2_000


@dataclass(frozen=True)
class PermutationResult:
    """``p`` ``(K,)`` one-sided p-values (NaN where the test is undefined); ``n`` relabellings
    used; ``exact`` whether they were all enumerated."""

    p: np.ndarray
    n: int
    exact: bool

    def describe(self) -> str:
        if self.n == 0:
            return "no test (label at least two groups, one with two occurrences)"
        how = "all" if self.exact else "random"
        return (f"one-sided permutation test of within − between > 0, {how} {self.n:,} "
                "relabellings of the groups")


def n_relabellings(sizes: Sequence[int]) -> int:
    """Distinct assignments of the labels to the occurrences: ``n! / Π n_g!``."""
    out = math.factorial(sum(sizes))
    for s in sizes:
        out //= math.factorial(s)
    return out


def all_relabellings(sizes: Sequence[int]) -> np.ndarray:
    """Every distinct assignment of group ids ``0 … G-1`` (group g ``sizes[g]`` times) to
    ``sum(sizes)`` places: ``(n_relabellings, n)`` int."""
    n = sum(sizes)
    rows: List[np.ndarray] = [np.full(n, -1, dtype=np.int64)]
    for g, size in enumerate(sizes[:-1]):
        nxt = []
        for row in rows:
            free = np.flatnonzero(row < 0)
            for pick in itertools.combinations(free, size):
                r = row.copy()
                r[list(pick)] = g
                nxt.append(r)
        rows = nxt
    out = np.stack(rows)
    out[out < 0] = len(sizes) - 1
    return out


def _within_sums(mats: np.ndarray, labels: np.ndarray, n_groups: int) -> np.ndarray:
    """Sum of ``S[i, j]`` over ordered pairs in the same group (diagonal included), per
    relabelling and view: ``(P, K)``."""
    p, m = labels.shape
    onehot = np.zeros((p, n_groups, m))
    onehot[np.arange(p)[:, None], labels, np.arange(m)[None, :]] = 1.0
    flat = onehot.reshape(p * n_groups, m)
    out = np.empty((p, mats.shape[0]))
    for k, s in enumerate(mats):
        out[:, k] = ((flat @ s) * flat).sum(axis=1).reshape(p, n_groups).sum(axis=1)
    return out


def group_permutation_test(mats: np.ndarray, groups: Sequence[str]) -> PermutationResult:
    """The permutation test of ``within − between`` for each matrix of ``mats`` ``(K, n, n)``
    with the group label of each occurrence (``""``: ungrouped)."""
    mats = np.asarray(mats, dtype=np.float64)
    k_views = mats.shape[0]
    idx = [i for i, g in enumerate(groups) if g]
    names = sorted({groups[i] for i in idx}, key=lambda g: [groups[i] for i in idx].index(g))
    sizes = [sum(1 for i in idx if groups[i] == g) for g in names]
    nan = PermutationResult(np.full(k_views, math.nan), 0, False)
    if len(names) < 2 or max(sizes, default=0) < 2:
        return nan
    sub = mats[:, idx][:, :, idx]                                    # (K, m, m)
    observed = np.array([names.index(groups[i]) for i in idx])
    total = n_relabellings(sizes)
    exact = total <= EXACT_LIMIT
    if exact:
        labels = all_relabellings(sizes)
    else:
        rng = np.random.default_rng(SEED)
        labels = np.stack([rng.permutation(observed) for _ in range(N_RANDOM)])
    obs = _within_sums(sub, observed[None, :], len(names))[0]       # (K,)
    ge = np.zeros(k_views)
    tol = 1e-9 * max(1.0, float(np.abs(sub).sum()))
    for a in range(0, len(labels), _BATCH):
        ws = _within_sums(sub, labels[a:a + _BATCH], len(names))
        ge += (ws >= obs[None, :] - tol).sum(axis=0)
    p = ge / len(labels) if exact else (1.0 + ge) / (1.0 + len(labels))
    return PermutationResult(p, int(len(labels)), exact)


__all__ = ["EXACT_LIMIT", "N_RANDOM", "PermutationResult", "SEED", "all_relabellings",
           "group_permutation_test", "n_relabellings"]
