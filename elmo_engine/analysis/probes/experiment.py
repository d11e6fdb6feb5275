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

The result is a plain :class:`~.results.ProbeResult` that writes itself as JSON; the settings are
:class:`~.settings.ProbeConfig` (both torch-free, re-exported here).
"""
from __future__ import annotations

import time
from dataclasses import asdict
from typing import Dict, List, Optional, Sequence

import numpy as np

from elmo_engine.errors import InputError
from elmo_engine.analysis.probes.features import (ControlTask, Examples, majority_baseline,
                                                  split_off, subsample, tagging_examples,
                                                  wsd_examples)
from elmo_engine.analysis.probes.classifiers import EventFn, Normaliser
from elmo_engine.analysis.probes.kinds import ScoringMode, TaskKind
from elmo_engine.analysis.probes.runner import (Encoder, centroid_positions, centroids,
                                                train_seeds)
from elmo_engine.analysis.probes.results import (DESCRIPTION, LayerResult, MixResult, ProbeResult,
                                              model_label)
from elmo_engine.analysis.probes.settings import TASK_DEFAULTS, ProbeConfig
from elmo_engine.progress import TaskState

#: a mix whose weights all lie within this of 1/K is reported as "near uniform"
NEAR_UNIFORM = 0.05
WSD_CONTROL_NOTE = (
    "WSD control task: each word form (within its lemma) gets one sense drawn uniformly from the "
    "lemma's WordNet senses; a probe reaches it only by remembering the form, so a high control "
    "score says the layer identifies word forms, and selectivity = task - control can be "
    "negative (most lemmas have one form). Compare layers with each other and with the baseline.")


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
    model = model_label(embedder)
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
