"""Probes: which biLM layer is most useful for syntax (POS) and for semantics (word sense)?

For a labelled task this trains, on features from the activation cache (the biLM runs once):

* a linear (or one-hidden-layer MLP) probe on each layer alone, early-stopped on dev;
* the scalar-mix probe — ``γ · Σ softmax(s)_k h_k`` and a linear classifier trained together, as
  ELMo weights its layers for a downstream task; its normalised weights say how much each layer
  was *used by this probe*;
* for word sense disambiguation also the paper's nearest-sense-centroid classifier per layer
  (Peters et al. 2018, §5.3), with WordNet's first sense for lemmas unseen in training, scored as
  Raganato et al.'s scorer does (P = correct/attempted, R = correct/total, F1);
* optionally the same probes on a control task (Hewitt & Liang 2019) and the selectivity;
* baselines: the majority label (per lemma for WSD) and WordNet's first sense.

The result is a plain :class:`ProbeResult` that writes itself as JSON.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from typing import Dict, List, Optional, Sequence

import numpy as np
import torch

from elmo_engine.atomic import atomic_write_text
from elmo_engine.errors import InputError
from elmo_engine.analysis.probes.features import (ControlTask, Examples, classification_scores,
                                                  majority_baseline, split_off, subsample,
                                                  tagging_examples, wsd_examples)
from elmo_engine.analysis.probes.classifiers import (EventFn, LayerProbes, MixProbe, Normaliser,
                                                     Split, TrainSettings, fit, predict)
from elmo_engine.progress import TaskState, check

DESCRIPTION = (
    "ELMo layer probe results. 'layers': one entry per biLM layer (0 = context-free token layer) "
    "with the accuracy of a classifier trained on that layer alone on the dev split (used for "
    "early stopping) and on the test split ('test'; for WSD the F1 of Raganato et al.'s scorer, "
    "with WordNet's first sense for lemmas unseen in training); 'centroid_test' (WSD) is the "
    "nearest-sense-centroid F1 of Peters et al. (2018); with a control task, 'control_test' is "
    "the same probe's accuracy on word types mapped to random labels (Hewitt & Liang 2019) and "
    "'selectivity' = test - control_test. 'mix': the scalar-mix probe, gamma * sum_k "
    "softmax(s)_k h_k feeding one linear classifier, trained together; 'weights' are the "
    "softmax-normalised s_k (they sum to 1) and measure how useful each layer was to this probe, "
    "not what a layer 'is'. 'baselines': majority label (WSD: each lemma's most frequent training "
    "sense) and, for WSD, WordNet's first sense. 'wall_time_s': seconds from the sentences to the "
    "results, embedding included ('timings' splits it). All scores are fractions in [0, 1].")


@dataclass
class ProbeConfig(TrainSettings):
    """How to train: the optimiser's :class:`TrainSettings` plus the probe's own choices.
    ``hidden > 0`` gives a one-hidden-layer MLP instead of softmax regression."""

    hidden: int = 0
    layer_norm: bool = True
    control: bool = False
    control_seed: int = 1
    device: str = "cpu"

    def settings(self) -> TrainSettings:
        return TrainSettings(**{f.name: getattr(self, f.name) for f in fields(TrainSettings)})


@dataclass
class LayerResult:
    layer: int
    dev: float
    test: float
    macro_f1: float
    per_label: Dict[str, dict] = field(default_factory=dict)
    centroid_test: Optional[float] = None
    control_test: Optional[float] = None
    selectivity: Optional[float] = None


@dataclass
class MixResult:
    weights: List[float]
    gamma: float
    dev: float
    test: float
    macro_f1: float
    centroid_test: Optional[float] = None
    control_weights: Optional[List[float]] = None
    control_test: Optional[float] = None
    selectivity: Optional[float] = None


@dataclass
class ProbeResult:
    """Everything one probe run found; ``to_dict`` / ``write_json`` give the documented JSON."""

    task: str
    name: str
    label: str
    model: str
    layers: List[LayerResult]
    mix: MixResult
    baselines: Dict[str, float]
    counts: Dict[str, int]
    config: Dict[str, object]
    history: Dict[str, object]
    wall_time_s: float = 0.0
    timings: Dict[str, float] = field(default_factory=dict)
    description: str = DESCRIPTION

    @property
    def is_wsd(self) -> bool:
        return self.task.endswith("wsd")

    def to_dict(self) -> dict:
        d = asdict(self)
        d = {"description": d.pop("description"), **d}
        for entry in d["layers"]:
            for key in ("centroid_test", "control_test", "selectivity"):
                if entry[key] is None:
                    del entry[key]
        for key in ("centroid_test", "control_weights", "control_test", "selectivity"):
            if d["mix"][key] is None:
                del d["mix"][key]
        return d

    def write_json(self, path) -> None:
        """Write the results atomically as indented UTF-8 JSON."""
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "ProbeResult":
        """Build from a stored result, checked field by field first (a ``ValueError`` naming
        the key: :mod:`elmo_engine.io.probe_result_check`)."""
        from elmo_engine.io.probe_result_check import check_result_dict

        check_result_dict(d)
        fields = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        fields["layers"] = [LayerResult(**e) for e in d["layers"]]
        fields["mix"] = MixResult(**d["mix"])
        return cls(**fields)


class _Encoder:
    """Labels → class ids; for WSD each example's candidates are its lemma's training senses."""

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

    def split(self, ex: Examples, device: str) -> Split:
        x = torch.from_numpy(ex.features).to(device)                                  # (K, N, D)
        if not self.restricted:
            y = torch.tensor([self.index.get(lab, -1) for lab in ex.labels], dtype=torch.long)
            return Split(x, y.to(device), None)
        width = max((len(self.by_group.get(g, ())) for g in ex.groups), default=1) or 1
        cand = torch.full((len(ex), width), -1, dtype=torch.long)
        y = torch.full((len(ex),), -1, dtype=torch.long)
        for i, (g, lab) in enumerate(zip(ex.groups, ex.labels)):
            ids = self.by_group.get(g, [])
            cand[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            if self.index.get(lab, -1) in ids:
                y[i] = ids.index(self.index[lab])
        return Split(x, y.to(device), cand.to(device))

    def labels(self, split: Split, pos: torch.Tensor, ex: Examples) -> List[Optional[str]]:
        """Labels of one head's argmax positions ``pos`` (N,); WSD examples of lemmas unseen in
        training (no candidates) get their first sense."""
        if split.cand is None:
            return [self.classes[int(p)] for p in pos]
        out: List[Optional[str]] = []
        for i, p in enumerate(pos.tolist()):
            c = int(split.cand[i, p])
            out.append(self.classes[c] if c >= 0 else ex.first_sense[i])             # unseen lemma
        return out


def _score(gold, pred, wsd: bool) -> dict:
    s = classification_scores(gold, pred)
    s["main"] = s["f1"] if wsd else s["accuracy"]
    return s


def _per_pos(ex: Examples, pred: Sequence[Optional[str]]) -> Dict[str, dict]:
    """WSD scores by coarse POS (per-sense scores would be thousands of rows)."""
    out = {}
    for pos in sorted({g.rsplit("#", 1)[-1] for g in ex.groups}):
        idx = [i for i, g in enumerate(ex.groups) if g.endswith("#" + pos)]
        s = classification_scores([ex.gold[i] for i in idx], [pred[i] for i in idx])
        out[pos] = {"f1": s["f1"], "precision": s["precision"], "recall": s["recall"],
                    "support": s["total"]}
    return out


def centroid_predictions(train_x: np.ndarray, train: Examples, test_x: np.ndarray, test: Examples
                         ) -> List[Optional[str]]:
    """Nearest sense centroid (cosine) among the senses the lemma had in training; WordNet's first
    sense for lemmas unseen in training. ``train_x`` (N, D) and ``test_x`` (M, D) for one layer."""
    senses: Dict[str, List[int]] = {}
    for i, lab in enumerate(train.labels):
        senses.setdefault(lab, []).append(i)
    keys = sorted(senses)
    cent = np.stack([train_x[senses[k]].mean(axis=0) for k in keys]).astype(np.float64)  # (S, D)
    cent /= np.linalg.norm(cent, axis=1, keepdims=True) + 1e-12
    kid = {k: i for i, k in enumerate(keys)}
    by_group: Dict[str, List[int]] = {}
    for g, lab in zip(train.groups, train.labels):
        ids = by_group.setdefault(g, [])
        if kid[lab] not in ids:
            ids.append(kid[lab])
    out: List[Optional[str]] = []
    for i, g in enumerate(test.groups):
        ids = by_group.get(g)
        if not ids:
            out.append(test.first_sense[i])
            continue
        sims = cent[ids] @ test_x[i].astype(np.float64)                                # (S_g,)
        out.append(keys[ids[int(np.argmax(sims))]])
    return out


def run_probe(train: Examples, dev: Examples, test: Examples, config: ProbeConfig = ProbeConfig(),
              task: str = "pos", name: str = "", label: str = "", model: str = "",
              state: Optional[TaskState] = None, on_event: Optional[EventFn] = None
              ) -> ProbeResult:
    """Train and score every probe on ready-made examples (see ``probe_features``)."""
    t0 = time.perf_counter()
    wsd = task.endswith("wsd")
    if train.n_layers != test.n_layers or train.n_layers != dev.n_layers:
        raise InputError("train, dev and test features come from different models")
    if len(set(train.labels)) < 2 and not wsd:
        raise InputError("the training data has fewer than two distinct labels; nothing to probe")
    k = train.n_layers
    norm = Normaliser(train.features, config.layer_norm)
    settings = config.settings()
    main = _train_all(train, dev, test, norm, config, settings, wsd, "", state, on_event)
    layers = []
    for h in range(k):
        layers.append(LayerResult(h, main["dev"][h], main["test"][h]["main"],
                                  main["test"][h]["macro_f1"], main["per_label"][h]))
    mix_t = main["mix_test"]
    mix = MixResult(main["weights"], main["gamma"], main["mix_dev"], mix_t["main"], mix_t["macro_f1"])
    history = {"layers": main["history"], "mix": main["mix_history"]}
    if wsd:
        tr_n, te_n = norm.numpy(train.features), norm.numpy(test.features)
        for h in range(k):
            check(state)
            layers[h].centroid_test = _score(test.gold, centroid_predictions(
                train.features[h], train, test.features[h], test), True)["main"]
        w = np.asarray(main["weights"], np.float32)
        mixed_tr = np.tensordot(w, tr_n, axes=(0, 0))
        mixed_te = np.tensordot(w, te_n, axes=(0, 0))
        mix.centroid_test = _score(test.gold, centroid_predictions(mixed_tr, train, mixed_te, test),
                                   True)["main"]
    if config.control:
        ctl = ControlTask(train, config.control_seed)
        c_train, c_dev, c_test = ctl.relabel(train), ctl.relabel(dev), ctl.relabel(test)
        cres = _train_all(c_train, c_dev, c_test, norm, config, settings, wsd, "control ",
                          state, on_event)
        for h in range(k):
            layers[h].control_test = cres["test"][h]["main"]
            layers[h].selectivity = layers[h].test - layers[h].control_test
        mix.control_weights = cres["weights"]
        mix.control_test = cres["mix_test"]["main"]
        mix.selectivity = mix.test - mix.control_test
        history["control_layers"] = cres["history"]
        history["control_mix"] = cres["mix_history"]
    counts = {"train": len(train), "dev": len(dev), "test": len(test),
              "train_sentences": train.n_sentences, "dev_sentences": dev.n_sentences,
              "test_sentences": test.n_sentences, "labels": len(set(train.labels)),
              "dim": int(train.features.shape[2])}
    cfg = asdict(config)
    elapsed = time.perf_counter() - t0
    return ProbeResult(task, name or task, label, model, layers, mix,
                       majority_baseline(train, test), counts, cfg, history, elapsed,
                       {"probe_training_s": elapsed})


def _train_all(train: Examples, dev: Examples, test: Examples, norm: Normaliser,
               config: ProbeConfig, settings: TrainSettings, wsd: bool, prefix: str,
               state: Optional[TaskState], on_event: Optional[EventFn]) -> dict:
    """Per-layer probes and the mix probe on one labelling of the data."""
    k, dim = train.n_layers, train.features.shape[2]
    enc = _Encoder(train, restricted=wsd)
    s_tr, s_dev, s_te = (enc.split(e, config.device) for e in (train, dev, test))
    n_cls = len(enc.classes)
    restricted = s_tr.cand is not None
    per_layer = LayerProbes(k, dim, n_cls, config.hidden, config.seed, restricted).to(config.device)
    hist = fit(per_layer, k, s_tr, s_dev, norm, settings, prefix + "layers", state, on_event)
    out: dict = {"history": hist, "test": [], "per_label": [], "dev": []}
    pos_te, pos_dev = predict(per_layer, s_te, norm), predict(per_layer, s_dev, norm)
    for h in range(k):
        pred = enc.labels(s_te, pos_te[h], test)
        out["test"].append(_score(test.gold, pred, wsd))
        out["per_label"].append(_per_pos(test, pred) if wsd else out["test"][-1]["per_label"])
        out["dev"].append(_score(dev.gold, enc.labels(s_dev, pos_dev[h], dev), wsd)["main"])
    mixp = MixProbe(k, dim, n_cls, config.hidden, config.seed, restricted).to(config.device)
    out["mix_history"] = fit(mixp, 1, s_tr, s_dev, norm, settings, prefix + "mix", state, on_event)
    out["weights"] = mixp.mix.weights_numpy().tolist()
    out["gamma"] = float(mixp.mix.gamma.detach().cpu())
    out["mix_test"] = _score(test.gold, enc.labels(s_te, predict(mixp, s_te, norm)[0], test), wsd)
    out["mix_dev"] = _score(dev.gold, enc.labels(s_dev, predict(mixp, s_dev, norm)[0], dev), wsd)["main"]
    return out


def probe_sentences(embedder, train: Sequence, test: Sequence, dev: Optional[Sequence] = None,
                    task: str = "pos", config: ProbeConfig = ProbeConfig(), name: str = "",
                    label: str = "", max_train_sentences: Optional[int] = None,
                    dev_fraction: float = 0.1, first_sense_fn=None,
                    state: Optional[TaskState] = None, on_event: Optional[EventFn] = None
                    ) -> ProbeResult:
    """Embed labelled sentences once and run :func:`run_probe` on them.

    Parameters
    ----------
    embedder : an :class:`~elmo_engine.embed.embedder.Embedder`
    train, test, dev : ``LabelledSentence`` lists (tagging) or ``WsdSentence`` lists (WSD);
        without ``dev`` a seeded ``dev_fraction`` of the training sentences is held out
    task : "pos", "tsv", "wsd", "demo-pos", "demo-wsd" … (a name ending in "wsd" means WSD)
    max_train_sentences : keep a seeded random subset of this many training sentences
    first_sense_fn : ``(lemma, pos) -> sense key`` for WSD instances without candidates
    """
    t0 = time.perf_counter()
    train = subsample(train, max_train_sentences, config.seed)
    if dev is None:
        train, dev = split_off(train, dev_fraction, config.seed)
    if task.endswith("wsd"):
        def extract(sents, what):
            return wsd_examples(embedder, sents, state, what, first_sense_fn=first_sense_fn)
    else:
        def extract(sents, what):
            return tagging_examples(embedder, sents, state, what)
    ex_train, ex_dev, ex_test = extract(train, "training"), extract(dev, "dev"), extract(test, "test")
    embed_s = time.perf_counter() - t0
    info = getattr(getattr(embedder, "model", None), "info", None)
    model = getattr(info, "name", "") or getattr(embedder, "checksum", "")[:16]
    result = run_probe(ex_train, ex_dev, ex_test, config, task, name, label, str(model), state,
                       on_event)
    result.wall_time_s = time.perf_counter() - t0
    result.timings["embedding_s"] = embed_s
    result.config["max_train_sentences"] = max_train_sentences
    return result


__all__ = ["DESCRIPTION", "LayerResult", "MixResult", "ProbeConfig", "ProbeResult",
           "centroid_predictions", "probe_sentences", "run_probe"]
