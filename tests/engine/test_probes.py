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
    seed0 = [e for e in events if e["phase"] == "layers" and e["seed"] == res.seeds[0]]
    assert len(res.history["layers"]["dev"]) == len(seed0)
    assert {e["seed"] for e in events} == set(res.seeds) == {3, 4, 5}


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
                    ProbeConfig(epochs=20, patience=3, batch_size=64, n_seeds=1), task="wsd")
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
    lin = run_probe(tr, dv, te, ProbeConfig(epochs=15, batch_size=64, n_seeds=1))
    mlp = run_probe(tr, dv, te, ProbeConfig(epochs=30, patience=5, batch_size=64, hidden=32,
                                            lr=1e-2, n_seeds=1))
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


def test_seeds_give_mean_sd_and_per_seed_values(synthetic_result):
    res, _ = synthetic_result
    assert res.seeds == [3, 4, 5]
    for lay in res.layers:
        assert len(lay.test_per_seed) == 3
        assert lay.test == pytest.approx(np.mean(lay.test_per_seed))
        assert lay.test_sd == pytest.approx(np.std(lay.test_per_seed, ddof=1))
        assert lay.control_test_sd is not None and lay.selectivity_sd is not None
    w = np.asarray(res.mix.weights_per_seed)
    assert w.shape == (3, 3)
    np.testing.assert_allclose(res.mix.weights, w.mean(0))
    np.testing.assert_allclose(res.mix.weights_sd, w.std(0, ddof=1))
    # the mix trains at least mix_min_epochs (10 by default), then stops on dev loss
    assert all(e >= 10 for e in res.mix.epochs_per_seed)
    assert res.config["mix_min_epochs"] == 10 and len(res.history["mix"]["dev_loss"]) >= 10
    d = res.to_dict()
    assert {"test_sd", "test_per_seed", "below_baseline"} <= set(d["layers"][0])
    assert {"weights_sd", "near_uniform", "epochs_per_seed"} <= set(d["mix"])
    assert "_sd" in d["description"] and "near_uniform" in d["description"]


def test_scores_under_the_baseline_are_flagged_and_uniform_weights_noted():
    # the label is the word's identity; the vectors carry nothing: every probe is under the
    # word-majority baseline, and no layer is better than another (weights stay near uniform)
    rng = np.random.default_rng(0)

    def make(n, seed):
        r = np.random.default_rng(seed)
        words = r.integers(0, 6, n)
        x = r.normal(size=(3, n, 4)).astype(np.float32)
        return Examples(x, [f"T{w % 3}" for w in words], [f"w{w}" for w in words])

    res = run_probe(make(300, 0), make(100, 1), make(200, 2),
                    ProbeConfig(epochs=3, batch_size=64, n_seeds=2, mix_min_epochs=3,
                                mix_lr=1e-4))
    assert res.reference_baseline == "word_majority" and res.baselines["word_majority"] > 0.95
    assert all(lay.below_baseline for lay in res.layers) and res.mix.below_baseline
    assert res.mix.near_uniform
    assert any("near uniform" in n for n in res.notes)
    assert sum("under the word_majority baseline" in n for n in res.notes) == 4
    from elmo_engine.analysis.probes.tables import results_rows, summary

    rows = results_rows([res])
    assert all("▼" in r[5] for r in rows) and "weights near uniform" in rows[-1][10]
    assert "under baseline" in summary(res)
    del rng


def test_wsd_candidates_are_the_wordnet_senses_seen_in_training():
    cands = ("bank%1", "bank%2", "bank%3")                    # bank%3: never in training
    train = Examples(np.asarray([[[1, 0], [0.9, 0.1], [0, 1], [0.1, 0.9]]], np.float32),
                     ["bank%1", "bank%1", "bank%2", "bank%2"], ["bank"] * 4,
                     groups=["bank#NOUN"] * 4, first_sense=["bank%1"] * 4,
                     candidates=[cands] * 4)
    test = Examples(np.asarray([[[0, 1], [1, 0], [1, 1]]], np.float32),
                    ["bank%2", "bank%3", "tree%2"], ["bank", "bank", "tree"],
                    groups=["bank#NOUN", "bank#NOUN", "tree#NOUN"],
                    first_sense=["bank%1", "bank%1", "tree%1"],
                    candidates=[cands, cands, ("tree%1", "tree%2")])
    from elmo_engine.analysis.probes.runner import Encoder

    enc = Encoder(train, restricted=True)
    split = enc.split(test, "cpu")
    assert split.cand.tolist() == [[0, 1], [0, 1], [-1, -1]]   # bank%3 has no weights
    assert split.y.tolist() == [1, -1, -1]                     # unreachable golds: -1
    pred = centroid_predictions(train.features[0], train, test.features[0], test)
    assert pred == ["bank%2", "bank%1", "tree%1"]              # tree: no trained sense → first


