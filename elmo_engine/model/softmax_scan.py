"""One pass over a large softmax, block of words by block of words (:class:`~.softmax.Softmax`).

For R rows of top-layer outputs ``h`` (R, P) and their targets, :func:`scan` computes what the LM
views need without ever holding the (R, V) logit matrix: for V = 793,471 words and a 25-token
sentence (R = 50) that matrix alone would be 159 MB of float32, and a float32 copy of a float16 W
1.6 GB. Logits are made ``chunk`` words at a time (W's block converted to float32 on the fly, into a
buffer reused for every block) and
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
from typing import Optional, Tuple

import torch
from torch import Tensor

from elmo_engine.progress import TaskState, check, report

#: words per block: at most this many, and a block of logits at most ``BLOCK_ELEMENTS`` floats
CHUNK = 32768
BLOCK_ELEMENTS = 1 << 22
#: words per GEMM inside a block: W's float32 copy of this many words (4 MB at P = 512) stays in
#: the last-level cache between its conversion and its product, where a whole block's (64 MB)
#: went to memory and back (docs/performance.md, "The language models")
GEMM_WORDS = 2048


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
    """Running log-sum-exp (optionally the entropy and the top-k) of rows of logits.

    Kept relative to the running max ``m``: ``s = Σ exp(l − m)``, ``u = Σ exp(l − m)·(l − m)``;
    then ``log Z = m + log s`` and ``H = log s − u / s``."""

    def __init__(self, rows: int, k: int, entropy: bool, chunk: int, device):
        self.m = torch.full((rows,), -math.inf, dtype=torch.float64, device=device)
        self.s = torch.zeros(rows, dtype=torch.float64, device=device)
        self.u = torch.zeros(rows, dtype=torch.float64, device=device) if entropy else None
        self.k = k
        self.top_v = torch.empty(rows, 0, dtype=torch.float64, device=device)
        self.top_i = torch.empty(rows, 0, dtype=torch.int64, device=device)
        self.e = torch.empty(rows, chunk, device=device)              # reused exp buffer

    def add(self, shifted: Tensor, block_max: Tensor, offset: int) -> None:
        """Fold a block already shifted by ``block_max`` (rows, C) (``l − block_max``), whose
        first column is word ``offset``; ``block_max`` (rows,) float64 ≥ the block's max."""
        m_new = torch.maximum(self.m, block_max)
        alpha = torch.exp(self.m - m_new)                             # 0 on the first block
        beta = torch.exp(block_max - m_new)                           # the block's own scale
        e = torch.exp(shifted, out=self.e[:, :shifted.shape[1]])      # exp(l − block_max)
        s_blk = e.sum(1, dtype=torch.float64)
        if self.u is not None:
            u_blk = torch.linalg.vecdot(e, shifted).double()          # Σ e·(l − block_max)
            # relative to m_new: (l − m_new) = (l − m) + (m − m_new), weights scale likewise
            old = torch.where(alpha > 0, alpha * (self.u + (self.m - m_new) * self.s),
                              torch.zeros_like(self.u))
            self.u = old + beta * (u_blk + (block_max - m_new) * s_blk)
        self.s = self.s * alpha + beta * s_blk
        self.m = m_new
        if self.k:
            v, i = shifted.topk(min(self.k, shifted.shape[1]), dim=1)
            v = torch.cat([self.top_v, v.double() + block_max[:, None]], 1)
            i = torch.cat([self.top_i, i + offset], 1)
            self.top_v, pos = v.topk(min(self.k, v.shape[1]), dim=1)
            self.top_i = i.gather(1, pos)

    @property
    def log_z(self) -> Tensor:
        return self.m + torch.log(self.s)

    @property
    def entropy(self) -> Tensor:
        if self.u is None:
            raise ValueError("this scan was made without entropy")
        return (torch.log(self.s) - self.u / self.s).clamp_min(0.0)


