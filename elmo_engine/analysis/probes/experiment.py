"""Probes: which biLM layer is most useful for syntax (POS) and for semantics (word sense)?

For a labelled task this trains, on features from the activation cache (the biLM runs once),
over several seeds (mean ± sd):

* a linear (or one-hidden-layer MLP) probe on each layer alone, early-stopped on dev accuracy;
* the scalar-mix probe — ``γ · Σ softmax(s)_k h_k`` and a linear classifier trained together, as
  ELMo weights its layers for a downstream task, for at least ``mix_min_epochs`` epochs and then
  early-stopped on dev loss; its normalised weights say how much each layer was *used by this
  probe* (a note says when they are still near uniform);
* for word sense disambiguation, over each lemma's WordNet candidate senses only, also the
  paper's nearest-sense-centroid classifier per layer (Peters et al. 2018, §5.3), with WordNet's
  first sense for lemmas unseen in training, scored as Raganato et al.'s scorer does (P =
  correct/attempted, R = correct/total, F1);
* optionally the same probes on a control task (Hewitt & Liang 2019) and the selectivity;
* baselines, and a flag on every score under the task's reference baseline.

The result is a plain :class:`ProbeResult` that writes itself as JSON.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from elmo_engine.atomic import atomic_write_text
from elmo_engine.errors import InputError
from elmo_engine.analysis.probes.features import (ControlTask, Examples, majority_baseline,
                                                  split_off, subsample, tagging_examples,
                                                  wsd_examples)
from elmo_engine.analysis.probes.classifiers import EventFn, Normaliser, TrainSettings
from elmo_engine.analysis.probes.kinds import ScoringMode, TaskKind
from elmo_engine.analysis.probes.runner import (Encoder, centroid_positions, centroids,
                                                train_seeds)
from elmo_engine.analysis.probes.usefulness import Usefulness
from elmo_engine.progress import TaskState

#: a mix whose weights all lie within this of 1/K is reported as "near uniform"
NEAR_UNIFORM = 0.05
WSD_CONTROL_NOTE = (
    "WSD control task: each word form (within its lemma) gets one sense drawn uniformly from the "
    "lemma's WordNet senses; a probe reaches it only by remembering the form, so a high control "
    "score says the layer identifies word forms, and selectivity = task - control can be "
    "negative (most lemmas have one form). Compare layers with each other and with the baseline.")

DESCRIPTION = (
    "ELMo layer probe results, every configuration trained over the seeds in 'seeds'. A score "
    "field holds the mean over seeds; '<name>_sd' is its sample standard deviation and "
    "'<name>_per_seed' the values per seed. 'layers': one entry per biLM layer (0 = context-free "
    "token layer) with the dev score (dev is used for early stopping) and the test score ('test'; "
    "accuracy for tagging, Raganato et al.'s F1 for WSD with WordNet's first sense for lemmas "
    "unseen in training, the mean of the per-lemma accuracies for the demo word-sense task, whose "
    "'per_lemma' lists them); 'centroid_test' (WSD) is the nearest-sense-centroid score of Peters "
    "et al. (2018); with a control task, 'control_test' is the same probe's score on word types "
    "mapped to random labels (Hewitt & Liang 2019) and 'selectivity' = test - control_test. "
    "'below_baseline' is true when a test score is under baselines[reference_baseline]. 'mix': the "
    "scalar-mix probe, gamma * sum_k softmax(s)_k h_k feeding one linear classifier, trained "
    "together (at least config.mix_min_epochs epochs, then early stopping on dev loss); 'weights' "
    "are the softmax-normalised s_k (they sum to 1) and measure how useful each layer was to this "
    "probe, not what a layer 'is'; 'near_uniform' is true when max_k |w_k - 1/K| < 0.05. "
    "'notes' says in words what is flagged. 'timings' splits 'wall_time_s' (reading, embedding, "
    "training, scoring). All scores are fractions in [0, 1].")


#: defaults of a task that differ from :class:`ProbeConfig`'s. Word sense over SemCor: ~30,000
#: sense rows with a few examples each overfit fast — at lr 3e-3 dev accuracy peaks lower and
#: later (epoch 18) than at 1e-3 (epoch 4), and the mix's dev loss is lowest at epoch 2 and rises
#: after, so ten forced epochs only cost time; after epoch 5 the per-layer dev accuracies creep
#: up by 0.001–0.002 an epoch, under the standard error of a ~23,000-instance dev split (0.003),
#: so only a gain over 0.005 restarts the patience (docs/guide/probes.md, "Word sense")
TASK_DEFAULTS: Dict[str, Dict[str, object]] = {
    "wsd": {"lr": 1e-3, "batch_size": 1024, "mix_min_epochs": 3, "min_delta": 0.005},
    # part of speech: at 1e-3 every layer scores 0.001-0.003 higher than at 3e-3 (3 seeds, EWT
    # 4,000 → dev and the demo task) and the mix weights layer 1 more clearly
    "pos": {"lr": 1e-3},
    "demo-pos": {"lr": 1e-3},
}


@dataclass
class ProbeConfig(TrainSettings):
    """How to train: the optimiser's :class:`TrainSettings` plus the probe's own choices.
    ``hidden > 0`` gives a one-hidden-layer MLP instead of softmax regression; ``n_seeds`` runs
    seeds ``seed, seed+1, …`` (initialisation and minibatch order; the dev split stays fixed)."""

    hidden: int = 0
    layer_norm: bool = True
    control: bool = False
    control_seed: int = 1
    device: str = "cpu"
    n_seeds: int = 3
    mix_min_epochs: int = 10

    def settings(self) -> TrainSettings:
        return TrainSettings(**{f.name: getattr(self, f.name) for f in fields(TrainSettings)})

    def for_task(self, task: "str | TaskKind") -> "ProbeConfig":
        """This configuration with the task's own defaults (:data:`TASK_DEFAULTS`) in the
        settings that still hold the general default."""
        base = ProbeConfig()
        own: Dict[str, Any] = {k: v for k, v in TASK_DEFAULTS.get(TaskKind.of(task).value, {}).items()
               if getattr(self, k) == getattr(base, k)}
        return replace(self, **own)


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
    dev_sd: float = 0.0
    test_sd: float = 0.0
    test_per_seed: List[float] = field(default_factory=list)
    control_test_sd: Optional[float] = None
    selectivity_sd: Optional[float] = None
    below_baseline: bool = False
    per_lemma: Optional[Dict[str, dict]] = None


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
    weights_sd: List[float] = field(default_factory=list)
    weights_per_seed: List[List[float]] = field(default_factory=list)
    gamma_sd: float = 0.0
    dev_sd: float = 0.0
    test_sd: float = 0.0
    test_per_seed: List[float] = field(default_factory=list)
    centroid_test_sd: Optional[float] = None
    control_test_sd: Optional[float] = None
    selectivity_sd: Optional[float] = None
    epochs_per_seed: List[int] = field(default_factory=list)
    near_uniform: bool = False
    below_baseline: bool = False


_OPTIONAL = ("centroid_test", "control_test", "selectivity", "control_test_sd", "selectivity_sd",
             "centroid_test_sd", "control_weights", "per_lemma")


@dataclass
class ProbeResult:
    """Everything one probe run found; ``to_dict`` / ``write_json`` give the documented JSON.
    ``command``: the command line that made it (recorded reference results carry one)."""

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
    seeds: List[int] = field(default_factory=list)
    reference_baseline: str = ""
    notes: List[str] = field(default_factory=list)
    command: Optional[str] = None
    usefulness: Optional[Usefulness] = None      # probe --cumulative (usefulness.py)

    @property
    def kind(self) -> Optional[TaskKind]:
        """The task's kind (None for a task name this version does not know)."""
        try:
            return TaskKind(self.task)
        except ValueError:
            return None

    @property
    def is_wsd(self) -> bool:
        return self.kind is not None and self.kind.is_wsd

    @property
    def semantic(self) -> bool:
        return self.is_wsd or "sense" in self.task

    def to_dict(self) -> dict:
        d = asdict(self)
        d = {"description": d.pop("description"), **d}
        for entry in d["layers"] + [d["mix"]]:
            for key in _OPTIONAL:
                if key in entry and entry[key] is None:
                    del entry[key]
        if d["command"] is None:
            del d["command"]
        if d["usefulness"] is None:
            del d["usefulness"]
        return d

    def write_json(self, path) -> None:
        """Write the results atomically as indented UTF-8 JSON."""
        atomic_write_text(path, json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n")

    @classmethod
    def from_dict(cls, d: dict) -> "ProbeResult":
        """A result from its JSON, checked field by field first (a ``ValueError`` naming the key:
        :mod:`elmo_engine.io.probe_result_check`); older files without the seed fields load too."""
        from elmo_engine.io.probe_result_check import check_result_dict

        check_result_dict(d)
        fields_ = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        fields_["layers"] = [LayerResult(**{k: v for k, v in e.items()
                                            if k in LayerResult.__dataclass_fields__})
                             for e in d["layers"]]
        fields_["mix"] = MixResult(**{k: v for k, v in d["mix"].items()
                                      if k in MixResult.__dataclass_fields__})
        if d.get("usefulness") is not None:
            fields_["usefulness"] = Usefulness.from_dict(d["usefulness"])
            if len(fields_["usefulness"].rows) != len(fields_["layers"]):
                raise ValueError("key 'usefulness.rows' must hold one row per layer")
        return cls(**fields_)


def _stats(values: Sequence[float]):
    """Mean and sample standard deviation (0 for a single value)."""
    v = np.asarray(values, dtype=np.float64)
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else 0.0


def centroid_predictions(train_x: np.ndarray, train: Examples, test_x: np.ndarray, test: Examples
                         ) -> List[Optional[str]]:
    """Nearest sense centroid (cosine) among the lemma's candidates that have training examples;
    WordNet's first sense otherwise. ``train_x`` (N, D) and ``test_x`` (M, D) for one layer."""
    enc = Encoder(train, restricted=True)
    split = enc.split(test, "cpu")
    return enc.labels(split, centroid_positions(centroids(enc, train_x, train), test_x, split),
                      test)


def run_probe(train: Examples, dev: Examples, test: Examples, config: ProbeConfig = ProbeConfig(),
              task: "str | TaskKind" = TaskKind.POS, name: str = "", label: str = "",
              model: str = "", state: Optional[TaskState] = None,
              on_event: Optional[EventFn] = None) -> ProbeResult:
    """Train and score every probe on ready-made examples, over ``config.n_seeds`` seeds."""
    t0 = time.perf_counter()
    kind = TaskKind.of(task)
    wsd, mode = kind.is_wsd, kind.scoring
    if train.n_layers != test.n_layers or train.n_layers != dev.n_layers:
        raise InputError("train, dev and test features come from different models")
    if len(set(train.labels)) < 2 and not wsd:
        raise InputError("the training data has fewer than two distinct labels; nothing to probe")
    if config.n_seeds < 1:
        raise InputError("need at least one seed")
    k = train.n_layers
    norm = Normaliser(train.features, config.layer_norm)
    seeds = [config.seed + i for i in range(config.n_seeds)]
    main = train_seeds(train, dev, test, norm, config, seeds, mode, "", state, on_event,
                       centroid=wsd)
    baselines = majority_baseline(train, test, per_lemma=mode is ScoringMode.LEMMA)
    ref = "first_sense" if mode is ScoringMode.F1 else ("majority" if wsd else "word_majority")
    ref_value = baselines.get(ref)
    layers = []
    for h in range(k):
        tests = [run[h]["main"] for run in main.layers_test]
        t_mean, t_sd = _stats(tests)
        d_mean, d_sd = _stats([run[h] for run in main.layers_dev])
        first = main.layers_test[0][h]
        lay = LayerResult(h, d_mean, t_mean, _stats([r[h]["macro_f1"] for r in main.layers_test])[0],
                          first["per_label"], dev_sd=d_sd, test_sd=t_sd, test_per_seed=tests,
                          per_lemma=first.get("per_lemma"))
        if wsd and main.centroid_test is not None:
            lay.centroid_test = main.centroid_test[h]
        layers.append(lay)
    w = np.asarray(main.weights, np.float64)                                          # (S, K)
    mtests = [m["main"] for m in main.mix_test]
    mix = MixResult(w.mean(0).tolist(), _stats(main.gamma)[0], _stats(main.mix_dev)[0],
                    _stats(mtests)[0], _stats([m["macro_f1"] for m in main.mix_test])[0],
                    weights_sd=(w.std(0, ddof=1) if len(w) > 1 else np.zeros(k)).tolist(),
                    weights_per_seed=w.tolist(), gamma_sd=_stats(main.gamma)[1],
                    dev_sd=_stats(main.mix_dev)[1], test_sd=_stats(mtests)[1],
                    test_per_seed=mtests,
                    epochs_per_seed=[hh["epochs"] for hh in main.mix_history])
    if wsd:
        mix.centroid_test, mix.centroid_test_sd = _stats(main.mix_centroid_test)
    history: Dict[str, object] = {"layers": main.history[0], "mix": main.mix_history[0]}
    timings = {"training_s": main.training_s, "scoring_s": main.scoring_s}
    notes: List[str] = []
    if config.control:
        ctl = ControlTask(train, config.control_seed)
        cres = train_seeds(ctl.relabel(train), ctl.relabel(dev), ctl.relabel(test), norm, config,
                           seeds, mode, "control ", state, on_event)
        for h in range(k):
            c = [run[h]["main"] for run in cres.layers_test]
            layers[h].control_test, layers[h].control_test_sd = _stats(c)
            layers[h].selectivity, layers[h].selectivity_sd = _stats(
                np.asarray(layers[h].test_per_seed) - np.asarray(c))
        c = [m["main"] for m in cres.mix_test]
        mix.control_weights = np.asarray(cres.weights).mean(0).tolist()
        mix.control_test, mix.control_test_sd = _stats(c)
        mix.selectivity, mix.selectivity_sd = _stats(np.asarray(mtests) - np.asarray(c))
        history["control_layers"] = cres.history[0]
        history["control_mix"] = cres.mix_history[0]
        timings["training_s"] += cres.training_s
        timings["scoring_s"] += cres.scoring_s
        if wsd:
            notes.append(WSD_CONTROL_NOTE)
    dev_w = float(np.max(np.abs(np.asarray(mix.weights) - 1.0 / k)))
    mix.near_uniform = dev_w < NEAR_UNIFORM
    if mix.near_uniform:
        notes.append(f"mix weights near uniform (max |w_k - 1/K| = {dev_w:.3f} < {NEAR_UNIFORM}): "
                     "this probe did not prefer a layer")
    if ref_value is not None:
        for entry, what in [(lay, f"layer {lay.layer}") for lay in layers] + [(mix, "mix")]:
            entry.below_baseline = entry.test < ref_value
            if entry.below_baseline:
                notes.append(f"{what}: test {entry.test:.4f} is under the {ref} baseline "
                             f"({ref_value:.4f})")
    counts = {"train": len(train), "dev": len(dev), "test": len(test),
              "train_sentences": train.n_sentences, "dev_sentences": dev.n_sentences,
              "test_sentences": test.n_sentences, "labels": len(set(train.labels)),
              "dim": int(train.features.shape[2])}
    elapsed = time.perf_counter() - t0
    return ProbeResult(kind.value, name or kind.value, label, model, layers, mix, baselines, counts,
                       asdict(config), history, elapsed, timings, seeds=seeds,
                       reference_baseline=ref if ref_value is not None else "", notes=notes)


def probe_sentences(embedder, train: Sequence, test: Sequence, dev: Optional[Sequence] = None,
                    task: "str | TaskKind" = TaskKind.POS, config: ProbeConfig = ProbeConfig(),
                    name: str = "", label: str = "", max_train_sentences: Optional[int] = None,
                    dev_fraction: float = 0.1, first_sense_fn=None,
                    state: Optional[TaskState] = None, on_event: Optional[EventFn] = None,
                    cumulative: bool = False) -> ProbeResult:
    """Embed labelled sentences once and run :func:`run_probe` on them.

    Parameters
    ----------
    embedder : an :class:`~elmo_engine.embed.embedder.Embedder`
    train, test, dev : ``LabelledSentence`` lists (tagging) or ``WsdSentence`` lists (WSD);
        without ``dev`` a seeded ``dev_fraction`` of the training sentences is held out
    task : a :class:`TaskKind` or its value ("pos", "tsv", "wsd", "demo-pos", "demo-wsd", …)
    max_train_sentences : keep a seeded random subset of this many training sentences
    first_sense_fn : ``(lemma, pos) -> sense key`` for WSD instances without candidates
    cumulative : also the usefulness table (the control task, the cumulative probes of Tenney
        et al. 2019 and the MDL probes: :func:`~.usefulness.run_usefulness`)
    """
    t0 = time.perf_counter()
    train = subsample(train, max_train_sentences, config.seed)
    if dev is None:
        train, dev = split_off(train, dev_fraction, config.seed)
    if TaskKind.of(task).is_wsd:
        def extract(sents, what):
            return wsd_examples(embedder, sents, state, what, first_sense_fn=first_sense_fn)
    else:
        def extract(sents, what):
            return tagging_examples(embedder, sents, state, what)
    ex_train, ex_dev, ex_test = extract(train, "training"), extract(dev, "dev"), extract(test, "test")
    embed_s = time.perf_counter() - t0
    info = getattr(getattr(embedder, "model", None), "info", None)
    model = getattr(info, "name", "") or getattr(embedder, "checksum", "")[:16]
    if cumulative:
        from elmo_engine.analysis.probes.usefulness import run_usefulness

        result = run_usefulness(ex_train, ex_dev, ex_test, config, str(TaskKind.of(task).value),
                                name, label, str(model), state, on_event)
    else:
        result = run_probe(ex_train, ex_dev, ex_test, config, task, name, label, str(model),
                           state, on_event)
    result.wall_time_s = time.perf_counter() - t0
    result.timings = {"embedding_s": embed_s, **result.timings}
    result.config["max_train_sentences"] = max_train_sentences
    return result


__all__ = ["DESCRIPTION", "LayerResult", "MixResult", "ProbeConfig", "ProbeResult", "ScoringMode",
           "TASK_DEFAULTS", "TaskKind", "centroid_predictions", "probe_sentences", "run_probe"]
