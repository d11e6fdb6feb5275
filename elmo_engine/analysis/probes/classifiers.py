"""Training the probe classifiers: per-layer heads side by side, and the scalar-mix probe.

Every classifier is a softmax regression (optionally with one hidden ReLU layer) on one layer's
vectors. ``H`` heads are trained in one model on ``(H, B, D)`` input, each with its own loss term,
its own early stopping and its own best-epoch snapshot, so the K per-layer probes cost one pass
over the data per epoch. For word sense disambiguation the softmax is restricted to the candidate
classes of each example (its lemma's WordNet senses that have training examples): the class
weights of all heads are one table whose rows a step gathers and updates (:class:`RowAdam`), a
lemma's candidates a padded index matrix.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from elmo_engine.analysis.probes.sampled import NEG, CandidatePattern, candidate_logits
from elmo_engine.analysis.probes.settings import TrainSettings
from elmo_engine.model.mix import ScalarMix
from elmo_engine.progress import TaskState, check, report

EventFn = Callable[[dict], None]


@dataclass
class Split:
    """One split as tensors. ``x`` (K, N, D) float32 (raw; normalised per batch), ``y`` (N,)
    target positions (−1: the gold label cannot be predicted), ``cand`` (N, M) class ids with −1
    padding, or None for an unrestricted softmax."""

    x: torch.Tensor
    y: torch.Tensor
    cand: Optional[torch.Tensor]

    def __len__(self) -> int:
        return int(self.y.shape[0])


class Heads(nn.Module):
    """``H`` independent classifiers on ``(H, B, D)`` input → ``(H, B, M)`` logits.

    With ``restricted=True`` (word senses: each example scores only its candidate classes) the
    class weights and biases of every head are one table ``(C, H, width + 1)`` (the bias is the
    last column; a class's row holds every head, so gathering rows copies contiguous memory). A
    step gathers the rows of the batch's distinct candidate classes once (in training as a leaf
    of the autograd graph, ``last_rows``, which :class:`RowAdam` then updates) and scores each
    example against its own candidates by sampled matrix products (:mod:`.sampled`), so a step
    costs what its candidates cost, not what tens of thousands of senses would, and no weight
    row is copied per example.
    """

    def __init__(self, n_heads: int, dim: int, n_classes: int, hidden: int = 0, seed: int = 0,
                 restricted: bool = False):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.hidden, self.restricted, self.n_heads = hidden, restricted, n_heads
        width = dim
        if hidden:
            self.w1 = nn.Parameter(torch.randn(n_heads, dim, hidden, generator=g) * (2.0 / dim) ** 0.5)
            self.b1 = nn.Parameter(torch.zeros(n_heads, hidden))
            width = hidden
        self.width = width
        w0 = torch.randn(n_heads, n_classes, width, generator=g) * 0.01
        # rows gathered by the last training forward: (class ids (U,), leaf (U, H, width + 1))
        self.last_rows: Optional[Tuple[torch.Tensor, torch.Tensor]] = None
        if restricted:
            table = torch.cat([w0, torch.zeros(n_heads, n_classes, 1)], dim=2).permute(1, 0, 2)
            table = table.contiguous()                                        # (C, H, E+1)
            self.table = nn.Parameter(table, requires_grad=False)       # moved by RowAdam
        else:
            self.w = nn.Parameter(w0)
            self.b = nn.Parameter(torch.zeros(n_heads, n_classes))

    def forward(self, x: torch.Tensor, cand: Optional[torch.Tensor]) -> torch.Tensor:
        # x: (H, B, D); cand: (B, M) or None
        if self.hidden:
            x = torch.relu(torch.einsum("hbd,hde->hbe", x, self.w1) + self.b1[:, None])  # (H, B, E)
        if cand is None:
            if self.restricted:
                raise ValueError("restricted heads need candidate classes")
            return torch.einsum("hbd,hcd->hbc", x, self.w) + self.b[:, None]         # (H, B, C)
        if self.restricted:
            xa = torch.cat([x, x.new_ones(x.shape[0], cand.shape[0], 1)], dim=2)       # (H, B, E+1)
            pattern = CandidatePattern(cand, self.table.shape[0])
            if self.training and torch.is_grad_enabled():
                leaf = self.table.detach().index_select(0, pattern.rows).requires_grad_()
                self.last_rows = (pattern.rows, leaf)                        # (U,), (U, H, E+1)
            else:
                leaf = self.table.index_select(0, pattern.rows)
            return candidate_logits(xa, leaf, pattern)              # (H, B, M), NEG at padding
        idx = cand.clamp(min=0)                                                        # (B, M)
        logits = torch.einsum("hbd,hbmd->hbm", x, self.w[:, idx]) + self.b[:, idx]
        return logits.masked_fill(cand[None] < 0, NEG)


class RowAdam:
    """Adam on the rows of a :class:`Heads` table that the last step gathered, lazily (a row's
    moments change only when it is used), with the global step count of ``torch.optim.
    SparseAdam`` and its update, so it trains exactly as the sparse embedding + SparseAdam would,
    without sorting and coalescing a sparse gradient every step."""

    def __init__(self, heads: "Heads", lr: float, betas=(0.9, 0.999), eps: float = 1e-8):
        self.heads, self.lr, self.betas, self.eps = heads, lr, betas, eps
        self.exp_avg = torch.zeros_like(heads.table)
        self.exp_avg_sq = torch.zeros_like(heads.table)
        self.steps = 0

    def zero_grad(self) -> None:
        """Nothing to clear: every training forward gathers a fresh leaf."""

    @torch.no_grad()
    def step(self) -> None:
        if self.heads.last_rows is None or self.heads.last_rows[1].grad is None:
            return
        rows, leaf = self.heads.last_rows
        grad = leaf.grad
        assert grad is not None                          # checked above
        b1, b2 = self.betas
        self.steps += 1
        m = self.exp_avg.index_select(0, rows).mul_(b1).add_(grad, alpha=1 - b1)
        v = self.exp_avg_sq.index_select(0, rows).mul_(b2).addcmul_(grad, grad, value=1 - b2)
        self.exp_avg.index_copy_(0, rows, m)
        self.exp_avg_sq.index_copy_(0, rows, v)
        size = self.lr * math.sqrt(1 - b2 ** self.steps) / (1 - b1 ** self.steps)
        new = leaf.detach().sub_(m.div_(v.sqrt_().add_(self.eps)), alpha=size)
        self.heads.table.index_copy_(0, rows, new)
        self.heads.last_rows = None


class LayerProbes(nn.Module):
    """One head per layer: head k sees only layer k."""

    def __init__(self, n_layers: int, dim: int, n_classes: int, hidden: int = 0, seed: int = 0,
                 restricted: bool = False):
        super().__init__()
        self.heads = Heads(n_layers, dim, n_classes, hidden, seed, restricted)

    def forward(self, x: torch.Tensor, cand: Optional[torch.Tensor]) -> torch.Tensor:
        return self.heads(x, cand)                                                     # (K, B, M)


class MixProbe(nn.Module):
    """``γ · Σ softmax(s)_k h_k`` followed by one head, trained together (one "head" of output)."""

    def __init__(self, n_layers: int, dim: int, n_classes: int, hidden: int = 0, seed: int = 0,
                 restricted: bool = False):
        super().__init__()
        self.mix = ScalarMix(n_layers)
        self.heads = Heads(1, dim, n_classes, hidden, seed, restricted)

    def forward(self, x: torch.Tensor, cand: Optional[torch.Tensor]) -> torch.Tensor:
        return self.heads(self.mix(x).unsqueeze(0), cand)                              # (1, B, M)


class Normaliser:
    """Per-layer scalar mean/std over the training vectors (the layer norm of
    docs/checkpoint-format.md §10 with the whole training set as the batch), applied to every
    split so that layers of different scale start equal in the mix."""

    def __init__(self, x: np.ndarray, enabled: bool = True):
        k = x.shape[0]
        self.mu, self.sd = np.zeros(k, np.float32), np.ones(k, np.float32)
        if enabled:
            for i in range(k):
                total = sq = 0.0
                for a in range(0, x.shape[1], 65536):              # chunks: no float64 copy
                    part = x[i, a:a + 65536].astype(np.float64)
                    total += part.sum()
                    sq += np.square(part).sum()
                n = max(x[i].size, 1)
                mean = total / n
                self.mu[i] = mean
                self.sd[i] = np.sqrt(max(sq / n - mean * mean, 0.0)) + 1e-6
        self._t: Optional[tuple] = None

    def first(self, n: int) -> "Normaliser":
        """The same scaling restricted to layers ``0 … n−1`` (a probe on a prefix of the
        layers, as cumulative scoring trains)."""
        out = Normaliser.__new__(Normaliser)
        out.mu, out.sd, out._t = self.mu[:n].copy(), self.sd[:n].copy(), None
        return out

    def torch(self, xb: torch.Tensor) -> torch.Tensor:
        # xb: (K, B, D), float32 or float16 storage → float32
        if self._t is None or self._t[0].device != xb.device:
            self._t = (torch.from_numpy(self.mu).to(xb.device)[:, None, None],
                       torch.from_numpy(self.sd).to(xb.device)[:, None, None])
        mu, sd = self._t
        return (xb.float() - mu) / sd

    def mixed(self, x: np.ndarray, weights: np.ndarray, chunk: int = 16384) -> np.ndarray:
        """``Σ_k weights[k] · normalised x[k]``, (N, D) float32, from ``x`` (K, N, D) a chunk of
        rows at a time (no normalised float32 copy of every layer)."""
        w = np.asarray(weights, np.float32)
        scale = (w / self.sd).astype(np.float32)
        shift = np.float32((w * self.mu / self.sd).sum())
        out = np.empty(x.shape[1:], np.float32)
        for a in range(0, x.shape[1], chunk):
            part = np.tensordot(scale, x[:, a:a + chunk].astype(np.float32), axes=(0, 0))
            out[a:a + chunk] = part - shift
        return out


def evaluate(model: nn.Module, split: Split, norm: Normaliser, batch_size: int = 4096
             ) -> Tuple[torch.Tensor, np.ndarray]:
    """Argmax candidate positions (H, N) long, and the mean cross-entropy per head (H,)."""
    model.eval()
    out: List[torch.Tensor] = []
    loss: Optional[torch.Tensor] = None
    n = 0
    with torch.no_grad():
        for a in range(0, len(split), batch_size):
            xb = norm.torch(split.x[:, a:a + batch_size])
            cb = None if split.cand is None else _trim(split.cand[a:a + batch_size])
            logits = model(xb, cb)                                                    # (H, B, M)
            out.append(logits.argmax(-1))
            yb = split.y[a:a + batch_size]
            h = logits.shape[0]
            per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.repeat(h),
                                  ignore_index=-1, reduction="none").view(h, -1).sum(dim=1)
            loss = per if loss is None else loss + per
            n += int((yb >= 0).sum())
    model.train()
    if not out:
        return torch.zeros(0, 0, dtype=torch.long), np.zeros(0)
    assert loss is not None                          # set by the first batch
    return torch.cat(out, dim=1), (loss / max(n, 1)).double().cpu().numpy()


def predict(model: nn.Module, split: Split, norm: Normaliser) -> torch.Tensor:
    """Argmax candidate positions, (H, N) long."""
    return evaluate(model, split, norm)[0]


def accuracy(model: nn.Module, split: Split, norm: Normaliser) -> np.ndarray:
    """Per-head accuracy, (H,) float64."""
    pos = predict(model, split, norm)                                                 # (H, N)
    return (pos == split.y[None]).double().mean(dim=1).cpu().numpy()


def _batches(train: Split, batch_size: int, gen: torch.Generator) -> List[torch.Tensor]:
    """One epoch's minibatches. Restricted tasks: only examples with something to learn (gold
    among ≥ 2 candidates), grouped by candidate count (one group per count up to 16) so that a
    batch pads few columns."""
    n = len(train)
    if train.cand is None:
        perm = torch.randperm(n, generator=gen)
        return [perm[a:a + batch_size] for a in range(0, n, batch_size)]
    width = (train.cand >= 0).sum(dim=1).cpu()
    useful = (train.y.cpu() >= 0) & (width >= 2)
    out: List[torch.Tensor] = []
    for lo, hi in [(w, w) for w in range(2, 17)] + [(17, 24), (25, 32), (33, 1 << 30)]:
        idx = torch.nonzero(useful & (width >= lo) & (width <= hi)).flatten()
        idx = idx[torch.randperm(len(idx), generator=gen)]
        out.extend(idx[a:a + batch_size] for a in range(0, len(idx), batch_size))
    order = torch.randperm(len(out), generator=gen).tolist()
    return [out[i] for i in order]


def train_step(model: nn.Module, opts: list, train: Split, idx: torch.Tensor, norm: Normaliser,
               n_heads: int) -> torch.Tensor:
    """One optimiser step of every head on the examples ``idx``; their mean losses ``(H,)``
    (detached)."""
    xb = norm.torch(train.x[:, idx])                                                   # (K, B, D)
    cb = None if train.cand is None else _trim(train.cand[idx])
    logits = model(xb, cb)                                                             # (H, B, M)
    yb = train.y[idx]                                                                  # (B,)
    per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.repeat(n_heads),
                          ignore_index=-1, reduction="none").view(n_heads, -1)          # (H, B)
    loss_h = per.sum(dim=1) / max(int((yb >= 0).sum()), 1)                             # (H,)
    for opt in opts:
        opt.zero_grad()
    loss_h.sum().backward()
    for opt in opts:
        opt.step()
    return loss_h.detach()


def fit(model: nn.Module, n_heads: int, train: Split, dev: Split, norm: Normaliser,
        settings: TrainSettings, phase: str, state: Optional[TaskState] = None,
        on_event: Optional[EventFn] = None) -> Dict[str, object]:
    """Train ``model`` (Adam, minibatches) with early stopping on dev accuracy or dev loss
    (``settings.stop_on``), per head, never before ``settings.min_epochs``.

    Each head keeps the parameters of its best dev epoch. Returns the history: ``loss``,
    ``dev`` and ``dev_loss`` (lists over epochs of per-head values), ``best_dev`` and
    ``best_epoch`` per head, and ``epochs`` (how many ran).
    """
    torch.manual_seed(settings.seed)
    named = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    mix_params = [p for n, p in named if n.startswith("mix.")]
    dense = [p for n, p in named if not n.startswith("mix.")]
    groups = [{"params": dense, "lr": settings.lr, "weight_decay": settings.weight_decay}]
    if mix_params:
        groups.append({"params": mix_params, "lr": settings.mix_lr, "weight_decay": 0.0})
    groups = [g for g in groups if g["params"]]
    opts: list = [torch.optim.Adam(groups)] if groups else []
    # sense tables (restricted heads): only the rows of a batch's candidates move
    opts += [RowAdam(m, settings.lr) for m in model.modules()
             if isinstance(m, Heads) and m.restricted]
    gen = torch.Generator().manual_seed(settings.seed)
    by_loss = settings.stop_on == "loss"
    best = np.full(n_heads, np.inf if by_loss else -1.0)
    best_epoch = np.zeros(n_heads, int)
    ref = best.copy()                          # the scores that last restarted the patience
    snapshot = {k: v.detach().clone() for k, v in model.state_dict().items()}
    history: Dict[str, Any] = {"loss": [], "dev": [], "dev_loss": []}
    stale = 0
    epoch = 0
    for epoch in range(1, settings.epochs + 1):
        total = torch.zeros(n_heads, dtype=torch.float64)
        seen = 0
        for idx in _batches(train, settings.batch_size, gen):
            check(state)
            loss_h = train_step(model, opts, train, idx, norm, n_heads)                # (H,)
            total += loss_h.double().cpu() * len(idx)
            seen += len(idx)
        loss = (total / max(seen, 1)).tolist()
        pos, dev_loss = evaluate(model, dev, norm)
        dev_acc = (pos == dev.y[None]).double().mean(dim=1).cpu().numpy()
        history["loss"].append(loss)
        history["dev"].append(dev_acc.tolist())
        history["dev_loss"].append(dev_loss.tolist())
        crit = dev_loss if by_loss else dev_acc
        improved = crit < best - 1e-6 if by_loss else crit > best + 1e-9
        if improved.any():
            _take_snapshot(model, snapshot, improved, n_heads)
            best = np.where(improved, crit, best)
            best_epoch = np.where(improved, epoch, best_epoch)
        margin = max(settings.min_delta, 1e-6 if by_loss else 1e-9)
        progress = crit < ref - margin if by_loss else crit > ref + margin
        if progress.any():
            ref = np.where(progress, crit, ref)
            stale = 0
        else:
            stale += 1
        report(state, epoch, settings.epochs, f"{phase}: epoch {epoch}, dev accuracy "
               + " ".join(f"{v:.3f}" for v in dev_acc))
        if on_event is not None:
            on_event({"phase": phase, "epoch": epoch, "loss": loss, "dev": dev_acc.tolist()})
        if stale >= settings.patience and epoch >= settings.min_epochs:
            break
    model.load_state_dict(snapshot)
    history["best_dev"] = best.tolist()
    history["best_epoch"] = best_epoch.tolist()
    history["epochs"] = epoch
    return history


def _trim(cand: torch.Tensor) -> torch.Tensor:
    """Drop the padding columns no example of this batch needs: (B, M) → (B, M_batch)."""
    width = int((cand >= 0).sum(dim=1).max()) if cand.numel() else 0
    return cand[:, :max(width, 1)]


def _take_snapshot(model: nn.Module, snapshot: Dict[str, torch.Tensor], improved: np.ndarray,
                   n_heads: int) -> None:
    """Copy the improved heads' parameters: the head is the first axis of every one but the
    sense table's ``(C, H, E+1)``."""
    heads = np.flatnonzero(improved)
    for name, value in model.state_dict().items():
        if n_heads == 1:
            snapshot[name] = value.detach().clone()
        elif name.endswith("table"):
            snapshot[name][:, heads] = value[:, heads].detach()
        else:
            for h in heads:
                snapshot[name][h] = value[h].detach()


__all__ = ["Heads", "LayerProbes", "MixProbe", "Normaliser", "RowAdam", "Split", "TrainSettings",
           "accuracy", "evaluate", "fit", "predict", "train_step"]
