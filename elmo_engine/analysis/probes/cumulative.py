"""Cumulative scoring: how much each biLM layer adds to a probe on the layers below it.

I. Tenney, D. Das and E. Pavlick, "BERT Rediscovers the Classical NLP Pipeline", ACL 2019, §3.
For every layer ``ℓ = 0 … L`` a scalar-mix probe ``P^(ℓ)`` is trained on layers ``0 … ℓ`` only
(``γ · Σ_{k≤ℓ} softmax(s)_k h_k`` and one linear classifier, exactly the probe and training of
the full scalar mix, :class:`~elmo_engine.analysis.probes.classifiers.MixProbe` through
:func:`~elmo_engine.analysis.probes.classifiers.fit`). Its test score is the **cumulative
score**, and the **differential score** is what layer ``ℓ`` adds::

    Δ^(ℓ) = Score(P^(ℓ)) − Score(P^(ℓ−1))        (ℓ ≥ 1; P^(0) is a probe on layer 0)

Two centres of gravity summarise where a task is handled (their §3, eqs. 1–2)::

    E_s[ℓ] = Σ_ℓ ℓ · s^(ℓ)                        the scalar-mix weights of the full probe
    E_Δ[ℓ] = Σ_{ℓ≥1} ℓ · Δ^(ℓ) / Σ_{ℓ≥1} Δ^(ℓ)    the differential scores

``E_Δ`` is undefined when the layers after 0 add nothing in total (``Σ Δ ≤ 0``). With positive
Δs it lies in ``[1, L]`` while ``E_s`` lies in ``[0, L]``: the two are read side by side, as the
paper does, not as one number. The probe on all layers (``ℓ = L``) is the full scalar-mix probe,
whose scores per seed the caller passes in (the same probe, seed and training): it is not
trained twice.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import List, Optional, Sequence

import numpy as np

from elmo_engine.analysis.probes.classifiers import (EventFn, MixProbe, Normaliser, Split, fit,
                                                     predict)
from elmo_engine.analysis.probes.features import Examples
from elmo_engine.analysis.probes.kinds import ScoringMode
from elmo_engine.analysis.probes.runner import Encoder, score
from elmo_engine.progress import TaskState, check

#: Σ Δ at or under this: the layers after 0 added nothing, E_Δ is undefined
MIN_TOTAL_GAIN = 1e-9


def expected_layer_from_weights(weights: Sequence[float]) -> float:
    """``E_s[ℓ] = Σ_ℓ ℓ · s_ℓ`` of normalised scalar-mix weights (renormalised to sum to 1)."""
    w = np.asarray(weights, np.float64)                                               # (K,)
    if w.ndim != 1 or len(w) == 0 or not np.all(w >= 0) or w.sum() <= 0:
        raise ValueError(f"scalar-mix weights must be non-negative and not all 0: {list(w)}")
    return float((np.arange(len(w)) * w).sum() / w.sum())


def expected_layer_from_deltas(deltas: Sequence[Optional[float]]) -> Optional[float]:
    """``E_Δ[ℓ] = Σ_{ℓ≥1} ℓ·Δ^(ℓ) / Σ_{ℓ≥1} Δ^(ℓ)``; ``deltas[0]`` (layer 0 has no Δ) is ignored.
    None when ``Σ_{ℓ≥1} Δ^(ℓ) ≤`` :data:`MIN_TOTAL_GAIN`."""
    d = np.asarray([0.0 if v is None else v for v in deltas[1:]], np.float64)       # (L,)
    total = float(d.sum())
    if total <= MIN_TOTAL_GAIN:
        return None
    return float((np.arange(1, len(d) + 1) * d).sum() / total)


def differences(scores: Sequence[float]) -> List[Optional[float]]:
    """``Δ^(ℓ) = scores[ℓ] − scores[ℓ−1]``, None at layer 0."""
    return [None] + [float(scores[i] - scores[i - 1]) for i in range(1, len(scores))]


def _stats(values: "Sequence[float] | np.ndarray"):
    v = np.asarray(values, np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


@dataclass
class CumulativeResult:
    """Cumulative scores over seeds (K = the number of layers; lists per layer ``ℓ``).

    ``scores`` / ``scores_sd``: the probe on layers ``0 … ℓ``, mean and sample sd over seeds;
    ``per_seed``: seeds × K; ``deltas`` / ``deltas_sd``: Δ^(ℓ) (None at ℓ = 0), from each seed's
    scores; ``expected_layer``: E_Δ of the mean Δs, ``expected_layer_sd`` the sd of the seeds'
    own E_Δ (None where undefined); ``epochs``: seeds × K epochs trained (the last column the
    full mix's, not retrained: 0)."""

    scores: List[float]
    scores_sd: List[float]
    per_seed: List[List[float]]
    deltas: List[Optional[float]]
    deltas_sd: List[Optional[float]]
    expected_layer: Optional[float]
    expected_layer_sd: Optional[float]
    epochs: List[List[int]] = field(default_factory=list)
    training_s: float = 0.0


def summarise(per_seed: Sequence[Sequence[float]],
              epochs: Optional[List[List[int]]] = None) -> CumulativeResult:
    """Means, sds, Δs and E_Δ of cumulative scores ``per_seed`` (seeds × K)."""
    s = np.asarray(per_seed, np.float64)                                              # (S, K)
    if s.ndim != 2 or s.shape[0] < 1 or s.shape[1] < 1:
        raise ValueError(f"cumulative scores must be seeds × layers, got shape {s.shape}")
    k = s.shape[1]
    means = [_stats(s[:, h]) for h in range(k)]
    deltas: List[Optional[float]] = [None]
    deltas_sd: List[Optional[float]] = [None]
    for h in range(1, k):
        m, sd = _stats(s[:, h] - s[:, h - 1])
        deltas.append(m)
        deltas_sd.append(sd)
    own = [expected_layer_from_deltas(differences(row)) for row in s]
    defined = [e for e in own if e is not None]
    e_sd = _stats(defined)[1] if len(defined) == len(own) else None
    return CumulativeResult([m for m, _ in means], [sd for _, sd in means], s.tolist(), deltas,
                            deltas_sd, expected_layer_from_deltas(deltas), e_sd,
                            epochs or [])


def cumulative_scores(train: Examples, dev: Examples, test: Examples, norm: Normaliser, config,
                      seeds: Sequence[int], mode: ScoringMode, full_mix: Sequence[float],
                      state: Optional[TaskState] = None,
                      on_event: Optional[EventFn] = None) -> CumulativeResult:
    """Train the scalar-mix probe on layers ``0 … ℓ`` for ``ℓ < K−1`` and every seed, as
    :func:`~elmo_engine.analysis.probes.runner.train_seeds` trains the full mix (the same
    settings: at least ``config.mix_min_epochs`` epochs, then early stopping on dev loss);
    ``full_mix``: the full mix probe's test score per seed, the last cumulative score.

    Progress and training events carry the phase ``"cumulative 0..ℓ mix"``; ``state`` cancels
    between minibatches."""
    k = train.n_layers
    if len(full_mix) != len(seeds):
        raise ValueError(f"{len(full_mix)} full-mix scores for {len(seeds)} seeds")
    wsd = mode is not ScoringMode.ACCURACY
    enc = Encoder(train, restricted=wsd)
    s_tr, s_dev, s_te = (enc.split(e, config.device) for e in (train, dev, test))
    n_cls, restricted = len(enc.classes), s_tr.cand is not None
    dim = train.features.shape[2]
    t0 = time.perf_counter()
    per_seed: List[List[float]] = []
    epochs: List[List[int]] = []
    for seed, full in zip(seeds, full_mix):
        base = config.settings()
        mix_set = replace(base, seed=seed, stop_on="loss", min_epochs=config.mix_min_epochs,
                          epochs=max(base.epochs, config.mix_min_epochs))

        def emit(e, seed=seed):
            if on_event is not None:
                on_event({**e, "seed": seed})
        row: List[float] = []
        ep: List[int] = []
        for top in range(k - 1):
            n = top + 1
            part = [Split(sp.x[:n], sp.y, sp.cand) for sp in (s_tr, s_dev, s_te)]  # (n, N, D)
            sub = norm.first(n)
            probe = MixProbe(n, dim, n_cls, config.hidden, seed, restricted).to(config.device)
            hist = fit(probe, 1, part[0], part[1], sub, mix_set, f"cumulative 0..{top} mix",
                       state, emit)
            pred = enc.labels(part[2], predict(probe, part[2], sub)[0], test)
            row.append(float(score(test, pred, mode)["main"]))
            ep.append(int(hist["epochs"]))                    # type: ignore[call-overload]
            check(state)
        per_seed.append(row + [float(full)])
        epochs.append(ep + [0])
    out = summarise(per_seed, epochs)
    out.training_s = time.perf_counter() - t0
    return out


__all__ = ["CumulativeResult", "MIN_TOTAL_GAIN", "cumulative_scores", "differences",
           "expected_layer_from_deltas", "expected_layer_from_weights", "summarise"]
