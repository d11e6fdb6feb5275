"""Probes on synthetic features where the answer is known; control tasks; WSD centroids; JSON."""
from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
import torch

from elmo_engine.analysis.probes.features import (ControlTask, Examples, classification_scores,
                                                  majority_baseline, split_off, subsample)
from elmo_engine.analysis.probes.experiment import (ProbeConfig, ProbeResult, centroid_predictions,
                                                    run_probe)

torch.set_num_threads(1)


def _synthetic(n, seed, informative=1, k=3, d=8, n_cls=4):
    """Labels linearly decodable from layer ``informative`` only; other layers are noise."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_cls, size=n)
    x = rng.normal(size=(k, n, d)).astype(np.float32)
    means = np.eye(n_cls, d) * 4.0
    x[informative] += means[y].astype(np.float32)
    x[0] *= 10.0                          # a layer of another scale (normalised away)
    labels = [f"L{c}" for c in y]
    types = [f"w{seed}_{i}" for i in range(n)]
    return Examples(x, labels, types, n_sentences=n)


@pytest.fixture(scope="module")
def synthetic_result():
    tr, dv, te = _synthetic(800, 0), _synthetic(200, 1), _synthetic(400, 2)
    cfg = ProbeConfig(epochs=25, patience=4, batch_size=128, control=True, seed=3)
    events = []
    res = run_probe(tr, dv, te, cfg, task="pos", name="synthetic", on_event=events.append)
    return res, events


def test_layer_one_probe_decodes_and_others_are_near_chance(synthetic_result):
    res, _ = synthetic_result
    acc = [lay.test for lay in res.layers]
    assert acc[1] > 0.95, acc
    assert acc[0] < 0.40 and acc[2] < 0.40, acc   # chance is 0.25 for 4 balanced classes
    assert all(0.0 <= lay.dev <= 1.0 for lay in res.layers)
    assert res.layers[1].dev > 0.95


def test_mix_puts_most_weight_on_the_informative_layer(synthetic_result):
    res, _ = synthetic_result
    w = np.asarray(res.mix.weights)
    assert w.shape == (3,) and abs(w.sum() - 1) < 1e-9
    assert int(np.argmax(w)) == 1 and w[1] > 0.6, w
    assert res.mix.test > 0.95
    assert res.mix.gamma > 0


def test_control_task_is_unlearnable_for_unseen_types(synthetic_result):
    res, _ = synthetic_result
    # every token is its own type, so test types are unseen: control accuracy ~ chance
    for lay in res.layers:
        assert lay.control_test is not None and lay.control_test < 0.45
        assert lay.selectivity == pytest.approx(lay.test - lay.control_test)
    assert res.layers[1].selectivity > 0.5


def test_events_stream_loss_and_dev_curves(synthetic_result):
    res, events = synthetic_result
    phases = Counter(e["phase"] for e in events)
    assert set(phases) == {"layers", "mix", "control layers", "control mix"}
    first = next(e for e in events if e["phase"] == "layers")
    assert len(first["loss"]) == 3 and len(first["dev"]) == 3
    layer_loss = [e["loss"][1] for e in events if e["phase"] == "layers"]
    assert layer_loss[-1] < layer_loss[0]          # training lowers the loss
    assert len(res.history["layers"]["dev"]) == phases["layers"]


def test_json_schema(synthetic_result, tmp_path):
    res, _ = synthetic_result
    out = tmp_path / "results.json"
    res.write_json(out)
    d = json.loads(out.read_text("utf-8"))
    assert isinstance(d["description"], str) and "selectivity" in d["description"]
    assert [e["layer"] for e in d["layers"]] == [0, 1, 2]
    for e in d["layers"]:
        assert {"layer", "dev", "test", "control_test", "selectivity"} <= set(e)
        assert 0.0 <= e["test"] <= 1.0 and 0.0 <= e["dev"] <= 1.0
        assert "centroid_test" not in e              # tagging task: no centroid score
    assert {"weights", "gamma", "test"} <= set(d["mix"])
    assert abs(sum(d["mix"]["weights"]) - 1) < 1e-9
    assert 0.0 <= d["baselines"]["majority"] <= 1.0
    back = ProbeResult.from_dict(d)
    assert back.layers[1].test == res.layers[1].test and back.mix.weights == res.mix.weights


def test_control_labels_differ_and_keep_the_distribution():
    rng = np.random.default_rng(0)
    n = 6000
    labels = rng.choice(["NOUN", "VERB", "DET", "ADJ"], p=[0.4, 0.3, 0.2, 0.1], size=n).tolist()
    types = [f"t{i % 3000}" for i in range(n)]      # each type occurs twice
    ex = Examples(np.zeros((1, n, 2), np.float32), labels, types)
    ctl = ControlTask(ex, seed=5)
    c = ctl.relabel(ex)
    differ = np.mean([a != b for a, b in zip(labels, c.labels)])
    assert differ > 0.5
    # one label per type, in every split
    per_type = {}
    for t, lab in zip(types, c.labels):
        assert per_type.setdefault(t, lab) == lab
    # type-level draws follow the token label distribution
    dist = Counter(per_type.values())
    for lab, p in {"NOUN": 0.4, "VERB": 0.3, "DET": 0.2, "ADJ": 0.1}.items():
        assert abs(dist[lab] / len(per_type) - p) < 0.035, (lab, dist)
    # seeded: same seed same labels, other seed other labels
    assert ControlTask(ex, seed=5).relabel(ex).labels == c.labels
    assert ControlTask(ex, seed=6).relabel(ex).labels != c.labels


def test_wsd_control_draws_from_the_lemmas_own_senses():
    groups = ["bank#NOUN"] * 4 + ["play#VERB"] * 4
    labels = ["bank%1", "bank%2", "bank%1", "bank%2", "play%1", "play%2", "play%3", "play%1"]
    ex = Examples(np.zeros((1, 8, 2), np.float32), labels, [f"w{i}" for i in range(8)],
                  groups=groups)
    c = ControlTask(ex, seed=0).relabel(ex)
    for g, lab in zip(groups, c.labels):
        assert lab.split("%")[0] == g.split("#")[0]


def _wsd_split(vectors, labels, groups, first):
    x = np.asarray(vectors, np.float32)[None]                  # (1, N, D)
    return Examples(x, list(labels), [f"w{i}" for i in range(len(labels))],
                    [(lab,) if lab else () for lab in labels], list(groups), list(first))


def test_wsd_centroid_and_first_sense_fallback():
    train = _wsd_split([[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9], [1, 1]],
                       ["bank%1", "bank%1", "bank%2", "bank%2", "play%1"],
                       ["bank#NOUN"] * 4 + ["play#VERB"], ["bank%1"] * 4 + ["play%1"])
    test = _wsd_split([[0.2, 1.0], [1.0, 0.05], [5, 5], [1, 0]],
                      ["bank%2", "bank%1", "play%1", "tree%2"],
                      ["bank#NOUN", "bank#NOUN", "play#VERB", "tree#NOUN"],
                      ["bank%1", "bank%1", "play%1", "tree%1"])
    pred = centroid_predictions(train.features[0], train, test.features[0], test)
    assert pred == ["bank%2", "bank%1", "play%1", "tree%1"]   # last: unseen lemma → first sense
    s = classification_scores(test.gold, pred)
    assert s["correct"] == 3 and s["f1"] == pytest.approx(0.75)
    base = majority_baseline(train, test)
    assert base["first_sense"] == pytest.approx(0.5)          # bank%1 and play%1 right
    # per-lemma majority: bank ties → the first seen (bank%1), play%1, tree unseen → first sense
    assert base["majority"] == pytest.approx(0.5)


def test_scorer_semantics_precision_recall():
    gold = [("a",), ("b", "c"), ("d",), ("e",)]
    s = classification_scores(gold, ["a", "c", None, "x"])
    assert s["attempted"] == 3 and s["correct"] == 2
    assert s["precision"] == pytest.approx(2 / 3) and s["recall"] == pytest.approx(0.5)
    assert s["f1"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))


def test_wsd_probe_end_to_end_on_synthetic_senses():
    rng = np.random.default_rng(0)

    def make(n, seed):
        r = np.random.default_rng(seed)
        lemma = r.integers(0, 5, size=n)
        sense = r.integers(0, 2, size=n)
        x = r.normal(size=(3, n, 6)).astype(np.float32)
        x[2, :, 0] += np.where(sense == 1, 3.0, -3.0)          # the sense lives in layer 2
        labels = [f"l{a}%{b}" for a, b in zip(lemma, sense)]
        groups = [f"l{a}#NOUN" for a in lemma]
        return Examples(x, labels, [f"w{i}" for i in range(n)], [(lab,) for lab in labels],
                        groups, [f"l{a}%0" for a in lemma], n_sentences=n)

    res = run_probe(make(600, 1), make(150, 2), make(300, 3),
                    ProbeConfig(epochs=20, patience=3, batch_size=64), task="wsd")
    assert res.is_wsd
    assert res.layers[2].test > 0.9 and res.layers[0].test < 0.7
    assert res.layers[2].centroid_test > 0.9 and res.layers[0].centroid_test < 0.7
    assert int(np.argmax(res.mix.weights)) == 2
    assert set(res.baselines) == {"majority", "first_sense"}
    assert set(res.layers[0].per_label) == {"NOUN"}
    del rng


def test_splits_are_seeded_and_disjoint():
    items = list(range(100))
    a, b = split_off(items, 0.1, seed=4)
    assert len(b) == 10 and not set(a) & set(b) and sorted(a + b) == items
    assert split_off(items, 0.1, seed=4) == (a, b)
    sub = subsample(items, 30, seed=1)
    assert len(sub) == 30 and sub == sorted(sub) and subsample(items, 30, seed=1) == sub


def test_mlp_probe_solves_what_a_linear_probe_cannot():
    def xor(n, seed):
        r = np.random.default_rng(seed)
        x = r.normal(size=(1, n, 4)).astype(np.float32)
        y = (x[0, :, 0] > 0) ^ (x[0, :, 1] > 0)                  # XOR: not linearly separable
        return Examples(x, [str(int(v)) for v in y], [f"w{i}" for i in range(n)])

    tr, dv, te = xor(1200, 0), xor(300, 1), xor(400, 2)
    lin = run_probe(tr, dv, te, ProbeConfig(epochs=15, batch_size=64))
    mlp = run_probe(tr, dv, te, ProbeConfig(epochs=30, patience=5, batch_size=64, hidden=32,
                                            lr=1e-2))
    assert lin.layers[0].test < 0.65
    assert mlp.layers[0].test > 0.85
    assert mlp.config["hidden"] == 32


def test_cancel_stops_training_with_cancelled_error():
    from elmo_engine.errors import CancelledError
    from elmo_engine.progress import TaskState

    state = TaskState()
    seen = []

    def on_event(e):
        seen.append(e["epoch"])
        state.cancel()                        # cancel after the first epoch

    with pytest.raises(CancelledError):
        run_probe(_synthetic(300, 0), _synthetic(100, 1), _synthetic(100, 2),
                  ProbeConfig(epochs=50, patience=50, batch_size=32), state=state,
                  on_event=on_event)
    assert seen == [1]