@torch.no_grad()
def scan(softmax, h: Tensor, targets: Tensor, k: int = 0,
         pairs: Optional[Tuple[int, int, int]] = None, chunk: int = CHUNK,
         state: Optional[TaskState] = None) -> ScanResult:
    """Statistics of ``softmax(h Wᵀ + b)`` for rows ``h`` (R, P) with target rows ``targets``
    (R,); ``pairs`` = (first row a, first row b, count): rows ``a+q`` and ``b+q`` are multiplied
    (see the module docstring); ``k`` 0 skips the top-k and the entropy (perplexity only).

    Every block works in buffers allocated once (a fresh (R, C) tensor per block spends its
    time faulting in new pages) and reads each block of logits a handful of times."""
    w, b = softmax.w, softmax.b
    h = h.float().contiguous()
    rows, v = h.shape[0], w.shape[0]
    dev = h.device
    targets = targets.to(dev)
    # few large blocks: on a shared CPU every parallel operation may wait for a descheduled
    # thread, so their number matters more than their size
    chunk = max(1, min(chunk, v, max(1024, BLOCK_ELEMENTS // max(rows, 1))))
    # the target's logit from its own row of W; in its block the target's column is not counted
    tcpu = targets.cpu()
    target_logit = (h * w[tcpu].to(dev).float()).sum(1) + b[tcpu].to(dev)      # (R,)
    above = torch.zeros(rows, dtype=torch.int64, device=dev)
    main = _Stream(rows, k, entropy=k > 0, chunk=chunk, device=dev)
    pair = None
    if pairs is not None:
        pa, pb, q = pairs
        pair = _Stream(q, k, entropy=False, chunk=chunk, device=dev)
        pbuf = torch.empty(q, chunk, device=dev)
    sub = min(chunk, GEMM_WORDS) if dev.type == "cpu" else chunk
    wbuf = torch.empty(sub, w.shape[1], device=dev)                   # W's sub-block in float32
    sbuf = torch.empty(rows, sub, device=dev)                         # its logits
    lbuf = torch.empty(rows, chunk, device=dev)                       # the block's logits
    gbuf = torch.empty(rows, chunk, dtype=torch.bool, device=dev)
    rows_idx = torch.arange(rows, device=dev)
    for a in range(0, v, chunk):
        check(state)
        c = min(chunk, v - a)
        logits = lbuf[:, :c]                                          # (R, C)
        if sub >= c:
            wc = wbuf[:c].copy_(w[a:a + c])                           # (C, P)
            torch.addmm(b[a:a + c].to(dev), h, wc.t(), out=logits)
        else:
            for s0 in range(0, c, sub):                               # cache-sized GEMMs
                n = min(sub, c - s0)
                wc = wbuf[:n].copy_(w[a + s0:a + s0 + n])             # (n, P)
                part = torch.addmm(b[a + s0:a + s0 + n].to(dev), h, wc.t(), out=sbuf[:, :n])
                logits[:, s0:s0 + n].copy_(part)
        bmax = logits.amax(1)                                         # (R,)
        torch.gt(logits, target_logit[:, None], out=gbuf[:, :c])
        above += gbuf[:, :c].sum(1)
        inside = (targets >= a) & (targets < a + c)                   # the target's own column
        if bool(inside.any()):
            r = rows_idx[inside]
            above[r] -= (logits[r, targets[r] - a] > target_logit[r]).long()
        if pair is not None:
            # (l_a + l_b) − (max_a + max_b): the sum of the two shifted blocks
            pmax = (bmax[pa:pa + q] + bmax[pb:pb + q]).double()
            torch.add(logits[pa:pa + q], logits[pb:pb + q], out=pbuf[:, :c])
            pbuf[:, :c].sub_(pmax.float()[:, None])
        logits.sub_(bmax[:, None])                                    # shifted in place
        main.add(logits, bmax.double(), a)
        if pair is not None:
            pair.add(pbuf[:, :c], pmax, a)
        report(state, a + c, v, "scoring the softmax")
    return ScanResult(
        log_z=main.log_z, target_logit=target_logit, rank=above + 1,
        entropy=main.entropy if main.u is not None else torch.zeros_like(main.s),
        top_ids=main.top_i, top_logits=main.top_v,
        pair_log_z=pair.log_z if pair is not None else None,
        pair_top_ids=pair.top_i if pair is not None else None,
        pair_top_scores=pair.top_v if pair is not None else None)


@torch.no_grad()
def nll_sum(softmax, h: Tensor, targets: Tensor, chunk: int = CHUNK) -> Tensor:
    """Σ −log p(target) (float64 scalar) of rows ``h`` (R, P), chunked over the vocabulary."""
    res = scan(softmax, h, targets, k=0, chunk=chunk)
    return -res.log_prob.sum()
