"""Largest eigenvalues and maximum explainable variance of many small matrices at once.

Used by :mod:`.contextuality` for Ethayarajh's (2019) maximum explainable variance
``MEV(w) = σ_1² / Σσ_i²`` of every word's occurrence matrix: thousands of matrices of a few to a
few hundred rows, of which only the top eigenvalue of the Gram matrix is needed.
"""
from __future__ import annotations

import numpy as np

_TINY = 1e-30

#: matrices up to this size get an exact LAPACK eigen-decomposition
EXACT_EIG = 48


def mev_of_stack(x: np.ndarray, centre: bool = False) -> np.ndarray:
    """MEV (``σ_1² / Σσ_i²``) of each ``(m, w)`` occurrence matrix in a ``(B, m, w)`` stack.

    Small matrices: the eigenvalues of their Gram matrix (exact, float64). Larger ones: power
    iteration on ``XᵀX`` without forming it (see :func:`top_eigenvalues` for the stopping rule).
    """
    x = np.asarray(x, np.float64)
    if centre:
        x = x - x.mean(axis=1, keepdims=True)
    total = np.einsum("bij,bij->b", x, x)
    b, m, w = x.shape
    if min(m, w) <= EXACT_EIG:
        g = np.matmul(x, x.transpose(0, 2, 1)) if m <= w else np.matmul(x.transpose(0, 2, 1), x)
        top = np.linalg.eigvalsh(g)[:, -1]
    else:
        top = _power(lambda todo, v: np.matmul(
            x[todo].transpose(0, 2, 1), np.matmul(x[todo], v[..., None]))[..., 0],
            x.sum(axis=1), lambda todo: np.linalg.eigvalsh(
                np.matmul(x[todo], x[todo].transpose(0, 2, 1)))[:, -1])
    return top / np.where(total > 0, total, np.nan)


def top_eigenvalues(g: np.ndarray) -> np.ndarray:
    """The largest eigenvalue of each symmetric positive semi-definite matrix in ``(B, m, m)``.

    Up to :data:`EXACT_EIG` rows LAPACK's ``eigvalsh``; larger ones batched power iteration
    (:func:`_power`), with LAPACK for any that does not converge.
    """
    g = np.asarray(g, np.float64)
    if g.shape[0] == 0:
        return np.zeros(0)
    if g.shape[1] <= EXACT_EIG:
        return np.linalg.eigvalsh(g)[:, -1]
    return _power(lambda todo, v: np.matmul(g[todo], v[..., None])[..., 0], g.sum(axis=2),
                  lambda todo: np.linalg.eigvalsh(g[todo])[:, -1])


def _power(apply, start: np.ndarray, exact, tol: float = 1e-10, max_iter: int = 300) -> np.ndarray:
    """Batched power iteration for the top eigenvalue of PSD operators ``v ↦ apply(todo, v)``.

    Starts from ``start`` (row sums: the dominant direction of anisotropic vectors) plus a little
    seeded noise (never orthogonal to the top eigenvector), and stops a matrix once the
    Rayleigh quotient ``ρ`` has residual ``‖Av − ρv‖ ≤ tol·ρ``: then ``ρ`` is within ``tol·ρ`` of
    an eigenvalue, and power iteration approaches the largest. Occurrence vectors of contextual
    layers share a dominant direction, so this takes a few dozen products instead of an
    ``O(m³)`` decomposition. Matrices not converged after ``max_iter`` steps get ``exact(todo)``.
    """
    b, m = start.shape
    scale = np.abs(start).max(axis=1, keepdims=True) + _TINY
    v = start + 1e-3 * scale * np.random.default_rng(0).standard_normal((b, m))
    v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), _TINY)
    rho = np.zeros(b)
    todo = np.arange(b)
    for _ in range(max_iter):
        w = apply(todo, v[todo])                                                      # (T, m)
        r = np.einsum("ij,ij->i", v[todo], w)
        resid = np.linalg.norm(w - r[:, None] * v[todo], axis=1)
        rho[todo] = r
        v[todo] = w / np.maximum(np.linalg.norm(w, axis=1, keepdims=True), _TINY)
        todo = todo[resid > tol * np.maximum(r, _TINY)]
        if not len(todo):
            return rho
    rho[todo] = exact(todo)
    return rho


__all__ = ["EXACT_EIG", "mev_of_stack", "top_eigenvalues"]
