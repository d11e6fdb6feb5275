"""Probing by description length: online-code MDL probes per layer and for the scalar mix.

E. Voita and I. Titov, "Information-Theoretic Probing with Minimum Description Length", EMNLP
2020, §2.2.2 and §3. The labels ``y_1 … y_n`` of a data set are transmitted given the
representations ``x_1 … x_n`` (which the receiver has). With timesteps ``1 ≤ t_1 < … < t_S = n``,
the first block ``y_1 … y_{t_1}`` is sent with the uniform code (``log₂ K`` bits a label); then
for each block ``i`` a probe ``θ_i`` trained on the first ``t_i`` examples codes the next block::

    L_online = t_1 · log₂K − Σ_{i=1}^{S−1} log₂ p_{θ_i}(y_{t_i+1 : t_{i+1}} | x_{t_i+1 : t_{i+1}})

The timesteps are the paper's: 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50 and 100 % of the
data (:data:`BLOCK_FRACTIONS`). The uniform codelength is ``n · log₂ K``; **compression** is
``uniform / online``: how much easier the labels are to transmit given the layer (1 = not at all).
A layer that makes the labels easy to *extract* (little data needed) gets a short code, which
accuracy alone does not show.

Probes and training here (documented choices, not the paper's exact regimen):

* each probe is a softmax regression on one layer, and the mix probe is
  ``γ · Σ_k softmax(s)_k h_k`` followed by one linear classifier, trained together; features are
  standardised per layer and dimension over the whole data set (the receiver has every ``x``);
* the examples are put in a seeded random order first (data files are often sorted by genre);
* every block's probes are trained with Adam in minibatches, with early stopping on the held-out
  loss of the last ``holdout`` (10 %) of the current training portion (each probe keeps its best
  epoch); at least ``min_steps`` steps an epoch, so the tiny first blocks are trained too;
* every block's probes start from zero (the uniform code). ``warm_start=True`` starts them from
  the previous block's probes instead — still a decodable code, since the receiver can repeat the
  same deterministic training — but probes fitted to the first, tiny blocks carry their
  over-confidence forward and early stopping cannot undo it: in a check on EWT part-of-speech
  tags it roughly halved a biLSTM layer's compression, so it is off by default. (With it, the
  mix weights ``s`` and scale ``γ`` still restart equal in every block, so that the noise of the
  first blocks cannot lock them onto one layer.)
* with ``groups`` (e.g. a word's lemma) each example is coded among the labels its group has in
  the data set (the uniform code then costs ``log₂ |candidates|`` bits an example) — for word
  senses; the inventory of each group is assumed known to the receiver.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

#: the block timesteps of Voita & Titov (2020), as fractions of the data
BLOCK_FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
_NEG = -1e9
_LN2 = math.log(2.0)

DESCRIPTION = (
    "Online-code MDL probes (Voita & Titov 2020). The examples (in a seeded random order) are "
    "split at 'boundaries' (0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50, 100 % of the data); "
    "the first block is sent with the uniform code, every later block with a probe trained on all "
    "examples before it. 'online_codelength_bits' is the total, 'block_codelengths_bits' its parts "
    "(the first is the uniform code of block 1), 'uniform_codelength_bits' = n * log2(K) (with "
    "groups: the sum of log2 of each example's candidate count), 'compression' = uniform / "
    "online (higher = the labels are easier to extract from the layer). "
    "'final_block_accuracy': accuracy on the last block of the probe trained on the first half. "
    "Probes: softmax regression per layer; 'mix' = gamma * sum_k softmax(s)_k h_k + one linear "
    "classifier ('weights' = softmax(s) of the last block's probe).")


def block_boundaries(n: int, fractions: Sequence[float] = BLOCK_FRACTIONS) -> List[int]:
    """The timesteps ``t_1 < … < t_S = n``: ``⌊f · n⌋`` for each fraction (at least 1), repeats
    dropped (a small data set has fewer blocks)."""
    if n < 2:
        raise InputError(f"an online code needs at least 2 examples, got {n}")
    if not fractions or abs(fractions[-1] - 1.0) > 1e-12:
        raise InputError("the block fractions must end with 1.0 (all of the data)")
    ts = sorted({min(n, max(1, int(math.floor(f * n + 1e-9)))) for f in fractions})
    if len(ts) < 2:
        ts = [1, n]
    return ts


def uniform_codelength(n: int, n_classes: int) -> float:
    """Bits to send ``n`` labels of ``n_classes`` with the uniform code: ``n · log₂ K``."""
    return n * math.log2(n_classes)


@dataclass
class MDLConfig:
    """How each block's probes are trained (see the module docstring)."""

    max_epochs: int = 10
    patience: int = 2
    batch_size: int = 256
    min_steps: int = 4
    lr: float = 1e-2
    mix_lr: float = 1e-1
    weight_decay: float = 0.0
    holdout: float = 0.1
    warm_start: bool = False
    mix: bool = True
    seed: int = 0
    device: str = "cpu"


