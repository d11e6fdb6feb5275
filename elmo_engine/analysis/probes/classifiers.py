"""Training the probe classifiers: per-layer heads side by side, and the scalar-mix probe.

Every classifier is a softmax regression (optionally with one hidden ReLU layer) on one layer's
vectors. ``H`` heads are trained in one model on ``(H, B, D)`` input, each with its own loss term,
its own early stopping on dev accuracy and its own best-epoch snapshot, so the K per-layer probes
cost one pass over the data per epoch. For word sense disambiguation the softmax is restricted to
the candidate classes of each example (the senses its lemma had in training).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Optional

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from elmo_engine.model.mix import ScalarMix
from elmo_engine.progress import TaskState, check, report

EventFn = Callable[[dict], None]
NEG = -1e9


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
    class weights are sparse embeddings, one per head, so a step touches only the rows of the
    batch's candidates (SparseAdam) instead of every one of tens of thousands of senses.
    """

    def __init__(self, n_heads: int, dim: int, n_classes: int, hidden: int = 0, seed: int = 0,
                 restricted: bool = False):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.hidden = hidden
        self.restricted = restricted
        width = dim
        if hidden:
            self.w1 = nn.Parameter(torch.randn(n_heads, dim, hidden, generator=g) * (2.0 / dim) ** 0.5)
            self.b1 = nn.Parameter(torch.zeros(n_heads, hidden))
            width = hidden
        w0 = torch.randn(n_heads, n_classes, width, generator=g) * 0.01
        if restricted:
            self.w_emb = nn.ModuleList(nn.Embedding(n_classes, width, sparse=True)
                                       for _ in range(n_heads))
            self.b_emb = nn.ModuleList(nn.Embedding(n_classes, 1, sparse=True)
                                       for _ in range(n_heads))
            with torch.no_grad():
                for h in range(n_heads):
                    self.w_emb[h].weight.copy_(w0[h])
                    self.b_emb[h].weight.zero_()
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
        idx = cand.clamp(min=0)                                                        # (B, M)
        if self.restricted:
            wc = torch.stack([e(idx) for e in self.w_emb])                             # (H, B, M, E)
            bc = torch.stack([e(idx).squeeze(-1) for e in self.b_emb])                 # (H, B, M)
        else:
            wc, bc = self.w[:, idx], self.b[:, idx]
        logits = torch.einsum("hbd,hbmd->hbm", x, wc) + bc                             # (H, B, M)
        return logits.masked_fill(cand[None] < 0, NEG)


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


@dataclass
class TrainSettings:
    epochs: int = 30
    patience: int = 3
    batch_size: int = 256
    lr: float = 3e-3
    mix_lr: float = 3e-2
    weight_decay: float = 1e-6
    seed: int = 0


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

    def torch(self, xb: torch.Tensor) -> torch.Tensor:
        # xb: (K, B, D)
        if self._t is None or self._t[0].device != xb.device:
            self._t = (torch.from_numpy(self.mu).to(xb)[:, None, None],
                       torch.from_numpy(self.sd).to(xb)[:, None, None])
        mu, sd = self._t
        return (xb - mu) / sd

    def numpy(self, x: np.ndarray) -> np.ndarray:
        return (x - self.mu[:, None, None]) / self.sd[:, None, None]


def predict(model: nn.Module, split: Split, norm: Normaliser, batch_size: int = 2048) -> torch.Tensor:
    """Argmax candidate positions, (H, N) long."""
    model.eval()
    out = []
    with torch.no_grad():
        for a in range(0, len(split), batch_size):
            xb = norm.torch(split.x[:, a:a + batch_size])
            cb = None if split.cand is None else _trim(split.cand[a:a + batch_size])
            out.append(model(xb, cb).argmax(-1))
    model.train()
    return torch.cat(out, dim=1) if out else torch.zeros(0, 0, dtype=torch.long)


def accuracy(model: nn.Module, split: Split, norm: Normaliser) -> np.ndarray:
    """Per-head accuracy, (H,) float64."""
    pos = predict(model, split, norm)                                                 # (H, N)
    return (pos == split.y[None]).double().mean(dim=1).numpy()