def test_wsd_control_draws_from_the_wordnet_candidates_per_word_type():
    cands = {"bank#NOUN": ("bank%1", "bank%2", "bank%3", "bank%4"),
             "play#VERB": ("play%1", "play%2")}
    groups = ["bank#NOUN"] * 40 + ["play#VERB"] * 40
    types = [f"f{i % 10}" for i in range(80)]
    ex = Examples(np.zeros((1, 80, 2), np.float32), [cands[g][0] for g in groups], types,
                  groups=groups, candidates=[cands[g] for g in groups])
    c = ControlTask(ex, seed=0).relabel(ex)
    per_type = {}
    for g, t, lab in zip(groups, types, c.labels):
        assert lab in cands[g]
        assert per_type.setdefault((g, t), lab) == lab           # one sense per word type
    assert len({lab for (g, _), lab in per_type.items() if g == "bank#NOUN"}) >= 3


def test_demo_word_sense_is_scored_per_lemma():
    def make(n, seed):
        r = np.random.default_rng(seed)
        lemma = np.where(np.arange(n) % 4 == 0, 1, 0)             # lemma 0 three times as often
        sense = r.integers(0, 2, n)
        x = r.normal(size=(2, n, 4)).astype(np.float32)
        x[1, :, 0] += np.where((lemma == 0) & (sense == 1), 4.0, 0.0)
        x[1, :, 0] -= np.where((lemma == 0) & (sense == 0), 4.0, 0.0)
        labels = [f"l{a}%{b}" for a, b in zip(lemma, sense)]
        return Examples(x, labels, [f"w{i}" for i in range(n)], groups=[f"l{a}#NOUN" for a in lemma],
                        first_sense=[f"l{a}%0" for a in lemma],
                        candidates=[(f"l{a}%0", f"l{a}%1") for a in lemma])

    res = run_probe(make(400, 1), make(120, 2), make(200, 3),
                    ProbeConfig(epochs=10, batch_size=64, n_seeds=1, mix_min_epochs=2),
                    task="demo-wsd")
    lay = res.layers[1]
    assert set(lay.per_lemma) == {"l0#NOUN", "l1#NOUN"}
    assert lay.test == pytest.approx(np.mean([v["accuracy"] for v in lay.per_lemma.values()]))
    assert lay.per_lemma["l0#NOUN"]["accuracy"] > 0.9
    assert res.reference_baseline == "majority" and 0.3 < res.baselines["majority"] < 0.7


def test_normaliser_mix_in_chunks_equals_the_whole_array_mix():
    from elmo_engine.analysis.probes.classifiers import Normaliser

    rng = np.random.default_rng(3)
    x = (rng.standard_normal((3, 1000, 16)) * [[[1.0]], [[4.0]], [[0.5]]] + [[[2.0]], [[-1.0]],
                                                                              [[0.0]]])
    x = x.astype(np.float16)
    norm = Normaliser(x)
    w = np.array([0.2, 0.3, 0.5], np.float32)
    normalised = (x.astype(np.float32) - norm.mu[:, None, None]) / norm.sd[:, None, None]
    want = np.tensordot(w, normalised, axes=(0, 0))
    got = norm.mixed(x, w, chunk=128)
    assert got.shape == (1000, 16) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
    assert abs(float(got.mean())) < 0.1            # every layer centred before mixing


def test_task_kinds_choose_examples_and_scoring():
    from elmo_engine.analysis.probes.kinds import ScoringMode, TaskKind
    from elmo_engine.analysis.probes.tasks import TASKS
    from elmo_engine.errors import InputError

    assert TASKS == ("pos", "wsd", "tsv", "demo-pos", "demo-wsd", "demo-supersense")
    assert [k for k in TaskKind if k.is_wsd] == [TaskKind.WSD, TaskKind.DEMO_WSD]
    assert TaskKind.of("wsd").scoring is ScoringMode.F1
    assert TaskKind.of("demo-wsd").scoring is ScoringMode.LEMMA
    assert {TaskKind.of(t).scoring for t in ("pos", "tsv", "demo-pos", "demo-supersense")} == {
        ScoringMode.ACCURACY}
    assert TaskKind.of(TaskKind.POS) is TaskKind.POS and not TaskKind.DEMO_SUPERSENSE.is_wsd
    with pytest.raises(InputError, match="unknown probe task 'semcor'"):
        TaskKind.of("semcor")