@dataclass
class CodeLength:
    """One probe's online code."""

    name: str
    layer: Optional[int]
    online_bits: float
    uniform_bits: float
    block_bits: List[float]
    final_block_accuracy: float
    weights: Optional[List[float]] = None
    gamma: Optional[float] = None

    @property
    def compression(self) -> float:
        return self.uniform_bits / self.online_bits if self.online_bits > 0 else float("inf")

    def to_dict(self) -> dict:
        d = {"name": self.name, "layer": self.layer, "online_codelength_bits": self.online_bits,
             "uniform_codelength_bits": self.uniform_bits, "compression": self.compression,
             "block_codelengths_bits": self.block_bits,
             "final_block_accuracy": self.final_block_accuracy}
        if self.weights is not None:
            d["weights"], d["gamma"] = self.weights, self.gamma
        return d


@dataclass
class MDLResult:
    """The online codes of every layer's probe (and the mix's) on one labelled data set."""

    n_examples: int
    classes: List[str]
    boundaries: List[int]
    uniform_bits: float
    layers: List[CodeLength]
    mix: Optional[CodeLength]
    config: Dict[str, object] = field(default_factory=dict)
    wall_time_s: float = 0.0
    extra: Dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"description": DESCRIPTION, **self.extra, "examples": self.n_examples,
                "classes": len(self.classes), "labels": self.classes,
                "boundaries": self.boundaries, "uniform_codelength_bits": self.uniform_bits,
                "layers": [c.to_dict() for c in self.layers],
                "mix": None if self.mix is None else self.mix.to_dict(),
                "config": self.config, "probe_training_s": self.wall_time_s}


class _Probes(nn.Module):
    """``K`` softmax regressions side by side (head k sees layer k) plus, optionally, the mix
    probe as head ``K``; all start at zero (the uniform distribution)."""

    def __init__(self, k: int, dim: int, n_classes: int, mix: bool):
        super().__init__()
        self.k, self.has_mix = k, mix
        self.w = nn.Parameter(torch.zeros(k, dim, n_classes))
        self.b = nn.Parameter(torch.zeros(k, 1, n_classes))
        if mix:
            self.s = nn.Parameter(torch.zeros(k))
            self.gamma = nn.Parameter(torch.ones(1))
            self.wm = nn.Parameter(torch.zeros(dim, n_classes))
            self.bm = nn.Parameter(torch.zeros(n_classes))

    @property
    def n_heads(self) -> int:
        return self.k + int(self.has_mix)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # x: (K, B, D) → logits (H, B, C)
        out = torch.baddbmm(self.b, x, self.w)
        if not self.has_mix:
            return out
        mixed = self.gamma * torch.tensordot(torch.softmax(self.s, 0), x, dims=([0], [0]))
        return torch.cat([out, (mixed @ self.wm + self.bm).unsqueeze(0)])

    def _head_params(self, h: int) -> List[torch.Tensor]:
        if h < self.k:
            return [self.w[h], self.b[h]]
        return [self.s, self.gamma, self.wm, self.bm]

    def snapshot(self, h: int) -> List[torch.Tensor]:
        return [p.detach().clone() for p in self._head_params(h)]

    def restore(self, h: int, saved: List[torch.Tensor]) -> None:
        with torch.no_grad():
            for p, v in zip(self._head_params(h), saved):
                p.copy_(v)


