"""Candidate logits without copying a weight row per candidate: sampled matrix products.

A word-sense head scores each example only against its lemma's candidate senses:
``logits[h, b, m] = x[h, b] · W[cand[b, m], h]``. Gathering ``W[cand]`` first copies
``B × M × H × (E+1)`` floats per step (about 40 MB for SemCor's batches) and its gradient as
many again, although the arithmetic is tiny. Here the batch's distinct candidate rows ``U`` are
the columns of a sparse ``(B, U)`` pattern: the forward pass is a sampled dense–dense product
(``torch.sparse.sampled_addmm``, only the pattern's entries are computed) and the backward pass
two sparse–dense products, ``G @ W`` for the inputs and ``Gᵀ @ x`` for the rows, so nothing of
size ``B × M × E`` is ever made.
"""
from __future__ import annotations

import warnings

import torch

NEG = -1e9


def _csr(crow, col, values, size) -> torch.Tensor:
    # the patterns are built valid by construction, so torch's invariant checks are off
    return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


# torch says once per process that CSR tensors are "beta"; the three operations used here are
# tested against the dense computation (tests/engine/test_probe_sampled.py), so that notice is
# taken here instead of surfacing in the middle of a probe run
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    _csr(torch.zeros(2, dtype=torch.long), torch.zeros(1, dtype=torch.long), torch.zeros(1),
         (1, 1))


class CandidatePattern:
    """The candidates of a batch as sparse patterns over the batch's distinct classes.

    ``cand``: (B, M) class ids, −1 padding (an example's ids are distinct). ``rows``: the
    distinct class ids (U,), ascending. The pattern ``(B, U)`` lists each example's candidates
    in ascending column order (as CSR needs); ``pos`` puts the entries back at their (b, m)
    places; the transposed pattern ``(U, B)`` serves the rows' gradient.
    """

    def __init__(self, cand: torch.Tensor, n_classes: int):
        b, m = cand.shape
        self.shape = (b, m)
        valid = cand >= 0
        ids, inv = torch.unique(torch.where(valid, cand, n_classes), return_inverse=True)
        self.rows = ids[ids < n_classes]                                            # (U,)
        u = len(self.rows)
        key = torch.where(valid, inv, u)                         # padding sorts after every row
        cols, order = key.sort(dim=1)                                                # (B, M)
        keep = cols < u
        counts = keep.sum(dim=1)
        dev = cand.device
        self.crow = torch.cat([counts.new_zeros(1), counts.cumsum(0)])
        self.col = cols[keep]                                                        # (nnz,)
        self.pos = (torch.arange(b, device=dev)[:, None] * m + order)[keep]          # (nnz,)
        example = torch.repeat_interleave(torch.arange(b, device=dev), counts)       # (nnz,)
        self.perm = torch.argsort(self.col, stable=True)
        per_row = torch.bincount(self.col, minlength=u)
        self.crow_t = torch.cat([per_row.new_zeros(1), per_row.cumsum(0)])
        self.col_t = example[self.perm]
        self.n_rows = u

    @property
    def nnz(self) -> int:
        return int(self.col.shape[0])

    def matrix(self, values: torch.Tensor) -> torch.Tensor:
        """(B, U) CSR with ``values`` (nnz,) in pattern order."""
        return _csr(self.crow, self.col, values, (self.shape[0], self.n_rows))

    def matrix_t(self, values: torch.Tensor) -> torch.Tensor:
        """(U, B) CSR, the transpose of :meth:`matrix` (``values`` in pattern order)."""
        return _csr(self.crow_t, self.col_t, values[self.perm], (self.n_rows, self.shape[0]))

    def scatter(self, values: torch.Tensor) -> torch.Tensor:
        """(H, nnz) pattern-order values → (H, B, M) logits, ``NEG`` at padding."""
        h = values.shape[0]
        b, m = self.shape
        out = values.new_full((h, b * m), NEG).index_copy(1, self.pos, values)
        return out.view(h, b, m)


class _SampledLogits(torch.autograd.Function):
    """x (H, B, E) and rows w (U, H, E) → (H, nnz): x[h, b] · w[u, h] on the pattern."""

    @staticmethod
    def forward(ctx, x, w, pattern: CandidatePattern):
        ctx.save_for_backward(x, w)
        ctx.pattern = pattern
        zero = pattern.matrix(x.new_zeros(pattern.nnz))
        return torch.stack([torch.sparse.sampled_addmm(zero, x[h], w[:, h].t(), beta=0.0)
                            .values() for h in range(x.shape[0])])

    @staticmethod
    def backward(ctx, grad):
        x, w = ctx.saved_tensors
        pat: CandidatePattern = ctx.pattern
        grad = grad.contiguous()
        gx = gw = None
        if ctx.needs_input_grad[0]:
            gx = torch.stack([pat.matrix(grad[h]) @ w[:, h] for h in range(x.shape[0])])
        if ctx.needs_input_grad[1]:
            gw = torch.stack([pat.matrix_t(grad[h]) @ x[h] for h in range(x.shape[0])], dim=1)
        return gx, gw, None


def candidate_logits(x: torch.Tensor, w: torch.Tensor, pattern: CandidatePattern) -> torch.Tensor:
    """Logits (H, B, M) of inputs ``x`` (H, B, E) against the pattern's rows ``w`` (U, H, E)
    (``w[i]`` is class ``pattern.rows[i]``); differentiable in both; ``NEG`` at padding."""
    if pattern.nnz == 0:                                  # no example has a candidate
        return x.new_full((x.shape[0],) + pattern.shape, NEG)
    return pattern.scatter(_SampledLogits.apply(x.contiguous(), w, pattern))


__all__ = ["CandidatePattern", "candidate_logits"]
