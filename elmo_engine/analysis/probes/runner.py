"""One probe configuration trained and scored over several seeds.

:func:`train_seeds` trains the per-layer probes and the scalar-mix probe on one labelling of the
data (the task, or its control task) once per seed, and scores them; the nearest-sense-centroid
classifier of Peters et al. (2018, §5.3) needs no training and is scored here too. The encoder
turns labels into class ids; for word sense each example's candidates are its lemma's WordNet
senses that have training examples (a padded index matrix), and a lemma with none gets WordNet's
first sense.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from elmo_engine.analysis.probes.classifiers import (EventFn, LayerProbes, MixProbe, Normaliser,
                                                     Split, fit, predict)
from elmo_engine.analysis.probes.features import (Examples, classification_scores,
                                                  per_group_accuracy)
from elmo_engine.analysis.probes.kinds import ScoringMode
from elmo_engine.progress import TaskState, check


class Encoder:
    """Labels → class ids. Restricted (WSD): the candidates of an example are its WordNet
    candidates that were seen in training (or, without WordNet, its lemma's training senses)."""

    def __init__(self, train: Examples, restricted: bool):
        self.classes = sorted(set(train.labels))
        self.index = {c: i for i, c in enumerate(self.classes)}
        self.restricted = restricted
        self.by_group: Dict[str, List[int]] = {}
        if restricted:
            for g, lab in zip(train.groups, train.labels):
                ids = self.by_group.setdefault(g, [])
                if self.index[lab] not in ids:
                    ids.append(self.index[lab])

    def candidates(self, ex: Examples) -> List[List[int]]:
        out = []
        for g, cand in zip(ex.groups, ex.candidates):
            if cand:
                out.append([self.index[s] for s in cand if s in self.index])
            else:
                out.append(list(self.by_group.get(g, ())))
        return out

    def split(self, ex: Examples, device: str) -> Split:
        x = torch.from_numpy(ex.features).to(device)                                  # (K, N, D)
        if not self.restricted:
            y = torch.tensor([self.index.get(lab, -1) for lab in ex.labels], dtype=torch.long)
            return Split(x, y.to(device), None)
        cands = self.candidates(ex)
        width = max((len(c) for c in cands), default=1) or 1
        cand = np.full((len(ex), width), -1, np.int64)
        y_np = np.full(len(ex), -1, np.int64)
        for i, (ids, lab) in enumerate(zip(cands, ex.labels)):
            cand[i, :len(ids)] = ids
            c = self.index.get(lab, -1)
            if c in ids:
                y_np[i] = ids.index(c)
        return Split(x, torch.from_numpy(y_np).to(device), torch.from_numpy(cand).to(device))

    def labels(self, split: Split, pos: torch.Tensor, ex: Examples) -> List[Optional[str]]:
        """Labels of one head's argmax positions ``pos`` (N,); WSD examples without a trained
        candidate get their first sense."""
        if split.cand is None:
            return [self.classes[int(p)] for p in pos.tolist()]
        chosen = torch.gather(split.cand, 1, pos.view(-1, 1).to(split.cand.device)).flatten()
        return [self.classes[c] if c >= 0 else ex.first_sense[i]
                for i, c in enumerate(chosen.tolist())]


def score(ex: Examples, pred: Sequence[Optional[str]], mode: ScoringMode) -> dict:
    """Scores of ``pred``; ``main`` is accuracy (tagging), F1 (WSD) or the mean per-lemma
    accuracy (:attr:`ScoringMode.LEMMA`: the demo word-sense task, with ``per_lemma``)."""
    s = classification_scores(ex.gold, pred)
    if mode is ScoringMode.LEMMA:
        g = per_group_accuracy(ex.gold, pred, ex.groups)
        s["main"], s["per_lemma"] = g["macro"], g["per_lemma"]
    else:
        s["main"] = s["f1"] if mode is ScoringMode.F1 else s["accuracy"]
    return s


def per_pos(ex: Examples, pred: Sequence[Optional[str]]) -> Dict[str, dict]:
    """WSD scores by coarse POS (per-sense scores would be thousands of rows)."""
    out = {}
    for pos in sorted({g.rsplit("#", 1)[-1] for g in ex.groups}):
        idx = [i for i, g in enumerate(ex.groups) if g.endswith("#" + pos)]
        s = classification_scores([ex.gold[i] for i in idx], [pred[i] for i in idx])
        out[pos] = {"f1": s["f1"], "precision": s["precision"], "recall": s["recall"],
                    "support": s["total"]}
    return out


def centroids(enc: Encoder, train_x: np.ndarray, train: Examples) -> torch.Tensor:
    """Unit-length mean training vector of every class, (C, D) float32 (``train_x`` (N, D))."""
    ids = torch.tensor([enc.index[lab] for lab in train.labels], dtype=torch.long)
    x = torch.from_numpy(np.asarray(train_x, dtype=np.float32))
    cent = torch.zeros(len(enc.classes), x.shape[1]).index_add_(0, ids, x)
    return torch.nn.functional.normalize(cent, dim=1)


def centroid_positions(cent: torch.Tensor, test_x: np.ndarray, split: Split) -> torch.Tensor:
    """Nearest centroid (cosine) among each example's candidates: argmax positions (N,)."""
    x = torch.from_numpy(np.asarray(test_x, dtype=np.float32))
    if split.cand is None:
        raise ValueError("centroid probes choose among candidates: the split has none")
    cand = split.cand.cpu()
    out = []
    for a in range(0, x.shape[0], 4096):
        c = cand[a:a + 4096]
        sims = torch.einsum("nd,nmd->nm", x[a:a + 4096], cent[c.clamp(min=0)])     # (n, M)
        out.append(sims.masked_fill(c < 0, -2.0).argmax(1))
    return torch.cat(out) if out else torch.zeros(0, dtype=torch.long)


@dataclass
class SeedRuns:
    """What :func:`train_seeds` found on one labelling of the data; the lists are per seed, in
    the order of the seeds (K = the number of biLM layers)."""

    encoder: "Encoder"
    layers_test: List[List[dict]] = field(default_factory=list)   # K score dicts a seed
    layers_dev: List[List[float]] = field(default_factory=list)   # K main dev scores a seed
    mix_test: List[dict] = field(default_factory=list)            # the mix probe's scores
    mix_dev: List[float] = field(default_factory=list)
    weights: List[List[float]] = field(default_factory=list)      # softmax(s), K a seed
    gamma: List[float] = field(default_factory=list)
    history: List[dict] = field(default_factory=list)             # per-layer training curves
    mix_history: List[dict] = field(default_factory=list)
    mix_centroid_test: List[float] = field(default_factory=list)  # WSD: centroids of the mix
    centroid_test: Optional[List[float]] = None                   # WSD: K, seed-free
    training_s: float = 0.0
    scoring_s: float = 0.0


def train_seeds(train: Examples, dev: Examples, test: Examples, norm: Normaliser, config,
                seeds: Sequence[int], mode: ScoringMode, prefix: str,
                state: Optional[TaskState], on_event: Optional[EventFn],
                centroid: bool = False) -> SeedRuns:
    """Per-layer and mix probes on one labelling of the data, once per seed; with ``centroid``
    also the nearest-sense-centroid scores (of each layer, and of each seed's mix)."""
    k, dim = train.n_layers, train.features.shape[2]
    wsd = mode is not ScoringMode.ACCURACY
    enc = Encoder(train, restricted=wsd)
    s_tr, s_dev, s_te = (enc.split(e, config.device) for e in (train, dev, test))
    n_cls, restricted = len(enc.classes), s_tr.cand is not None
    out = SeedRuns(enc)
    t_train = t_score = 0.0
    for seed in seeds:
        t0 = time.perf_counter()
        base = config.settings()
        layer_set = replace(base, seed=seed)
        mix_set = replace(base, seed=seed, stop_on="loss", min_epochs=config.mix_min_epochs,
                          epochs=max(base.epochs, config.mix_min_epochs))

        def emit(e, seed=seed):
            if on_event is not None:
                on_event({**e, "seed": seed})
        probes = LayerProbes(k, dim, n_cls, config.hidden, seed, restricted).to(config.device)
        hist = fit(probes, k, s_tr, s_dev, norm, layer_set, prefix + "layers", state, emit)
        mixp = MixProbe(k, dim, n_cls, config.hidden, seed, restricted).to(config.device)
        mhist = fit(mixp, 1, s_tr, s_dev, norm, mix_set, prefix + "mix", state, emit)
        t1 = time.perf_counter()
        pos_te, pos_dev = predict(probes, s_te, norm), predict(probes, s_dev, norm)
        scores = []
        for h in range(k):
            pred = enc.labels(s_te, pos_te[h], test)
            scores.append(score(test, pred, mode))
            if wsd:
                scores[-1]["per_label"] = per_pos(test, pred)
        out.layers_test.append(scores)
        out.layers_dev.append([score(dev, enc.labels(s_dev, pos_dev[h], dev), mode)["main"]
                               for h in range(k)])
        out.mix_test.append(score(test, enc.labels(s_te, predict(mixp, s_te, norm)[0], test),
                                  mode))
        out.mix_dev.append(score(dev, enc.labels(s_dev, predict(mixp, s_dev, norm)[0], dev),
                                 mode)["main"])
        out.weights.append(mixp.mix.weights_numpy().tolist())
        out.gamma.append(float(mixp.mix.gamma.detach().cpu()))
        out.history.append(hist)
        out.mix_history.append(mhist)
        if centroid:
            w = np.asarray(out.weights[-1], np.float32)
            mixed_tr, mixed_te = norm.mixed(train.features, w), norm.mixed(test.features, w)
            pos = centroid_positions(centroids(enc, mixed_tr, train), mixed_te, s_te)
            out.mix_centroid_test.append(score(test, enc.labels(s_te, pos, test), mode)["main"])
        t_train += t1 - t0
        t_score += time.perf_counter() - t1
        check(state)
    if centroid:
        t1 = time.perf_counter()
        out.centroid_test = []
        for h in range(k):
            pos = centroid_positions(centroids(enc, train.features[h], train), test.features[h],
                                     s_te)
            out.centroid_test.append(score(test, enc.labels(s_te, pos, test), mode)["main"])
        t_score += time.perf_counter() - t1
    out.training_s, out.scoring_s = t_train, t_score
    return out


__all__ = ["Encoder", "SeedRuns", "centroid_positions", "centroids", "per_pos", "score",
           "train_seeds"]