def fit(model: nn.Module, n_heads: int, train: Split, dev: Split, norm: Normaliser,
        settings: TrainSettings, phase: str, state: Optional[TaskState] = None,
        on_event: Optional[EventFn] = None) -> Dict[str, object]:
    """Train ``model`` (Adam, minibatches) with early stopping on dev accuracy, per head.

    Each head keeps the parameters of its best dev epoch. Returns the history: ``loss`` and
    ``dev`` (lists over epochs of per-head values), ``best_dev`` and ``best_epoch`` per head.
    """
    torch.manual_seed(settings.seed)
    named = list(model.named_parameters())
    mix_params = [p for n, p in named if n.startswith("mix.")]
    sparse = [p for n, p in named if "_emb." in n]
    dense = [p for n, p in named if not n.startswith("mix.") and "_emb." not in n]
    groups = [{"params": dense, "lr": settings.lr, "weight_decay": settings.weight_decay}]
    if mix_params:
        groups.append({"params": mix_params, "lr": settings.mix_lr, "weight_decay": 0.0})
    groups = [g for g in groups if g["params"]]
    opts = [torch.optim.Adam(groups)] if groups else []
    if sparse:                                 # sense weights: only the batch's rows move
        opts.append(torch.optim.SparseAdam(sparse, lr=settings.lr))
    gen = torch.Generator().manual_seed(settings.seed)
    n = len(train)
    best = np.full(n_heads, -1.0)
    best_epoch = np.zeros(n_heads, int)
    snapshot = {k: v.detach().clone() for k, v in model.state_dict().items()}
    history: Dict[str, list] = {"loss": [], "dev": []}
    stale = 0
    for epoch in range(1, settings.epochs + 1):
        perm = torch.randperm(n, generator=gen)
        total = torch.zeros(n_heads, dtype=torch.float64)
        for a in range(0, n, settings.batch_size):
            check(state)
            idx = perm[a:a + settings.batch_size]
            xb = norm.torch(train.x[:, idx])                                           # (K, B, D)
            cb = None if train.cand is None else _trim(train.cand[idx])
            logits = model(xb, cb)                                                     # (H, B, M)
            yb = train.y[idx]                                                          # (B,)
            per = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.repeat(n_heads),
                                  ignore_index=-1, reduction="none").view(n_heads, -1)  # (H, B)
            valid = max(int((yb >= 0).sum()), 1)
            loss_h = per.sum(dim=1) / valid                                            # (H,)
            for opt in opts:
                opt.zero_grad()
            loss_h.sum().backward()
            for opt in opts:
                opt.step()
            total += loss_h.detach().double() * len(idx)
        loss = (total / max(n, 1)).tolist()
        dev_acc = accuracy(model, dev, norm)
        history["loss"].append(loss)
        history["dev"].append(dev_acc.tolist())
        improved = dev_acc > best + 1e-9
        if improved.any():
            _take_snapshot(model, snapshot, improved, n_heads)
            best = np.where(improved, dev_acc, best)
            best_epoch = np.where(improved, epoch, best_epoch)
            stale = 0
        else:
            stale += 1
        report(state, epoch, settings.epochs, f"{phase}: epoch {epoch}, dev accuracy "
               + " ".join(f"{v:.3f}" for v in dev_acc))
        if on_event is not None:
            on_event({"phase": phase, "epoch": epoch, "loss": loss, "dev": dev_acc.tolist()})
        if stale >= settings.patience:
            break
    model.load_state_dict(snapshot)
    history["best_dev"] = best.tolist()
    history["best_epoch"] = best_epoch.tolist()
    return history


def _trim(cand: torch.Tensor) -> torch.Tensor:
    """Drop the padding columns no example of this batch needs: (B, M) → (B, M_batch)."""
    width = int((cand >= 0).sum(dim=1).max()) if cand.numel() else 0
    return cand[:, :max(width, 1)]


def _take_snapshot(model: nn.Module, snapshot: Dict[str, torch.Tensor], improved: np.ndarray,
                   n_heads: int) -> None:
    """Copy the improved heads' parameters: dense ones have the head as their first axis, the
    sparse sense embeddings one module per head (``heads.w_emb.<h>.weight``)."""
    for name, value in model.state_dict().items():
        if n_heads == 1:
            snapshot[name] = value.detach().clone()
        elif "_emb." in name:
            if improved[int(name.split("_emb.")[1].split(".")[0])]:
                snapshot[name] = value.detach().clone()
        else:
            for h in np.flatnonzero(improved):
                snapshot[name][h] = value[h].detach()


__all__ = ["Heads", "LayerProbes", "MixProbe", "Normaliser", "Split", "TrainSettings", "accuracy",
           "fit", "predict"]
