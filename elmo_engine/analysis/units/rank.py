"""Units ranked for a property, and how few of them carry it.

For each layer, direction and state kind (:class:`~.collect.UnitData`), on the standardised
states of the training sentences:

* **elastic net** (as NeuroX, Dalvi et al. 2019): a softmax regression with an L1 and an L2
  penalty on its weights, trained with Adam on mini-batches; a unit's score is the sum over
  classes of its weights' magnitudes;
* **class-mean difference** (probeless, Antverg & Belinkov 2022): a unit's score is the sum over
  pairs of classes of the distance between the class means of that unit.

Then, for each ranking and each k of a small set, a plain softmax regression (L2 only) on the
top-k units against the same on k units drawn at random (one draw per seed), scored on the
held-out sentences: the curve of how few units carry the property. Sentences, not tokens, are
split, so no test sentence was seen in training.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from elmo_engine.analysis.units.collect import Key, UnitData
from elmo_engine.errors import InputError
from elmo_engine.progress import TaskState, check, report

DEFAULT_KS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class Method(str, enum.Enum):
    ELASTIC_NET = "elastic-net"
    MEAN_DIFF = "mean-diff"


@dataclass(frozen=True)
class RankSettings:
    """``l1``, ``l2``: the elastic net's penalties (per weight, added to the mean loss);
    ``epochs``, ``batch``, ``lr``: its training (at least ``min_steps`` Adam steps: more epochs
    on small data); ``test_fraction`` of the sentences held out;
    ``ks`` and ``seeds`` of the top-k curve (no curve when ``ks`` is empty); ``batched``: the
    curve's probes of one k are fitted as one batch (False: one at a time, the same accuracies
    more slowly; ``benchmarks/bench_units_curve.py`` times the two)."""

    l1: float = 1e-4
    l2: float = 1e-5
    epochs: int = 3
    min_steps: int = 300
    batch: int = 1024
    lr: float = 1e-2
    test_fraction: float = 0.2
    ks: Tuple[int, ...] = DEFAULT_KS
    seeds: int = 3
    seed: int = 0
    batched: bool = True


@dataclass
class CurvePoint:
    """Test accuracy of a probe on the top ``k`` units of ``method`` and on ``k`` random units
    (one value per seed)."""

    k: int
    method: Method
    top: float
    random: Tuple[float, ...]


@dataclass
class UnitRanking:
    """One layer-direction-state's rankings: ``order[method]`` unit ids best first,
    ``scores[method]`` per unit, ``full`` the accuracy of the elastic net on every unit,
    ``curve`` the top-k points."""

    key: Key
    order: Dict[Method, np.ndarray]
    scores: Dict[Method, np.ndarray]
    full: float
    majority: float
    curve: List[CurvePoint] = field(default_factory=list)

    def top(self, method: Method, k: int) -> Tuple[int, ...]:
        return tuple(int(u) for u in self.order[method][:k])


def split(data: UnitData, fraction: float, seed: int) -> Tuple[np.ndarray, np.ndarray]:
    """Row masks (train, test): whole sentences, ``fraction`` of them (at least one) held out."""
    sents = np.unique(data.sentence)
    if len(sents) < 2:
        raise InputError("ranking units needs at least two labelled sentences (one is held out)")
    rng = np.random.default_rng(seed)
    held = rng.permutation(sents)[:max(1, int(round(fraction * len(sents))))]
    test = np.isin(data.sentence, held)
    return ~test, test


def _standardise(x: np.ndarray, train: np.ndarray) -> torch.Tensor:
    t = torch.from_numpy(x).float()
    mean = t[train].mean(0)
    sd = t[train].std(0).clamp_min(1e-6)
    return (t - mean) / sd


def _softmax_regression(x: torch.Tensor, y: torch.Tensor, n_classes: int, st: RankSettings,
                        l1: float, l2: float, seed: int) -> torch.Tensor:
    """(D+1, C) weights (the last row the bias) of one fit: :func:`_softmax_regressions` with
    one."""
    return _softmax_regressions(x[None], y, n_classes, st, l1, l2, (seed,))[0]


def _softmax_regressions(x: torch.Tensor, y: torch.Tensor, n_classes: int, st: RankSettings,
                         l1: float, l2: float, seeds: Sequence[int]) -> torch.Tensor:
    """(R, D+1, C) weights (the last row the bias) of R independent fits, one per seed, each
    on its own columns ``x[r]`` (R, N, D) of the same rows, labels ``y`` (N,): Adam on
    mini-batches (each fit its own order of the rows, from its seed) of the mean cross-entropy
    plus ``l1``·|W|₁ + ``l2``·|W|², with the gradient written out. The R fits run as one
    batched GEMM per step (no autograd graph): a curve's probes on a few units each are bound by
    per-step overhead, not arithmetic, so R fits cost about what one did."""
    gens = [torch.Generator().manual_seed(s) for s in seeds]
    n_fits, n, dim = x.shape
    wb = torch.zeros(n_fits, dim + 1, n_classes)
    m1 = torch.zeros_like(wb)
    m2 = torch.zeros_like(wb)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    per_epoch = max(1, -(-n // st.batch))
    epochs = max(st.epochs, -(-st.min_steps // per_epoch))          # small data: more epochs
    grad = torch.empty_like(wb)
    grad_t = torch.empty(n_fits, n_classes, dim)
    xs = torch.empty_like(x)                                         # (R, N, D)
    minus_one = torch.full((n_fits, 1, st.batch), -1.0)              # the target's −1, per row
    step = 0
    for _ in range(epochs):
        perm = torch.stack([torch.randperm(n, generator=g) for g in gens])   # (R, N)
        for r in range(n_fits):             # one copy per epoch (row gathers: ~5x faster
            torch.index_select(x[r], 0, perm[r], out=xs[r])   # than one indexing of (R, N, D))
        ys = y[perm]                                                 # (R, N)
        for a in range(0, n, st.batch):
            xb_t = xs[:, a:a + st.batch].transpose(1, 2)               # (R, D, B)
            yb = ys[:, a:a + st.batch, None].transpose(1, 2)            # (R, 1, B)
            # classes × rows: a softmax over a few classes is ~20x faster along dim 1 than
            # along a last dim of that size
            wb_t = wb.transpose(1, 2)                                   # (R, C, D+1)
            p_t = torch.softmax(torch.baddbmm(wb_t[:, :, -1:], wb_t[:, :, :-1], xb_t), 1)
            p_t.scatter_add_(1, yb, minus_one[:, :, :yb.shape[2]])     # (R, C, B)
            p_t /= yb.shape[2]
            torch.bmm(p_t, xb_t.transpose(1, 2), out=grad_t)           # (R, C, D): both
            grad[:, :-1] = grad_t.transpose(1, 2)     # operands row-major, ~8x faster at D = 256
            grad[:, -1] = p_t.sum(2)
            if l1:
                grad[:, :-1] += l1 * torch.sign(wb[:, :-1])
            if l2:
                grad[:, :-1] += 2 * l2 * wb[:, :-1]
            step += 1
            m1.mul_(beta1).add_(grad, alpha=1 - beta1)
            m2.mul_(beta2).addcmul_(grad, grad, value=1 - beta2)
            denom = (m2 / (1 - beta2 ** step)).sqrt_().add_(eps)
            wb.addcdiv_(m1, denom, value=-st.lr / (1 - beta1 ** step))
    return wb


def _accuracy(wb: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> float:
    if x.shape[0] == 0:
        return float("nan")
    pred = (x @ wb[:-1] + wb[-1]).argmax(1)
    return float((pred == y).float().mean())


def mean_difference(x: torch.Tensor, y: torch.Tensor, n_classes: int) -> np.ndarray:
    """Per unit, Σ over class pairs of |mean_a − mean_b| (classes without rows left out)."""
    present = [c for c in range(n_classes) if bool((y == c).any())]
    means = torch.stack([x[y == c].mean(0) for c in present])        # (C', D)
    diff = (means[:, None, :] - means[None, :, :]).abs().sum((0, 1)) / 2
    return diff.numpy()


def rank_units(data: UnitData, settings: RankSettings = RankSettings(),
               keys: Optional[Sequence[Key]] = None, state: Optional[TaskState] = None
               ) -> List[UnitRanking]:
    """Rank the units of every key of ``data`` (or ``keys``) by both methods, with the top-k
    curve of ``settings``."""
    train, test = split(data, settings.test_fraction, settings.seed)
    y_all = torch.from_numpy(data.labels)
    n_classes = len(data.classes)
    if n_classes < 2:
        raise InputError(f"ranking units needs two classes or more; the labels have "
                         f"{n_classes} ({', '.join(data.classes)})")
    ytr, yte = y_all[torch.from_numpy(train)], y_all[torch.from_numpy(test)]
    majority = float((yte == torch.bincount(ytr, minlength=n_classes).argmax()).float().mean())
    results = []
    todo = list(keys) if keys is not None else list(data.states)
    for step, key in enumerate(todo):
        check(state)
        x = _standardise(data.states[key], train)
        xtr, xte = x[torch.from_numpy(train)], x[torch.from_numpy(test)]
        wb = _softmax_regression(xtr, ytr, n_classes, settings, settings.l1, settings.l2,
                                 settings.seed)
        net = wb[:-1].abs().sum(1).numpy()
        diff = mean_difference(xtr, ytr, n_classes)
        scores = {Method.ELASTIC_NET: net, Method.MEAN_DIFF: diff}
        order = {m: np.argsort(-s, kind="stable") for m, s in scores.items()}
        result = UnitRanking(key=key, order=order, scores=scores, full=_accuracy(wb, xte, yte),
                             majority=majority)
        width = x.shape[1]
        for k in settings.ks:
            if k > width:
                continue
            check(state)
            # one batch of fits per k: each method's top k, then k random units per seed
            picks, seeds = [], []
            for method in Method:
                picks.append(torch.from_numpy(order[method][:k].copy()))
                seeds.append(settings.seed)
                for s in range(settings.seeds):
                    gen = torch.Generator().manual_seed(settings.seed * 1000 + s * 7 + k)
                    picks.append(torch.randperm(width, generator=gen)[:k])
                    seeds.append(settings.seed + s)
            acc = _probes_on(xtr, ytr, xte, yte, picks, n_classes, settings, seeds)
            per = 1 + settings.seeds
            for i, method in enumerate(Method):
                mine = acc[i * per:(i + 1) * per]
                result.curve.append(CurvePoint(k, method, mine[0], tuple(mine[1:])))
        results.append(result)
        report(state, step + 1, len(todo), "ranking units")
    return results


def _probes_on(xtr, ytr, xte, yte, picks: Sequence[torch.Tensor], n_classes: int,
               st: RankSettings, seeds: Sequence[int]) -> List[float]:
    """Held-out accuracy of an L2 softmax probe on each set of units in ``picks`` (all of one
    size k), the fits batched (one at a time when ``st.batched`` is False)."""
    if not st.batched and len(picks) > 1:
        return [_probes_on(xtr, ytr, xte, yte, [u], n_classes, st, [s])[0]
                for u, s in zip(picks, seeds)]
    wb = _softmax_regressions(torch.stack([xtr[:, u] for u in picks]), ytr, n_classes, st, 0.0,
                              st.l2, seeds)
    return [_accuracy(wb[r], xte[:, u], yte) for r, u in enumerate(picks)]


def ranking_json(r: UnitRanking, show: int = 10) -> dict:
    """One ranking as ``units rank --json`` writes it (and the Units view saves it):
    ``layer``, ``direction``, ``state``, ``accuracy_all``, ``majority``, ``top_units`` and
    ``top_scores`` per method (``show`` each), ``curve[]`` (``k``, ``method``, ``top``,
    ``random``, ``random_mean``, ``random_sd`` — ddof 1, 0 for one seed)."""
    from elmo_engine.model.lstm_inspect import DIRECTION_NAMES

    layer, d, kind = r.key
    curve = []
    for p in r.curve:
        vals = np.array(p.random)
        curve.append({"k": p.k, "method": p.method.value, "top": p.top,
                      "random": list(p.random), "random_mean": float(vals.mean()),
                      "random_sd": float(vals.std(ddof=1)) if len(vals) > 1 else 0.0})
    return {"layer": layer, "direction": DIRECTION_NAMES[d], "state": kind.value,
            "accuracy_all": r.full, "majority": r.majority,
            "top_units": {m.value: [int(u) for u in r.order[m][:show]] for m in r.order},
            "top_scores": {m.value: [float(r.scores[m][u]) for u in r.order[m][:show]]
                           for m in r.order},
            "curve": curve}