def _masked(logits: torch.Tensor, mask: Optional[torch.Tensor]) -> torch.Tensor:
    return logits if mask is None else logits.masked_fill(~mask.unsqueeze(0), _NEG)


def _heldout_loss(model: _Probes, x, y, mask, batch: int = 4096) -> torch.Tensor:
    """Per-head summed cross-entropy (nats) and correct counts over a slice."""
    total = torch.zeros(model.n_heads, dtype=torch.float64)
    correct = torch.zeros(model.n_heads, dtype=torch.float64)
    with torch.no_grad():
        for a in range(0, len(y), batch):
            yb = y[a:a + batch]
            logits = _masked(model(x[:, a:a + batch]), None if mask is None else mask[a:a + batch])
            logp = torch.log_softmax(logits, dim=-1)                                  # (H, B, C)
            picked = logp.gather(2, yb.expand(model.n_heads, -1).unsqueeze(2)).squeeze(2)
            total += -picked.sum(1).double()
            correct += (logits.argmax(-1) == yb).sum(1).double()
    return torch.stack([total, correct])


def _train_block(model: _Probes, x, y, mask, cfg: MDLConfig, gen: torch.Generator,
                 state: Optional[TaskState]) -> None:
    """Train every head on ``x[:, :n]`` with early stopping on the last ``holdout`` of it."""
    n = len(y)
    n_hold = int(n * cfg.holdout)
    n_tr = n - n_hold
    groups = [{"params": [model.w, model.b], "lr": cfg.lr, "weight_decay": cfg.weight_decay}]
    if model.has_mix:
        groups += [{"params": [model.wm, model.bm], "lr": cfg.lr, "weight_decay": cfg.weight_decay},
                   {"params": [model.s, model.gamma], "lr": cfg.mix_lr, "weight_decay": 0.0}]
    opt = torch.optim.Adam(groups)
    h = model.n_heads
    best = [float("inf")] * h
    saved = [model.snapshot(i) for i in range(h)]
    bad = [0] * h
    bs = min(cfg.batch_size, n_tr)
    steps = max(math.ceil(n_tr / bs), cfg.min_steps)
    for _ in range(cfg.max_epochs):
        check(state)
        order = torch.cat([torch.randperm(n_tr, generator=gen)
                           for _ in range(math.ceil(steps * bs / n_tr))])
        for s in range(steps):
            idx = order[s * bs:(s + 1) * bs]
            logits = _masked(model(x[:, idx]), None if mask is None else mask[idx])  # (H, B, C)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y[idx].repeat(h),
                                   reduction="mean") * h
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        if not n_hold:
            continue
        held = _heldout_loss(model, x[:, n_tr:n], y[n_tr:n],
                             None if mask is None else mask[n_tr:n])[0].tolist()
        for i in range(h):
            if held[i] < best[i] - 1e-9:
                best[i], bad[i] = held[i], 0
                saved[i] = model.snapshot(i)
            else:
                bad[i] += 1
        if all(b >= cfg.patience for b in bad):
            break
    if n_hold:
        for i in range(h):
            model.restore(i, saved[i])


def _standardised(features: np.ndarray, order: np.ndarray, chunk: int = 16384) -> np.ndarray:
    """``features[:, order]`` scaled to zero mean and unit variance per layer and dimension."""
    k, n, d = features.shape
    total = np.zeros((k, d))
    sq = np.zeros((k, d))
    for a in range(0, n, chunk):
        part = features[:, a:a + chunk].astype(np.float64)
        total += part.sum(axis=1)
        sq += np.square(part).sum(axis=1)
    mu = total / n
    sd = np.sqrt(np.maximum(sq / n - mu * mu, 0.0)) + 1e-6
    out = np.empty((k, n, d), np.float32)
    for a in range(0, n, chunk):
        out[:, a:a + chunk] = (features[:, order[a:a + chunk]] - mu[:, None]) / sd[:, None]
    return out


