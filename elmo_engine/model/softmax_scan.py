"""One pass over a large softmax, block of words by block of words (:class:`~.softmax.Softmax`).

For R rows of top-layer outputs ``h`` (R, P) and their targets, :func:`scan` computes what the LM
views need without ever holding the (R, V) logit matrix: for V = 793,471 words and a 25-token
sentence (R = 50) that matrix alone would be 159 MB of float32, and a float32 copy of a float16 W
1.6 GB. Logits are made ``chunk`` words at a time (W's block converted to float32 on the fly) and
folded into running statistics:

* ``log Z`` by the streaming log-sum-exp (running max ``m``, ``s = Σ exp(l − m)``);
* the entropy ``H = log Z − E_p[l]`` with ``E_p[l] = Σ exp(l − m)·l / s``;
* the rank of the target: 1 + the number of words with a strictly larger logit;
* the top-k (running merge of each block's top-k);
* for pairs of rows (a forward and a backward prediction of the same word), the same for the
  product of the two distributions, ``log p_f + log p_b`` renormalised over V (its top-k are the
  words both directions agree on).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import torch
from torch import Tensor

from elmo_engine.progress import TaskState, check, report

CHUNK = 8192                            # words per block (a (R, 8192) float32 block is cached)


@dataclass(frozen=True)
class ScanResult:
    """Per row: ``log_z`` (R,) float64, ``target_logit`` (R,), ``rank`` (R,) int64 (1 = best),
    ``entropy`` (R,) nats, ``top_ids`` / ``top_logits`` (R, k); per pair: ``pair_log_z`` (Q,),
    ``pair_top_ids`` / ``pair_top_scores`` (Q, k) (sums of the two logits)."""

    log_z: Tensor
    target_logit: Tensor
    rank: Tensor
    entropy: Tensor
    top_ids: Tensor
    top_logits: Tensor
    pair_log_z: Optional[Tensor] = None
    pair_top_ids: Optional[Tensor] = None
    pair_top_scores: Optional[Tensor] = None

    @property
    def log_prob(self) -> Tensor:
        """(R,) float64 natural log-probability of each target."""
        return self.target_logit.double() - self.log_z


class _Stream:
    """Running log-sum-exp (and optionally E[l] and top-k) of rows of logits."""

    def __init__(self, rows: int, k: int, entropy: bool, device):
        self.m = torch.full((rows,), -math.inf, dtype=torch.float64, device=device)
        self.s = torch.zeros(rows, dtype=torch.float64, device=device)
        self.t = torch.zeros(rows, dtype=torch.float64, device=device) if entropy else None
        self.k = k
        self.top_v = torch.empty(rows, 0, device=device)
        self.top_i = torch.empty(rows, 0, dtype=torch.int64, device=device)

    def add(self, logits: Tensor, offset: int) -> None:
        """Fold a (rows, C) block whose first column is word ``offset``."""
        bmax = logits.amax(1).double()
        m_new = torch.maximum(self.m, bmax)
        scale = torch.exp(self.m - m_new)                             # 0 on the first block
        e = torch.exp(logits - m_new[:, None].float())                # (rows, C)
        self.s = self.s * scale + e.sum(1, dtype=torch.float64)
        if self.t is not None:
            self.t = self.t * scale + (e * logits).sum(1, dtype=torch.float64)
        self.m = m_new
        if self.k:
            kk = min(self.k, logits.shape[1])
            v, i = logits.topk(kk, dim=1)
            v = torch.cat([self.top_v, v], 1)
            i = torch.cat([self.top_i, i + offset], 1)
            keep = min(self.k, v.shape[1])
            self.top_v, pos = v.topk(keep, dim=1)
            self.top_i = i.gather(1, pos)

    @property
    def log_z(self) -> Tensor:
        return self.m + torch.log(self.s)


@torch.no_grad()
def scan(softmax, h: Tensor, targets: Tensor, k: int = 0, pairs: Optional[Tensor] = None,
         chunk: int = CHUNK, state: Optional[TaskState] = None) -> ScanResult:
    """Statistics of ``softmax(h Wᵀ + b)`` for rows ``h`` (R, P) with target rows ``targets``
    (R,); ``pairs`` (Q, 2) row indices whose distributions are multiplied (see module docstring);
    ``k`` 0 skips the top-k and the entropy (perplexity only)."""
    w, b = softmax.w, softmax.b
    h = h.float()
    rows, v = h.shape[0], w.shape[0]
    dev = h.device
    targets = targets.to(dev)
    # the target's logit from its own row of W (the blocks below skip the target's column)
    target_logit = (h * w[targets.cpu()].to(dev).float()).sum(1) + b[targets.cpu()].to(dev)
    above = torch.zeros(rows, dtype=torch.int64, device=dev)
    main = _Stream(rows, k, entropy=k > 0, device=dev)
    pair = _Stream(pairs.shape[0], k, entropy=False, device=dev) if pairs is not None else None
    col = torch.arange(chunk, device=dev)
    for a in range(0, v, chunk):
        check(state)
        wc = w[a:a + chunk].to(dev).float()                           # (C, P)
        logits = torch.addmm(b[a:a + chunk].to(dev), h, wc.t())       # (R, C)
        c = logits.shape[1]
        is_target = (targets[:, None] - a) == col[None, :c]           # (R, C)
        above += ((logits > target_logit[:, None]) & ~is_target).sum(1)
        main.add(logits, a)
        if pair is not None:
            pair.add(logits[pairs[:, 0]] + logits[pairs[:, 1]], a)    # (Q, C)
        report(state, min(a + chunk, v), v, "scoring the softmax")
    entropy = (main.log_z - main.t / main.s) if main.t is not None else torch.zeros_like(main.s)
    return ScanResult(
        log_z=main.log_z, target_logit=target_logit, rank=above + 1,
        entropy=entropy.clamp_min(0.0), top_ids=main.top_i, top_logits=main.top_v,
        pair_log_z=pair.log_z if pair is not None else None,
        pair_top_ids=pair.top_i if pair is not None else None,
        pair_top_scores=pair.top_v if pair is not None else None)


@torch.no_grad()
def nll_sum(softmax, h: Tensor, targets: Tensor, chunk: int = CHUNK) -> Tensor:
    """Σ −log p(target) (float64 scalar) of rows ``h`` (R, P), chunked over the vocabulary."""
    res = scan(softmax, h, targets, k=0, chunk=chunk)
    return -res.log_prob.sum()