def online_codelength(features: np.ndarray, labels: Sequence, *, groups: Optional[Sequence] = None,
                      config: MDLConfig = MDLConfig(), layer_names: Optional[Sequence[str]] = None,
                      state: Optional[TaskState] = None) -> MDLResult:
    """Online codelength of the labels given each layer (and the scalar mix of all layers).

    Parameters
    ----------
    features : ``(K, N, D)`` float32, one vector per layer per labelled token
    labels : ``N`` labels (any hashable; compared as strings in the output)
    groups : optional ``N`` group keys restricting each example to its group's labels (senses)
    config : training settings; ``config.mix`` adds the mix probe
    layer_names : names of the K layers in the result (default ``"layer k"``)
    state : progress (blocks) and cancel
    """
    t0 = time.perf_counter()
    features = np.asarray(features)
    if features.ndim != 3:
        raise InputError(f"features must be (layers, examples, dim), got shape {features.shape}")
    k, n, dim = features.shape
    if len(labels) != n:
        raise InputError(f"{len(labels)} labels for {n} examples")
    classes = sorted({str(v) for v in labels})
    if len(classes) < 2:
        raise InputError("the labels take fewer than two values; there is nothing to transmit")
    index = {c: i for i, c in enumerate(classes)}
    y_all = np.fromiter((index[str(v)] for v in labels), np.int64, n)
    rng = np.random.default_rng(config.seed)
    order = rng.permutation(n)
    dev = torch.device(config.device)
    mask_all = None
    if groups is not None:
        if len(groups) != n:
            raise InputError(f"{len(groups)} groups for {n} examples")
        gids: Dict[object, int] = {}
        g = np.fromiter((gids.setdefault(v, len(gids)) for v in groups), np.int64, n)
        table = np.zeros((len(gids), len(classes)), bool)
        table[g, y_all] = True
        per_example = np.log2(table.sum(axis=1))[g]
        mask_all = torch.from_numpy(table[g[order]]).to(dev)
    else:
        per_example = np.full(n, math.log2(len(classes)))
    per_example = per_example[order]
    x = torch.from_numpy(_standardised(features, order)).to(dev)
    y = torch.from_numpy(y_all[order]).to(dev)
    bounds = block_boundaries(n)
    torch.manual_seed(config.seed)
    gen = torch.Generator().manual_seed(config.seed)
    model = _Probes(k, dim, len(classes), config.mix).to(dev)
    h = model.n_heads
    first = float(per_example[:bounds[0]].sum())
    block_bits: List[List[float]] = [[first] for _ in range(h)]
    last_acc = [0.0] * h
    report(state, 0, len(bounds) - 1, "MDL probes")
    for i in range(len(bounds) - 1):
        t, t_next = bounds[i], bounds[i + 1]
        if not config.warm_start:
            model = _Probes(k, dim, len(classes), config.mix).to(dev)
        elif config.mix:
            with torch.no_grad():                  # the mix weights restart equal (see above)
                model.s.zero_()
                model.gamma.fill_(1.0)
        _train_block(model, x[:, :t], y[:t], None if mask_all is None else mask_all[:t],
                     config, gen, state)
        nats, correct = _heldout_loss(model, x[:, t:t_next], y[t:t_next],
                                      None if mask_all is None else mask_all[t:t_next]).tolist()
        for j in range(h):
            block_bits[j].append(nats[j] / _LN2)
            last_acc[j] = correct[j] / (t_next - t)
        report(state, i + 1, len(bounds) - 1,
               f"MDL probes (block {i + 1}/{len(bounds) - 1}, {t_next}/{n} examples)")
    uniform = float(per_example.sum())
    names = list(layer_names) if layer_names is not None else [f"layer {j}" for j in range(k)]
    codes = [CodeLength(names[j], j, float(sum(block_bits[j])), uniform, block_bits[j], last_acc[j])
             for j in range(k)]
    mix = None
    if config.mix:
        weights = torch.softmax(model.s.detach(), 0).cpu().double().tolist()
        mix = CodeLength("mix", None, float(sum(block_bits[k])), uniform, block_bits[k],
                         last_acc[k], weights, float(model.gamma.detach().cpu()))
    return MDLResult(n, classes, bounds, uniform, codes, mix, asdict(config),
                     time.perf_counter() - t0)


__all__ = ["BLOCK_FRACTIONS", "CodeLength", "DESCRIPTION", "MDLConfig", "MDLResult",
           "block_boundaries", "online_codelength", "uniform_codelength"]
